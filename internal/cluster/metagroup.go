package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/pkg/record"
)

// MetaGroupName is the Raft group of the cluster's metadata.
const MetaGroupName = "__meta"

// ErrNotLeader: this node does not lead the metadata group; the command
// must go to the leader (Leader names it when known).
var ErrNotLeader = errors.New("cluster: not the metadata leader")

// MetaConfig configures a MetaGroup.
type MetaConfig struct {
	NodeID uint64
	// Voters of the metadata group when it is bootstrapped.
	Peers []uint64
	// Dir holds the metadata log.
	Dir       string
	Meta      *meta.Store
	Transport replication.Transport
	Host      *replication.Host
	Logger    *slog.Logger
	// TickInterval is the Raft tick (default 100ms).
	TickInterval time.Duration
	// Forward, when set, lets commands proposed on a follower run on the
	// leader (Run), and serves the commands other nodes forward here.
	Forward *replication.NodeTransport
	// OnChange is called, in log order and from one goroutine, with what
	// each applied command changed (also for the commands replayed at
	// start, and for what a snapshot installed changed). It must not block
	// for long.
	OnChange func(Change)
	// OnMember is called, on the group's goroutine, when a node joins or
	// leaves the metadata group's voters, with the address it was added
	// with (for the transport).
	OnMember func(node uint64, added bool, raftAddr string)
	// SnapshotEntries: the metadata log is folded into a snapshot of the
	// state every so many entries (default 1000), so it stays small and a
	// restart replays little.
	SnapshotEntries int
	// OnFail is the replica's Config.OnFail: its storage failed and it
	// stopped.
	OnFail func(error)
}

// MetaGroup runs the metadata Raft group on a node and applies its log to
// a Metadata. Every command is one record of the metadata log; its
// position in that log (offset + 1) is the index Metadata.Apply gets, the
// same on every node.
type MetaGroup struct {
	cfg MetaConfig
	log replication.LogReader // read at open, to replay
	rep *replication.Replica

	mu      sync.Mutex
	md      *Metadata             // guarded by mu
	waiters map[uint64]chan reply // command id → its proposer, guarded by mu
	// settled is the index of the last command whose OnChange has run.
	// Invariant: settled <= md.Applied. Guarded by mu.
	settled uint64
	nextID  atomic.Uint64
}

type reply struct {
	change Change
	err    error
}

