package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Errors a proposal can end with. All are retriable: the SDK sends the
// same records again (same message ids) to the new leader.
var (
	// ErrNotLeader: this replica is not the group's leader.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrOverwritten: the entry was replaced by a new leader's before it
	// committed; the records were not stored.
	ErrOverwritten = errors.New("replication: entry overwritten by a new leader")
	// ErrStopped: the replica stopped before the proposal finished.
	ErrStopped = errors.New("replication: replica stopped")
	// ErrBusy: too many proposals are waiting; try again shortly.
	ErrBusy = errors.New("replication: too many proposals queued")
	// ErrDuplicateInFlight: a copy of the batch (a retry) is stored but
	// not committed yet; try again shortly for its offsets.
	ErrDuplicateInFlight = errors.New("replication: a copy of this batch is not committed yet")
	// ErrNoLeader: this replica knows no leader of its group right now
	// (an election, or a restart before the leader's first message).
	ErrNoLeader = errors.New("replication: no leader known")
)

// AckPoint says when a proposal is answered.
type AckPoint uint8

const (
	// AckPersisted answers once the leader has fsynced the entry (the
	// `eventual` mode).
	AckPersisted AckPoint = iota
	// AckCommitted answers once a quorum has it (the `consistent` mode).
	AckCommitted
)

// Transport carries Raft messages to other replicas of the group. Send
// must not block: it may drop messages (raft sends again).
type Transport interface {
	Send(group string, msgs []*pb.Message)
}

// Config configures a Replica.
type Config struct {
	Group  string
	NodeID uint64
	// Peers are the group's voters, used to bootstrap a new group (the
	// same list on every replica). Ignored when the log has state. Empty
	// for a replica joining an existing group: it waits for the leader,
	// which added it with ChangeVoter, to send it the group's state.
	Peers         []uint64
	TickInterval  time.Duration // default 100ms
	ElectionTicks int           // default 10
	HeartbeatTick int           // default 1
	// MaxEntryBytes bounds the batches coalesced into one entry (default
	// 4 MiB). MaxQueue and MaxQueueBytes bound the proposals waiting to
	// go into an entry (defaults DefaultMaxQueue, DefaultMaxQueueBytes):
	// at the bound Propose waits, at most ProposeWait, then fails with
	// ErrBusy.
	MaxEntryBytes int
	MaxQueue      int
	MaxQueueBytes int64
	// ProposeWait bounds how long Propose waits for room in the queue
	// (default DefaultProposeWait).
	ProposeWait time.Duration
	Logger      *slog.Logger
	// OnCommit is called, from the replica's goroutine, with the entries'
	// batches as they commit, in order, and the new high watermark: the
	// offset after every committed record. The batches must not be
	// modified.
	OnCommit func(batches [][]byte, hw int64)

	// SnapshotEntries > 0 compacts the log once that many entries were
	// applied since the last compaction: Snapshot is called, on the
	// replica's goroutine, for the owner's state with every entry applied
	// so far, and the log up to there is folded into it (LogStore.Compact).
	// A follower that needs older entries gets that state instead, given
	// to its OnSnapshot with the partition offset it continues at. 0 never
	// compacts.
	SnapshotEntries int
	Snapshot        func() []byte
	OnSnapshot      func(state []byte, offset int64)

	// OnConfChange is called, on the replica's goroutine, when a change of
	// the group's voters is applied, with the node and the change's
	// context (ChangeVoter's: the node's address).
	OnConfChange func(node uint64, added bool, context []byte)

	// OnFail is called once, on the replica's goroutine, when a write or
	// fsync of the group's storage failed: the group has stopped taking
	// part in Raft (its storage's state past the last fsync is unknown:
	// the owner stops it and opens the group again from disk, as a
	// restart would), and every pending proposal failed. It is
	// called too when raft panicked on a peer's message that admit let
	// through (its state is then unknown).
	OnFail func(err error)

	// Synced, when set, is called on the replica's goroutine after each
	// fsync of the group's storage, with how long it took and the records
	// it made durable; Duplicate when a proposal was answered as a retry
	// of a batch already in the log. For metrics.
	Synced    func(d time.Duration, records int)
	Duplicate func()
	// Stages, when set, is called on the replica's goroutine for each
	// entry this replica proposed and saw committed, with where its time
	// went (Stages). For metrics: one call per entry, never per record.
	Stages func(Stages)
	// Refused, when set, is called on the replica's goroutine for every
	// peer message dropped because no correct peer sends it (see admit).
	Refused func(from uint64, why string)
}