// OpenMetaGroup opens the metadata log, replays what was committed into
// the state (calling OnChange for each command) and starts the group.
func OpenMetaGroup(cfg MetaConfig) (*MetaGroup, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := replication.OpenStored(MetaGroupName, cfg.Dir, replication.LogOptions{DedupMaxBatches: -1}, cfg.Meta, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.SnapshotEntries == 0 {
		cfg.SnapshotEntries = 1000
	}
	g := &MetaGroup{cfg: cfg, log: st.Log(), md: NewMetadata(), waiters: make(map[uint64]chan reply)}
	g.nextID.Store(cfg.NodeID << 40)
	from := int64(0)
	if state, off := st.Snapshot(); state != nil {
		if err := g.restore(state, off); err != nil {
			st.Close()
			return nil, err
		}
		from = off
	}
	if err := g.replay(from, st.Committed()); err != nil {
		st.Close()
		return nil, err
	}
	g.rep, err = st.Start(replication.Config{
		Group: MetaGroupName, NodeID: cfg.NodeID, Peers: cfg.Peers, TickInterval: cfg.TickInterval,
		Logger: cfg.Logger, OnCommit: g.onCommit, OnFail: cfg.OnFail,
		SnapshotEntries: cfg.SnapshotEntries, Snapshot: g.snapshot, OnSnapshot: g.onSnapshot,
		OnConfChange: func(node uint64, added bool, context []byte) {
			// The bootstrap's own changes carry no address: nothing to learn.
			if cfg.OnMember != nil && (!added || len(context) > 0) {
				cfg.OnMember(node, added, string(context))
			}
		},
	}, cfg.Transport)
	if err != nil {
		st.Close()
		return nil, err
	}
	cfg.Host.Add(MetaGroupName, g.rep)
	if cfg.Forward != nil {
		cfg.Forward.HandleForward(MetaGroupName, g.handleForward)
	}
	return g, nil
}

// replay applies the committed commands already in the log, from offset
// from up to end (exclusive).
func (g *MetaGroup) replay(from, end int64) error {
	for off := from; off < end; {
		raw, err := g.log.Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("replay metadata at %d: %w", off, err)
		}
		for len(raw) > 0 {
			h, err := record.ParseBatch(raw)
			if err != nil {
				return err
			}
			g.applyBatch(raw[:h.Size()])
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	return nil
}

// snapshot is the state for the replica's snapshots (on its goroutine,
// with every committed command applied).
func (g *MetaGroup) snapshot() []byte {
	g.mu.Lock()
	snap := g.md.Snapshot()
	g.mu.Unlock()
	b, err := proto.Marshal(snap)
	if err != nil {
		panic(fmt.Sprintf("cluster: marshal the metadata snapshot: %v", err)) // a valid message always marshals
	}
	return b
}

// onSnapshot installs the leader's snapshot (this node was too far
// behind for the log).
func (g *MetaGroup) onSnapshot(state []byte, offset int64) {
	if err := g.restore(state, offset); err != nil {
		g.cfg.Logger.Error("cannot install the metadata snapshot", "err", err)
	}
}

// restore replaces the state by a snapshot taken after the records below
// offset, and tells OnChange what changed: topics gone or placed
// differently are deleted, new ones created, and every node announced.
func (g *MetaGroup) restore(state []byte, offset int64) error {
	var snap pb.Snapshot
	if err := proto.Unmarshal(state, &snap); err != nil {
		return fmt.Errorf("cluster: metadata snapshot: %w", err)
	}
	g.mu.Lock()
	before := g.md.Topics()
	g.md.Restore(uint64(offset), &snap)
	after := g.md.Topics()
	nodes := g.md.Nodes()
	g.mu.Unlock()
	var changes []Change
	old := make(map[string]*Topic, len(before))
	for _, t := range before {
		old[t.Name] = t
	}
	for _, t := range after {
		if o, ok := old[t.Name]; ok && o.ID == t.ID && proto.Equal(o.Config, t.Config) && len(o.Replicas) == len(t.Replicas) {
			delete(old, t.Name) // the same topic: maybe with other replicas
			if !slices.EqualFunc(o.Replicas, t.Replicas, slices.Equal) || !slices.EqualFunc(o.Targets, t.Targets, slices.Equal) {
				changes = append(changes, Change{Moved: t})
			}
			continue
		}
		if o, ok := old[t.Name]; ok {
			changes = append(changes, Change{Deleted: o})
			delete(old, t.Name)
		}
		changes = append(changes, Change{Created: t})
	}
	for _, o := range old {
		changes = append([]Change{{Deleted: o}}, changes...)
	}
	for i := range nodes {
		changes = append(changes, Change{Node: &nodes[i]})
	}
	changes = append(changes, Change{Security: true})
	if g.cfg.OnChange != nil {
		for _, ch := range changes {
			g.cfg.OnChange(ch)
		}
	}
	g.mu.Lock()
	g.settled = g.md.Applied
	g.mu.Unlock()
	return nil
}

// onCommit is the replica's callback: apply what committed.
func (g *MetaGroup) onCommit(batches [][]byte, _ int64) {
	for _, b := range batches {
		g.applyBatch(b)
	}
}

func (g *MetaGroup) applyBatch(b []byte) {
	recs, err := record.DecodeRecords(nil, b)
	if err != nil {
		g.cfg.Logger.Error("undecodable metadata batch", "err", err)
		return
	}
	for _, r := range recs {
		g.mu.Lock()
		seen := uint64(r.Offset)+1 <= g.md.Applied
		g.mu.Unlock()
		if seen {
			// Replayed at open already: the replica hands a restarted
			// node's last entries over again (LogStore.Applied).
			continue
		}
		var cmd pb.Command
		var ch Change
		err := proto.Unmarshal(r.Payload, &cmd)
		g.mu.Lock()
		if err == nil {
			ch, err = g.md.Apply(uint64(r.Offset)+1, &cmd)
		} else {
			g.md.Applied = uint64(r.Offset) + 1
		}
		w := g.waiters[cmd.GetId()]
		delete(g.waiters, cmd.GetId())
		g.mu.Unlock()
		// The node acts on the change before anyone hears the command
		// succeeded, so a proposer reads its own write on this node.
		if err == nil && g.cfg.OnChange != nil {
			g.cfg.OnChange(ch)
		}
		g.mu.Lock()
		g.settled = uint64(r.Offset) + 1
		g.mu.Unlock()
		if w != nil {
			w <- reply{ch, err}
		}
	}
}

// Propose runs a command through the metadata group and returns its
// result once it is applied here. ErrNotLeader when this node does not
// lead (see Leader); the command's own failure otherwise.
func (g *MetaGroup) Propose(ctx context.Context, cmd *pb.Command) (Change, error) {
	cmd = proto.Clone(cmd).(*pb.Command)
	cmd.Id = g.nextID.Add(1)
	payload, err := proto.Marshal(cmd)
	if err != nil {
		return Change{}, err
	}
	batch := record.AppendBatch(nil, 0, []record.Record{{Timestamp: time.Now().UnixNano(), Payload: payload}})
	w := make(chan reply, 1)
	g.mu.Lock()
	g.waiters[cmd.Id] = w
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiters, cmd.Id)
		g.mu.Unlock()
	}()
	failed := make(chan error, 1)
	g.rep.Propose([][]byte{batch}, replication.AckCommitted, func(_ int64, err error) {
		if err != nil {
			failed <- err
		}
	})
	select {
	case r := <-w:
		return r.change, r.err
	case err := <-failed:
		if errors.Is(err, replication.ErrNotLeader) {
			return Change{}, fmt.Errorf("%w (leader: node %d)", ErrNotLeader, g.rep.Leader())
		}
		return Change{}, err
	case <-ctx.Done():
		return Change{}, ctx.Err()
	}
}

// Leader is the node id of the metadata leader as last seen (0: none).
func (g *MetaGroup) Leader() uint64 { return g.rep.Leader() }

// Topics, Topic and Nodes read the applied state (copies).
func (g *MetaGroup) Topics() []*Topic {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Topics()
}

func (g *MetaGroup) Topic(name string) (*Topic, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Topic(name)
}

func (g *MetaGroup) Nodes() []NodeInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Nodes()
}

// Security returns a copy of the access-control state as applied here.
func (g *MetaGroup) Security() Security {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Security()
}

// Committed, GroupOffsets and Groups read the consumer groups' committed
// offsets as applied here (see Metadata).
func (g *MetaGroup) Committed(group string, p Partition) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Committed(group, p)
}

func (g *MetaGroup) GroupOffsets(group string) map[Partition]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.GroupOffsets(group)
}

func (g *MetaGroup) Groups() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Groups()
}

// Sync returns once this node has applied (and acted on) every command
// the metadata group committed before the call, wherever it was
// proposed: a topic created through another node is known here after
// Sync. REQUIRES: not called from OnChange (the group's goroutine cannot
// wait for itself; ctx would expire).
//
// While this node knows no leader it waits for one (until ctx ends),
// asking again every few milliseconds.
func (g *MetaGroup) Sync(ctx context.Context) error {
	for {
		err := g.rep.ReadIndex(ctx)
		if !errors.Is(err, replication.ErrNoLeader) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// changeMember changes the metadata group's voters here, on the leader.
func (g *MetaGroup) changeMember(ctx context.Context, node uint64, add bool, raftAddr string) error {
	err := g.rep.ChangeVoter(ctx, node, add, []byte(raftAddr))
	if errors.Is(err, replication.ErrNotLeader) {
		return fmt.Errorf("%w (leader: node %d)", ErrNotLeader, g.rep.Leader())
	}
	return err
}

// Balance plans replica moves on the state applied here (see
// Metadata.Balance).
func (g *MetaGroup) Balance(drain []uint64) []*pb.ReassignPartitions {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Balance(drain)
}

// Voters are the metadata group's voters as applied here.
func (g *MetaGroup) Voters() []uint64 { return g.rep.Voters() }

// Barrier returns once this node leads the metadata group and has applied
// everything committed before the call: a new leader's state may lag its
// log until an entry of its own term commits. ErrNotLeader otherwise.
func (g *MetaGroup) Barrier(ctx context.Context) error {
	_, err := g.Propose(ctx, &pb.Command{Kind: &pb.Command_Barrier{Barrier: &pb.Barrier{}}})
	return err
}

// ClaimGroup makes this node, which must lead the metadata group
// (ErrNotLeader), the coordinator of a consumer group, and returns the
// group's new coordinator epoch once the claim is applied here: the
// group's offsets read then hold every commit applied before, and a
// commit made in an earlier epoch is refused (ErrFenced) from then on.
func (g *MetaGroup) ClaimGroup(ctx context.Context, group string) (uint64, error) {
	ch, err := g.Propose(ctx, &pb.Command{Kind: &pb.Command_ClaimGroup{ClaimGroup: &pb.ClaimGroup{Group: group}}})
	return ch.GroupEpoch, err
}

// Close stops the group (which closes its log).
func (g *MetaGroup) Close() error {
	g.cfg.Host.Remove(MetaGroupName)
	g.rep.Stop()
	return nil
}

// Transaction returns a copy of a Kafka transactional id's state.
func (g *MetaGroup) Transaction(id string) (*pb.Transaction, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Transaction(id)
}

// Transactions returns copies of every Kafka transactional id's state.
func (g *MetaGroup) Transactions() []*pb.Transaction {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Transactions()
}

// Aborted returns the aborted transactions of p overlapping [from, to).
func (g *MetaGroup) Aborted(p Partition, from, to int64) []*pb.AbortedTxn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.md.Aborted(p, from, to)
}