// Stages is where the time of one entry this replica proposed went, from
// the arrival of its oldest proposal to the answers of its publishers.
// The four add up to that whole time.
type Stages struct {
	// Queue: from Propose to the entry's proposal to raft (the wait for
	// the replica's goroutine: the work in hand).
	Queue time.Duration
	// Persist: from the proposal to the end of the leader's fsync of
	// the entry (the write, the wait for the fsync in progress, its own).
	Persist time.Duration
	// Commit: from the leader's fsync to the entry's commit being seen
	// (the quorum's acknowledgements, whose fsyncs ran alongside the
	// leader's; about nothing on a group of one).
	Commit time.Duration
	// Apply: from the commit being seen to the publishers answered (the
	// owner's OnCommit, i.e. the records made readable, then the acks).
	Apply time.Duration
	// Records is how many records the entry holds.
	Records int
}

// nanotime reads the monotonic clock, in ns since the process's start.
func nanotime() int64 { return int64(time.Since(processStart)) }

var processStart = time.Now()

// Queue bounds and the wait at them (Config).
const (
	DefaultMaxQueue      = 4096
	DefaultMaxQueueBytes = 64 << 20
	DefaultProposeWait   = 10 * time.Second
)

// Raft timing and sizes: the defaults of Config, and the limits every
// group's raft.Config gets.
const (
	// DefaultTickInterval is a Raft tick: an election takes
	// DefaultElectionTicks of them without a heartbeat (1 s), a leader
	// sends heartbeats every DefaultHeartbeatTick (100 ms).
	DefaultTickInterval  = 100 * time.Millisecond
	DefaultElectionTicks = 10
	DefaultHeartbeatTick = 1
	// DefaultMaxEntryBytes bounds the batches coalesced into one entry.
	DefaultMaxEntryBytes = 4 << 20
	// maxMsgBytes bounds the entries of one append message to a follower;
	// maxInflightMsgs, the appends sent to a follower and not yet
	// acknowledged; maxUncommittedBytes, what a leader accepts beyond its
	// commit index (more is refused as a full queue, never buffered).
	//
	// One append in flight: what the leader appends while a follower
	// writes and fsyncs the previous append goes to it in one message
	// once it answers, as a Kafka follower's next fetch takes everything
	// since its last. A follower fsyncs once per such batch in any case
	// (its syncer takes what arrived during the fsync before), so the
	// pipelined messages bought no latency; they cost a message, a frame
	// and a Ready on the follower per leader entry (3 nodes at 10,000
	// records/s: each follower's CPU 0.24-0.25 cores instead of
	// 0.29-0.31, latency and throughput no worse: docs/BENCHMARKS.md).
	// A message's bytes then bound a follower to about that much per
	// round trip and fsync: at 1 MB a follower fell behind the leader's
	// 100 MB/s of 1 KB records (its appends then read back from the
	// log); at 4 MB the 3-node 1 KB x 8 cell published 9-44% more, the
	// 10,000/s latency cell no different (docs/BENCHMARKS.md). Small
	// entries still go one round trip each.
	maxMsgBytes         = 4 << 20
	maxInflightMsgs     = 1
	maxUncommittedBytes = 64 << 20
	// inboxSize bounds the peers' messages received and not yet stepped:
	// beyond it a message is dropped, as a lossy network would (Raft
	// retries).
	inboxSize = 4096
)

func (c *Config) defaults() {
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTick == 0 {
		c.HeartbeatTick = DefaultHeartbeatTick
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if c.ProposeWait == 0 {
		c.ProposeWait = DefaultProposeWait
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// noLeaderWait bounds how long proposals wait for an election.
const noLeaderWait = 3 * time.Second

// proposal is one publish waiting for its entry.
type proposal struct {
	batches [][]byte
	records int
	size    int
	ack     AckPoint
	done    func(first int64, err error)

	// Set when its entry is written to the log (appended).
	index uint64
	first int64

	key   dedup.Key // of its one batch, when keyed
	keyed bool

	at int64 // when Propose took it (monotonic ns: nanotime)
}

// pendingEntry is an entry this replica proposed: its proposals in order.
type pendingEntry struct {
	id    uint64
	props []*proposal
	index uint64 // 0 until written to the log
	acked bool   // AckPersisted proposals answered

	// Stage times (monotonic ns), for Config.Stages: the oldest
	// proposal's arrival, the proposal to raft, the end of the fsync.
	arrived, proposed, persisted int64
}

// Replica runs one Raft group on this node: a RawNode over a LogStore,
// driven by one goroutine (the Ready loop). Propose and Step hand work to
// that goroutine through bounded channels.
type Replica struct {
	cfg   Config
	store *LogStore
	rn    *raft.RawNode
	tr    Transport

	propc chan *proposal
	// queued is the bytes of the proposals in propc (or about to enter
	// it); bounded by Config.MaxQueueBytes. Proposers waiting for room
	// wait on room, which is closed (and replaced) when bytes leave.
	queued      atomic.Int64
	roomMu      sync.Mutex
	room        chan struct{} // guarded by roomMu
	roomWaiters int           // guarded by roomMu
	// ownsLog: Stop closes the data log (the replica was opened by Open).
	ownsLog bool
	// boot: this replica bootstrapped its group when it started.
	boot bool
	// alone: this replica is its group's only voter (as applied here).
	alone atomic.Bool
	recvc chan *pb.Message
	// calls runs functions on the loop goroutine (RawNode is not safe for
	// concurrent use).
	calls chan func()
	stopc chan struct{}
	done  chan struct{}
	// failedc is closed when the group's storage failed (see
	// Config.OnFail); failErr says how. Written before the close.
	failedc chan struct{}
	failErr error

	// Owned by the loop goroutine.
	nextID  uint64
	pending map[uint64]*pendingEntry // by proposal id
	byIndex map[uint64]*pendingEntry // written to the log, not yet committed
	// held are proposals raft refused for flow control (too much
	// uncommitted); they go in before any new one.
	held []*proposal

	leader atomic.Uint64 // last known leader, for other goroutines
	// leaderc is closed (and replaced) when leader changes.
	leaderMu sync.Mutex
	leaderc  chan struct{} // guarded by leaderMu
	// leadIndex is the index of the first entry of this replica's term
	// while it leads (0 otherwise).
	leadIndex atomic.Uint64
	// term is the group's Raft term as this replica last stored it.
	term atomic.Uint64
	// applied is the index of the last entry applied (handed to OnCommit).
	applied atomic.Uint64
	// reads are the ReadIndex requests waiting for their index, by request
	// context. Owned by the loop goroutine.
	reads   map[string]chan uint64
	readSeq uint64
	// inflight are the keys of proposals handed to raft and not yet in the
	// log (the log's dedup window knows the rest). Loop goroutine only.
	inflight map[dedup.Key]struct{}
	// members are the nodes of the group's configuration as applied here
	// (empty before the first configuration arrives); refused counts the
	// peer messages dropped by admit. Loop goroutine only.
	members []uint64
	refused uint64
	// entryBuf is where proposeAll builds entries. Loop goroutine only.
	entryBuf []byte
	// sync runs the fsyncs; syncing counts the jobs queued to it and not
	// yet taken back (syncCompleted). The count: loop goroutine only.
	sync    *syncer
	syncing int
	syncErr error // the first failed fsync; the loop stops on it
	// timed: the entries the apply in progress found this replica
	// proposed, for Config.Stages. Loop goroutine only.
	timed []*pendingEntry
	// refusedLogged is when refuse last logged, at refused count
	// refusedAtLog.
	refusedLogged time.Time
	refusedAtLog  uint64
	// lostReported: when reportLost last told the leader. Replica
	// goroutine.
	lostReported time.Time
	// stats are the counters and gauges of Stats.
	stats stats
	// assigned: the nodes the cluster assigns the group to (SetAssigned).
	assigned atomic.Pointer[[]uint64]
	// retiring: this node is stopping (Retire).
	retiring atomic.Bool
}

// NewReplica starts the group's replica over store. A store with no entries
// and no state is bootstrapped with cfg.Peers as voters.
func NewReplica(cfg Config, store *LogStore, tr Transport) (*Replica, error) {
	cfg.defaults()
	rc := &raft.Config{
		ID: cfg.NodeID, ElectionTick: cfg.ElectionTicks, HeartbeatTick: cfg.HeartbeatTick,
		Storage: store, MaxSizePerMsg: maxMsgBytes, MaxInflightMsgs: maxInflightMsgs,
		MaxUncommittedEntriesSize: maxUncommittedBytes, CheckQuorum: true, PreVote: true,
		AsyncStorageWrites: true, // the loop never waits for an fsync: syncer.go
		Logger:             raftLogger{cfg.Logger.With("group", cfg.Group)},
	}
	hs, _, _ := store.InitialState()
	rc.Applied = store.Applied()
	boot := false
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, err
	}
	if last, _ := store.LastIndex(); last == 0 && raft.IsEmptyHardState(hs) && len(cfg.Peers) > 0 {
		peers := make([]raft.Peer, len(cfg.Peers))
		for i, id := range cfg.Peers {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, err
		}
		boot = true
	}
	r := &Replica{
		cfg: cfg, store: store, rn: rn, tr: tr,
		propc: make(chan *proposal, cfg.MaxQueue), recvc: make(chan *pb.Message, inboxSize), calls: make(chan func()),
		stopc: make(chan struct{}), done: make(chan struct{}),
		pending: make(map[uint64]*pendingEntry), byIndex: make(map[uint64]*pendingEntry),
		reads: make(map[string]chan uint64), inflight: make(map[dedup.Key]struct{}),
		room: make(chan struct{}), failedc: make(chan struct{}), boot: boot, leaderc: make(chan struct{}),
	}
	r.applied.Store(rc.Applied)
	r.term.Store(hs.GetTerm())
	r.stats.started = time.Now()
	r.noteVoters()
	r.sync = newSyncer(store, cfg.NodeID, func(msgs []*pb.Message) { tr.Send(cfg.Group, msgs) })
	// A bootstrap's configuration is stored first; a group of one then
	// elects itself and applies what it had committed before a restart,
	// so it serves its log as soon as NewReplica returns.
	err = r.settle()
	if err == nil && r.campaignAlone() {
		err = r.settle()
	}
	if err != nil {
		r.sync.close()
		return nil, err
	}
	go r.run()
	return r, nil
}

// Propose asks for batches (validated record batches, owned by the replica
// from now on) to be appended; done is called once with the offset of the
// first record or an error (ErrNotLeader, ErrOverwritten, ErrStopped,
// ErrBusy: all retriable), from the replica's goroutine except for ErrBusy
// and ErrStopped. Proposals keep their order. When the queue is full (by
// count or bytes, Config.MaxQueue and MaxQueueBytes), Propose blocks, at
// most Config.ProposeWait, then fails with ErrBusy: that wait is the
// backpressure a publisher's stream feels; rejecting at once instead
// would let a retried batch land behind later ones.
//
// REQUIRES: not called from a replica's goroutine.
func (r *Replica) Propose(batches [][]byte, ack AckPoint, done func(first int64, err error)) {
	if ack == AckPersisted && r.alone.Load() {
		// A group of one commits what it persisted at once: answering at
		// the commit costs nothing and makes the records readable by the
		// time the publisher hears back, as on a single node it expects.
		ack = AckCommitted
	}
	p := &proposal{batches: batches, ack: ack, done: done}
	if r.cfg.Stages != nil {
		p.at = nanotime()
	}
	for _, b := range batches {
		h, _ := record.ParseHeader(b)
		p.records += int(h.RecordCount)
		p.size += len(b)
		if len(batches) == 1 && r.store.dedup != nil {
			p.key, p.keyed = dedup.KeyOfHeader(h, b)
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	expired := func() <-chan time.Time {
		if timer == nil {
			timer = time.NewTimer(r.cfg.ProposeWait)
		}
		return timer.C
	}
	if err := r.reserve(int64(p.size), expired); err != nil {
		done(0, err)
		return
	}
	select {
	case r.propc <- p:
		return
	case <-r.stopc:
		r.unreserve(int64(p.size))
		done(0, ErrStopped)
		return
	case <-r.failedc:
		r.unreserve(int64(p.size))
		done(0, r.failErr)
		return
	default:
	}
	// Full: wait (this blocks the caller, which is how a publisher's stream
	// stops being read), then give up retriably.
	select {
	case r.propc <- p:
	case <-r.stopc:
		r.unreserve(int64(p.size))
		done(0, ErrStopped)
	case <-r.failedc:
		r.unreserve(int64(p.size))
		done(0, r.failErr)
	case <-expired():
		r.unreserve(int64(p.size))
		done(0, fmt.Errorf("%w: %d proposals queued in %s", ErrBusy, cap(r.propc), r.cfg.Group))
	}
}

// reserve counts n bytes against MaxQueueBytes, waiting for room until
// expired fires. A proposal always fits an empty queue, however large.
func (r *Replica) reserve(n int64, expired func() <-chan time.Time) error {
	for {
		q := r.queued.Load()
		if q == 0 || q+n <= r.cfg.MaxQueueBytes {
			if r.queued.CompareAndSwap(q, q+n) {
				return nil
			}
			continue
		}
		r.roomMu.Lock()
		r.roomWaiters++
		room := r.room
		r.roomMu.Unlock()
		if r.queued.Load() != q { // it moved meanwhile: look again
			r.leaveRoom()
			continue
		}
		select {
		case <-room:
			r.leaveRoom()
		case <-r.stopc:
			r.leaveRoom()
			return ErrStopped
		case <-expired():
			r.leaveRoom()
			return fmt.Errorf("%w: %d bytes queued in %s (limit %d)", ErrBusy, q, r.cfg.Group, r.cfg.MaxQueueBytes)
		}
	}
}

func (r *Replica) leaveRoom() {
	r.roomMu.Lock()
	r.roomWaiters--
	r.roomMu.Unlock()
}

// unreserve gives back n queued bytes and wakes the proposers waiting for
// room.
func (r *Replica) unreserve(n int64) {
	r.queued.Add(-n)
	r.roomMu.Lock()
	if r.roomWaiters > 0 {
		close(r.room)
		r.room = make(chan struct{})
	}
	r.roomMu.Unlock()
}

// take is how the loop receives a queued proposal: its bytes leave the
// queue.
func (r *Replica) take(p *proposal) *proposal {
	r.unreserve(int64(p.size))
	return p
}

// Step hands a message from a peer to the group. It drops the message when
// the inbox is full (raft sends again).
func (r *Replica) Step(m *pb.Message) {
	select {
	case r.recvc <- m:
	default:
	}
}

// Bootstrapped reports whether this replica created its group (a new
// group: nothing was stored yet, and Config.Peers were its voters).
func (r *Replica) Bootstrapped() bool { return r.boot }

// WaitLeader returns the group's leader once one is known, waiting at most
// d (0 when none is known by then, or the replica stopped).
func (r *Replica) WaitLeader(d time.Duration) uint64 {
	var timeout <-chan time.Time
	for {
		r.leaderMu.Lock()
		changed := r.leaderc
		r.leaderMu.Unlock()
		if lead := r.leader.Load(); lead != 0 {
			return lead
		}
		if timeout == nil {
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return 0
		case <-r.stopc:
			return 0
		case <-r.failedc:
			return 0
		}
	}
}

// WaitLeading waits, at most d, until Leading; it reports whether this
// replica leads and knows what is committed. A new leader knows once the
// first entry of its term is applied: a round trip to a quorum.
func (r *Replica) WaitLeading(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !r.Leading() {
		if r.leader.Load() != r.cfg.NodeID || time.Now().After(deadline) {
			return false
		}
		select {
		case <-r.stopc:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// Leading reports whether this replica leads its group and knows what is
// committed: the first entry of its term is applied, so every entry a
// previous leader committed is too.
func (r *Replica) Leading() bool {
	idx := r.leadIndex.Load()
	return r.leader.Load() == r.cfg.NodeID && idx > 0 && r.applied.Load() >= idx
}

// Leader returns the node id of the group's leader as last seen (0: none).
func (r *Replica) Leader() uint64 {
	return r.leader.Load()
}

// Term returns the group's Raft term as this replica last stored it: the
// leader's term when this replica leads (Kafka's leader epoch).
func (r *Replica) Term() uint64 {
	return r.term.Load()
}

// Campaign starts an election for this replica now, unless the group has
// a leader or this replica cannot lead; it does not wait for the outcome.
// A new group's preferred leader calls it so that the group elects in a
// round trip instead of after an election timeout (1-2 s). Votes reaching
// replicas that have not created the group yet are dropped; the election
// timeout then tries again, as without Campaign.
func (r *Replica) Campaign() {
	f := func() {
		if r.rn.BasicStatus().Lead == raft.None {
			_ = r.rn.Campaign() // fails only for an unpromotable replica
		}
	}
	_ = r.call(context.Background(), f)
}

// campaignAlone makes a replica that is its group's only voter its leader
// at once (a cluster of one needs no election timeout), and reports
// whether it campaigned. Before the loop starts, or on its goroutine.
func (r *Replica) campaignAlone() bool {
	if !r.alone.Load() {
		return false
	}
	if r.rn.BasicStatus().Lead != raft.None {
		return false
	}
	return r.rn.Campaign() == nil
}

// noteVoters records whether this replica is its group's only voter.
func (r *Replica) noteVoters() {
	_, cs, _ := r.store.InitialState()
	v := cs.GetVoters()
	r.members = r.members[:0]
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, id := range ids {
			if !slices.Contains(r.members, id) {
				r.members = append(r.members, id)
			}
		}
	}
	r.alone.Store(len(v) == 1 && v[0] == r.cfg.NodeID && len(cs.GetLearners()) == 0 && len(cs.GetVotersOutgoing()) == 0)
}

// call hands f to the replica's goroutine, which runs it between Readies.
// ErrStopped when the replica stopped, ctx.Err() when ctx ended first; f
// does not run then.
func (r *Replica) call(ctx context.Context, f func()) error {
	select {
	case r.calls <- f:
		return nil
	case <-r.stopc:
		return ErrStopped
	case <-r.failedc:
		return r.failErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Progress returns, when this replica leads its group, how many entries
// each replica is behind the leader's last entry (ok false otherwise or
// when the replica stopped).
func (r *Replica) Progress() (lag map[uint64]uint64, ok bool) {
	done := make(chan struct{})
	f := func() {
		defer close(done)
		st := r.rn.Status()
		if st.RaftState != raft.StateLeader {
			return
		}
		last := st.GetCommit()
		if li, err := r.store.LastIndex(); err == nil {
			last = li
		}
		lag = make(map[uint64]uint64, len(st.Progress))
		for id, pr := range st.Progress {
			// The leader's own match waits for its fsync in flight: its
			// log is the reference, never behind.
			if pr.Match < last && id != r.cfg.NodeID {
				lag[id] = last - pr.Match
			} else {
				lag[id] = 0
			}
		}
		ok = true
	}
	if r.call(context.Background(), f) != nil {
		return nil, false
	}
	<-done
	return lag, ok
}

// TransferLeadership asks the group to make node the leader, if this
// replica leads and node is fully caught up (lag 0); it reports whether
// the transfer was started.
func (r *Replica) TransferLeadership(node uint64) bool {
	started := false
	done := make(chan struct{})
	f := func() {
		defer close(done)
		st := r.rn.Status()
		if st.RaftState != raft.StateLeader || node == r.cfg.NodeID {
			return
		}
		pr, ok := st.Progress[node]
		last, err := r.store.LastIndex()
		if !ok || err != nil || pr.Match < last {
			return
		}
		r.rn.TransferLeader(node)
		started = true
	}
	if r.call(context.Background(), f) == nil {
		<-done
	}
	if started { // the loop's next Ready sends the MsgTimeoutNow
		r.cfg.Logger.Info("transferring leadership", "group", r.cfg.Group, "to", node)
	}
	return started
}

// ReadIndex returns once this replica has applied every entry committed in
// the group before the call (a linearizable read point, asked of the
// leader): what a node reads afterwards includes any write acknowledged
// before, wherever it was made. It fails with ErrNoLeader at once while
// this replica knows no leader (Raft drops such a request without an
// answer: the caller would wait out ctx for nothing, as a restarted node
// did for 5 s before it heard from the leader), and when ctx ends first.
func (r *Replica) ReadIndex(ctx context.Context) error {
	ch := make(chan uint64, 1)
	var key string
	noLeader := false
	f := func() {
		if r.rn.BasicStatus().Lead == raft.None {
			noLeader = true
			return
		}
		// The leader tracks read requests by context across the group:
		// make it unique per replica.
		r.readSeq++
		key = string(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, r.cfg.NodeID), r.readSeq))
		r.reads[key] = ch
		r.rn.ReadIndex([]byte(key))
	}
	if err := r.call(ctx, f); err != nil {
		return err
	}
	if noLeader {
		return ErrNoLeader
	}
	var idx uint64
	select {
	case idx = <-ch:
	case <-r.stopc:
		return ErrStopped
	case <-ctx.Done():
		// Forget the request; raft may never answer it.
		_ = r.call(context.Background(), func() { delete(r.reads, key) })
		return ctx.Err()
	}
	for r.applied.Load() < idx {
		select {
		case <-r.stopc:
			return ErrStopped
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// ErrConfChange: a change of the group's voters was refused (another one
// is under way, or it would change nothing).
var ErrConfChange = errors.New("replication: change of voters refused")

// ChangeVoter adds node to the group's voters (add) or removes it, and
// returns once the change is applied here. Only the leader proposes it
// (ErrNotLeader otherwise); context goes to every replica's OnConfChange.
// A new voter starts with an empty log and gets the leader's snapshot
// and entries.
func (r *Replica) ChangeVoter(ctx context.Context, node uint64, add bool, context []byte) error {
	cc := &pb.ConfChange{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(node), Context: context}
	if add {
		cc.Type = pb.ConfChangeType_ConfChangeAddNode.Enum()
	}
	done := func() bool {
		_, cs, _ := r.store.InitialState()
		return slices.Contains(cs.GetVoters(), node) == add
	}
	if done() {
		return nil
	}
	errc := make(chan error, 1)
	f := func() {
		if st := r.rn.BasicStatus(); st.RaftState != raft.StateLeader {
			errc <- fmt.Errorf("%w of %s (leader: node %d)", ErrNotLeader, r.cfg.Group, st.Lead)
			return
		}
		if err := r.rn.ProposeConfChange(cc); err != nil {
			errc <- fmt.Errorf("%w: %v", ErrConfChange, err)
			return
		}
		errc <- nil
	}
	if err := r.call(ctx, f); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	for !done() { // raft drops a second change while one is pending: the caller retries
		select {
		case <-r.stopc:
			return ErrStopped
		case <-ctx.Done():
			return fmt.Errorf("%w: not applied in time: %v", ErrConfChange, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// CompactBefore folds the entries whose records all lie below offset (and
// are applied) into a snapshot without owner state, deleting the whole
// log segments under them: retention on a replicated partition. Raft then
// sends a follower that needs those entries the snapshot, which restarts
// its log at the compaction point: records below it are gone on every
// replica alike, as retention wants. boundary is called on the replica's
// goroutine (the log's writer) for the offset.
func (r *Replica) CompactBefore(boundary func() int64) error {
	errc := make(chan error, 1)
	f := func() {
		if err := r.quiesce(); err != nil { // it stores the state itself
			errc <- err
			return
		}
		_, err := r.store.CompactBefore(boundary(), r.applied.Load(), nil)
		errc <- err
	}
	if err := r.call(context.Background(), f); err != nil {
		return err
	}
	return <-errc
}

// Voters returns the group's voters as this replica has applied them.
func (r *Replica) Voters() []uint64 {
	_, cs, _ := r.store.InitialState()
	return cs.GetVoters()
}

// Stop stops the loop and fails what is pending with ErrStopped.
// A replica opened with Open closes its data log.
func (r *Replica) Stop() {
	close(r.stopc)
	<-r.done
	r.sync.close()
	if r.ownsLog {
		if err := r.store.log.Close(); err != nil && !errors.Is(err, partlog.ErrClosed) {
			r.cfg.Logger.Warn("closing the data log", "group", r.cfg.Group, "err", err)
		}
	}
}

func (r *Replica) run() {
	defer close(r.done)
	tick := time.NewTicker(r.cfg.TickInterval)
	defer tick.Stop()
	var noLeaderSince time.Time
	for {
		// While no leader is known (an election), proposals stay queued in
		// arrival order rather than fail and come back, retried, behind
		// later ones; after noLeaderWait they are answered anyway.
		propc := r.propc
		if len(r.held) > 0 {
			propc = nil // nothing new until the held proposals are in
		} else if r.leader.Load() == 0 {
			if noLeaderSince.IsZero() {
				noLeaderSince = time.Now()
			}
			if time.Since(noLeaderSince) < noLeaderWait {
				propc = nil
			}
		} else {
			noLeaderSince = time.Time{}
		}
		select {
		case <-r.stopc:
			r.failAll(ErrStopped)
			return
		case <-tick.C:
			r.rn.Tick()
		case m := <-r.recvc:
			err := r.step(m)
			if err == nil {
				err = r.drainInbox()
			}
			if err != nil {
				r.fail(err)
				return
			}
		case p := <-propc:
			r.propose(r.take(p))
		case f := <-r.calls:
			f()
		case <-r.sync.notify:
			if err := r.syncCompleted(); err != nil {
				r.fail(err)
				return
			}
		}
		if r.syncErr != nil {
			r.fail(r.syncErr)
			return
		}
		r.retryHeld()
		if err := r.handleReadies(); err != nil {
			r.fail(err)
			return
		}
		r.stats.pending.Store(int64(len(r.pending) + len(r.held)))
	}
}

// fail stops the group after a storage failure: proposals, waiting and
// new, fail; the loop waits for Stop.
func (r *Replica) fail(err error) {
	r.cfg.Logger.Error("replica stopped after a storage failure", "group", r.cfg.Group, "err", err)
	r.failErr = fmt.Errorf("%w: %s failed: %v", ErrStopped, r.cfg.Group, err)
	close(r.failedc)
	r.failAll(r.failErr)
	if r.cfg.OnFail != nil {
		r.cfg.OnFail(err)
	}
	for {
		select {
		case <-r.stopc:
			r.failAll(ErrStopped)
			return
		case p := <-r.propc:
			r.take(p).done(0, r.failErr)
		}
	}
}

// drainInbox steps every message already queued, so one Ready covers them.
func (r *Replica) drainInbox() error {
	for {
		select {
		case m := <-r.recvc:
			if err := r.step(m); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// propose coalesces p and whatever else is queued (up to MaxEntryBytes)
// into one entry: one Raft entry and one fsync for many publishes.
func (r *Replica) propose(first *proposal) {
	var props []*proposal
	size := 0
	if !r.duplicate(first) {
		props, size = append(props, first), first.size
	}
	for size < r.cfg.MaxEntryBytes {
		select {
		case p := <-r.propc:
			r.take(p)
			if !r.duplicate(p) {
				props = append(props, p)
				size += p.size
			}
			continue
		default:
		}
		break
	}
	if len(props) > 0 {
		r.proposeAll(props, size)
	}
}

// duplicate answers p if its batch is a retry of one already in this
// replica's log: with that copy's offset once it is committed (or, for
// AckPersisted, persisted here), else with a retriable error while the
// copy is on its way. False when p must be proposed.
func (r *Replica) duplicate(p *proposal) bool {
	if !p.keyed {
		return false
	}
	if _, ok := r.inflight[p.key]; ok {
		p.done(0, fmt.Errorf("%w (%s)", ErrDuplicateInFlight, r.cfg.Group))
		return true
	}
	base, ok := r.store.dedup.Lookup(p.key, time.Now())
	if !ok {
		return false
	}
	if r.cfg.Duplicate != nil {
		r.cfg.Duplicate()
	}
	end := base + int64(p.records)
	if p.ack == AckPersisted && end <= r.store.log.SyncedOffset() ||
		end <= r.store.OffsetAfter(r.rn.BasicStatus().HardState.GetCommit()) {
		p.done(base, nil)
	} else {
		p.done(0, fmt.Errorf("%w (%s)", ErrDuplicateInFlight, r.cfg.Group))
	}
	return true
}

// proposeAll makes one entry of props (size bytes of batches).
func (r *Replica) proposeAll(props []*proposal, size int) {
	if st := r.rn.BasicStatus(); st.RaftState != raft.StateLeader {
		for _, p := range props {
			p.done(0, fmt.Errorf("%w of %s (leader: node %d)", ErrNotLeader, r.cfg.Group, st.Lead))
		}
		return
	}
	r.nextID++
	pe := &pendingEntry{id: r.nextID, props: props}
	if r.cfg.Stages != nil {
		pe.proposed = nanotime()
		pe.arrived = pe.proposed
		for _, p := range props {
			pe.arrived = min(pe.arrived, p.at)
		}
	}
	// The entry is built in a buffer reused from one proposal to the next:
	// raft copies a proposal into its log (etcd raft v3.7's appendEntry
	// clones every entry), and nothing else keeps it once Propose returns
	// on a leader. A follower would forward it (a message sent later), but
	// only a leader proposes (checked above, on this goroutine).
	data := EncodeEntry(slices.Grow(r.entryBuf[:0], envelopeSize+size), Proposal{Node: r.cfg.NodeID, ID: pe.id})
	for _, p := range props {
		for _, b := range p.batches {
			data = append(data, b...)
		}
	}
	if cap(data) <= 2*r.cfg.MaxEntryBytes {
		r.entryBuf = data[:0]
	}
	if err := r.rn.Propose(data); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) && r.rn.BasicStatus().RaftState == raft.StateLeader {
			// Too much is uncommitted (followers behind): hold these, in
			// order, and take no new proposal until they go in. Waiting
			// here backs the pressure up to the publishers' streams;
			// failing would let retries land behind later batches.
			r.nextID--
			r.held = props
			return
		}
		for _, p := range props {
			p.done(0, fmt.Errorf("%w: %v", ErrNotLeader, err))
		}
		return
	}
	r.pending[pe.id] = pe
	for _, p := range props {
		if p.keyed {
			r.inflight[p.key] = struct{}{}
		}
	}
}

// retryHeld proposes the held proposals again, in order.
func (r *Replica) retryHeld() {
	if len(r.held) == 0 {
		return
	}
	props := r.held
	r.held = nil
	size := 0
	for _, p := range props {
		size += p.size
	}
	r.proposeAll(props, size)
}

func (r *Replica) failAll(err error) {
	for _, p := range r.held {
		p.done(0, err)
	}
	r.held = nil
	for _, pe := range r.pending {
		r.finish(pe, 0, err)
	}
	clear(r.pending)
	clear(r.byIndex)
	clear(r.inflight)
	for {
		select {
		case p := <-r.propc:
			r.take(p).done(0, err)
		default:
			return
		}
	}
}

// finish answers the proposals of pe not answered yet.
func (r *Replica) finish(pe *pendingEntry, first int64, err error) {
	off := first
	for _, p := range pe.props {
		if p.keyed {
			delete(r.inflight, p.key)
		}
		if !(pe.acked && p.ack == AckPersisted) {
			if err != nil {
				p.done(0, err)
			} else {
				p.done(off, nil)
			}
		}
		off += int64(p.records)
	}
}

// raftLogger routes raft's logging to slog.
type raftLogger struct{ l *slog.Logger }

func (l raftLogger) Debug(v ...any)                   {}
func (l raftLogger) Debugf(format string, v ...any)   {}
func (l raftLogger) Info(v ...any)                    { l.l.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)    { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Warning(v ...any)                 { l.l.Warn(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) { l.l.Warn(fmt.Sprintf(format, v...)) }
func (l raftLogger) Error(v ...any)                   { l.l.Error(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any)   { l.l.Error(fmt.Sprintf(format, v...)) }
func (l raftLogger) Fatal(v ...any)                   { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }
func (l raftLogger) Panic(v ...any)                   { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }
