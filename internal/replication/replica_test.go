package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
)

// memNet delivers messages between replicas in this process; cut nodes
// neither send nor receive. Messages are copied (marshaled), as a real
// transport would.
type memNet struct {
	mu    sync.Mutex
	nodes map[uint64]*Replica
	cut   map[uint64]bool
	delay time.Duration
	// audit, when set, sees every Send, on the sender's goroutine, with
	// the sending replica.
	audit func(from *Replica, msgs []*pb.Message)
	// delayed, when set (setDelay), holds every message for a while
	// before delivery, in order, on one goroutine.
	delayed chan delayedMsgs
}

type delayedMsgs struct {
	at   time.Time
	msgs []*pb.Message
}

// setDelay makes every later message arrive d after it was sent; the
// delivering goroutine ends with the test.
func (n *memNet) setDelay(t *testing.T, d time.Duration) {
	q := make(chan delayedMsgs, 4096)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case m := <-q:
				time.Sleep(time.Until(m.at))
				n.deliver(m.msgs)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	n.mu.Lock()
	n.delayed, n.delay = q, d
	n.mu.Unlock()
}

func (n *memNet) Send(group string, msgs []*pb.Message) {
	if len(msgs) == 0 {
		return
	}
	n.mu.Lock()
	q, d, audit := n.delayed, n.delay, n.audit
	from := n.nodes[msgs[0].GetFrom()]
	n.mu.Unlock()
	if audit != nil && from != nil {
		audit(from, msgs)
	}
	if q != nil {
		select {
		case q <- delayedMsgs{time.Now().Add(d), msgs}:
		default: // dropped, as a congested network would
		}
		return
	}
	n.deliver(msgs)
}

func (n *memNet) deliver(msgs []*pb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if n.cut[m.GetFrom()] || n.cut[m.GetTo()] {
			continue
		}
		if to := n.nodes[m.GetTo()]; to != nil {
			b, _ := proto.Marshal(m)
			var c pb.Message
			proto.Unmarshal(b, &c)
			to.Step(&c)
		}
	}
}

func (n *memNet) set(id uint64, r *Replica) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[id] = r
}

func (n *memNet) setCut(id uint64, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[id] = cut
}

// member is one replica with its own files.
type member struct {
	id   uint64
	dir  string
	meta *meta.Store
	log  *partlog.Log
	r    *Replica
	mu   sync.Mutex
	hw   int64
	// snapshots counts the snapshots this member installed.
	snapshots int
	// joining: started without peers, to be added with ChangeVoter.
	joining bool
	// refused counts the peer messages admit dropped; failed is set when
	// the replica failed.
	refused atomic.Int64
	failed  atomic.Bool
	// stages are the Config.Stages reports of the entries it proposed.
	stages []Stages

	// With the gRPC transport: the node's server, address and transport.
	addr string
	srv  *grpc.Server
	tr   *NodeTransport
	host *Host
}

type group struct {
	t    *testing.T
	net  *memNet
	ms   []*member
	grpc bool // members talk over NodeTransport on loopback, not memNet
	// snapEvery is Config.SnapshotEntries of every member (0: none).
	snapEvery int
	// dedup gives every member's log a duplicate window.
	dedup bool
}

func newGroup(t *testing.T, n int) *group { return newGroupWith(t, n, false) }

func newGroupWith(t *testing.T, n int, useGRPC bool) *group { return newGroupSnap(t, n, useGRPC, 0) }

func newGroupSnap(t *testing.T, n int, useGRPC bool, snapEvery int) *group {
	return newGroupOpts(&group{t: t, grpc: useGRPC, snapEvery: snapEvery}, n)
}

// newGroupOpts starts a group of n members with g's options.
func newGroupOpts(g *group, n int) *group {
	t := g.t
	g.net = &memNet{nodes: map[uint64]*Replica{}, cut: map[uint64]bool{}}
	for i := 1; i <= n; i++ {
		m := &member{id: uint64(i), dir: t.TempDir()}
		if g.grpc {
			m.addr = testcluster.FreeAddr(t) // below the ephemeral range
		}
		var err error
		if m.meta, err = meta.Open(m.dir, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.meta.Close() })
		g.ms = append(g.ms, m)
	}
	for _, m := range g.ms {
		g.start(m)
	}
	t.Cleanup(func() {
		for _, m := range g.ms {
			g.stop(m)
		}
	})
	return g
}

func (g *group) transport(m *member) Transport {
	if !g.grpc {
		return g.net
	}
	m.host = NewHost()
	m.tr = NewNodeTransport(m.id, nil, m.host.Deliver, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range g.ms {
		if o != m {
			m.tr.SetPeer(o.id, o.addr)
		}
	}
	l, err := net.Listen("tcp", m.addr)
	if err != nil {
		g.t.Fatal(err)
	}
	m.srv = grpc.NewServer()
	m.tr.Register(m.srv)
	go m.srv.Serve(l)
	return m.tr
}

func (g *group) start(m *member) {
	var err error
	if m.log, err = partlog.Open(m.dir+"/log", partlog.Options{}); err != nil {
		g.t.Fatal(err)
	}
	store, err := OpenLogStore("t/0", m.log, m.meta)
	if err != nil {
		g.t.Fatal(err)
	}
	if g.dedup {
		// Filled from the log as it stands (what the broker does at open).
		w := dedup.New(dedup.Options{MaxAge: time.Minute, MaxBatches: 100})
		for off := int64(0); off < m.log.NextOffset(); {
			raw, err := m.log.Read(off, 1<<20, m.log.NextOffset())
			if err != nil {
				g.t.Fatal(err)
			}
			for len(raw) > 0 {
				h, _ := record.ParseHeader(raw)
				if k, ok := dedup.KeyOf(raw[:h.Size()]); ok {
					w.Add(k, h.BaseOffset, time.Now())
				}
				raw, off = raw[h.Size():], h.NextOffset()
			}
		}
		store.SetDedup(w)
	}
	var peers []uint64
	for _, o := range g.ms {
		if !o.joining {
			peers = append(peers, o.id)
		}
	}
	if m.joining {
		peers = nil // added by the leader, not bootstrapped
	}
	m.r, err = NewReplica(Config{
		Group: "t/0", NodeID: m.id, Peers: peers, TickInterval: 10 * time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Refused: func(uint64, string) { m.refused.Add(1) },
		OnFail:  func(error) { m.failed.Store(true) },
		Stages: func(s Stages) {
			m.mu.Lock()
			m.stages = append(m.stages, s)
			m.mu.Unlock()
		},
		OnCommit: func(_ [][]byte, hw int64) {
			m.mu.Lock()
			m.hw = hw
			m.mu.Unlock()
		},
		// The members' state is their high watermark.
		SnapshotEntries: g.snapEvery,
		Snapshot: func() []byte {
			m.mu.Lock()
			defer m.mu.Unlock()
			return binary.AppendVarint(nil, m.hw)
		},
		OnSnapshot: func(state []byte, offset int64) {
			hw, _ := binary.Varint(state)
			if len(state) == 0 { // CompactBefore: no owner state
				hw = offset
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if hw != offset {
				g.t.Errorf("node %d: snapshot state says hw %d, offset %d", m.id, hw, offset)
			}
			m.hw = hw
			m.snapshots++
		},
	}, store, g.transport(m))
	if err != nil {
		g.t.Fatal(err)
	}
	g.net.set(m.id, m.r)
	if m.host != nil {
		m.host.Add("t/0", m.r)
	}
}

func (g *group) stop(m *member) {
	if m.r == nil {
		return
	}
	g.net.set(m.id, nil)
	if m.srv != nil {
		m.srv.Stop()
		m.tr.Close()
	}
	m.r.Stop()
	m.log.Close()
	m.r = nil
}

func (m *member) highWatermark() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hw
}

// leader waits until the running members agree on a leader and returns it.
func (g *group) leader() *member {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range g.ms {
			if m.r != nil && m.r.Leader() == m.id && !g.net.cut[m.id] {
				return m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.t.Fatal("no leader elected within 10s")
	return nil
}

func testBatch(tag string, n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Timestamp: 1, Payload: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	return record.AppendBatch(nil, 0, recs)
}

type result struct {
	first int64
	err   error
}

func propose(r *Replica, b []byte, ack AckPoint) chan result {
	ch := make(chan result, 1)
	r.Propose([][]byte{b}, ack, func(first int64, err error) { ch <- result{first, err} })
	return ch
}

// publish proposes to the current leader, retrying retriable failures, and
// returns the offset of the first record.
func (g *group) publish(tag string, n int, ack AckPoint) int64 {
	g.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		res := <-propose(g.leader().r, testBatch(tag, n), ack)
		if res.err == nil {
			return res.first
		}
		if !errors.Is(res.err, ErrNotLeader) && !errors.Is(res.err, ErrOverwritten) {
			g.t.Fatalf("publish %s: %v", tag, res.err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatalf("publish %s: no success after 50 attempts", tag)
	return 0
}

// logBytes is the whole partition log of a member.
func (m *member) logBytes(t *testing.T) []byte {
	var out []byte
	for off := int64(0); off < m.log.NextOffset(); {
		raw, err := m.log.Read(off, 1<<20, m.log.NextOffset())
		if err != nil {
			t.Fatal(err)
		}
		for len(raw) > 0 {
			h, _ := record.ParseBatch(raw)
			out = append(out, raw[:h.Size()]...)
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	return out
}

// converged waits until every running member's high watermark is want and
// their logs are byte-identical.
func (g *group) converged(want int64) {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		for _, m := range g.ms {
			if m.r != nil && m.highWatermark() != want {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			for _, m := range g.ms {
				if m.r != nil {
					g.t.Logf("node %d: hw %d", m.id, m.highWatermark())
				}
			}
			g.t.Fatalf("replicas did not reach hw %d", want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ref []byte
	for _, m := range g.ms {
		if m.r == nil {
			continue
		}
		b := m.logBytes(g.t)
		if ref == nil {
			ref = b
		} else if !bytes.Equal(ref, b) {
			g.t.Fatalf("node %d's log differs from the others (%d vs %d bytes)", m.id, len(b), len(ref))
		}
	}
}

func TestReplicasAgreeAndFailOver(t *testing.T) {
	for _, useGRPC := range []bool{false, true} {
		t.Run(fmt.Sprintf("grpc=%v", useGRPC), func(t *testing.T) { agreeAndFailOver(t, useGRPC) })
	}
}

func agreeAndFailOver(t *testing.T, useGRPC bool) {
	g := newGroupWith(t, 3, useGRPC)
	var total int64
	for i := 0; i < 50; i++ {
		first := g.publish(fmt.Sprint("a", i), 3, AckCommitted)
		if first != total {
			t.Fatalf("publish %d got offset %d, want %d", i, first, total)
		}
		total += 3
	}
	g.converged(total)

	// The leader dies; the others elect a new one and go on.
	old := g.leader()
	g.stop(old)
	for i := 0; i < 20; i++ {
		g.publish(fmt.Sprint("b", i), 2, AckCommitted)
		total += 2
	}
	g.converged(total)

	// It comes back and catches up to byte-identical.
	g.start(old)
	g.publish("c", 1, AckCommitted)
	total++
	g.converged(total)
}

// A leader cut off from its followers persists (so AckPersisted answers)
// but cannot commit (so AckCommitted does not); the majority elects a new
// leader, and the cut-off entry is overwritten: its publisher learns it.
func TestCutOffLeaderCannotCommit(t *testing.T) {
	g := newGroup(t, 3)
	g.publish("warm", 1, AckCommitted)
	g.converged(1)
	old := g.leader()
	g.net.setCut(old.id, true)

	persisted := propose(old.r, testBatch("eventual", 1), AckPersisted)
	committed := propose(old.r, testBatch("consistent", 1), AckCommitted)
	if res := <-persisted; res.err != nil {
		t.Fatalf("AckPersisted on the cut-off leader: %v", res.err)
	}
	select {
	case res := <-committed:
		t.Fatalf("a cut-off leader answered AckCommitted: %+v", res)
	case <-time.After(300 * time.Millisecond):
	}
	// The majority side elects a leader and accepts writes.
	var newLeader *member
	deadline := time.Now().Add(10 * time.Second)
	for newLeader == nil && time.Now().Before(deadline) {
		for _, m := range g.ms {
			if m != old && m.r.Leader() == m.id {
				newLeader = m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if newLeader == nil {
		t.Fatal("the majority elected no leader")
	}
	if res := <-propose(newLeader.r, testBatch("majority", 1), AckCommitted); res.err != nil {
		t.Fatalf("publish on the new leader: %v", res.err)
	}
	// Healing: the old leader's uncommitted entries are replaced.
	g.net.setCut(old.id, false)
	select {
	case res := <-committed:
		if !errors.Is(res.err, ErrOverwritten) && !errors.Is(res.err, ErrNotLeader) {
			t.Fatalf("the cut-off consistent publish ended with %v, want overwritten", res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-off consistent publish never ended")
	}
	g.converged(2)
}

// ReadIndex on a follower returns only once the follower has applied what
// the leader acknowledged before; a follower cut off from the leader
// cannot get a read point.
func TestReadIndexOnFollower(t *testing.T) {
	g := newGroup(t, 3)
	l := g.leader()
	var f *member
	for _, m := range g.ms {
		if m != l {
			f = m
		}
	}
	for i := 0; i < 20; i++ {
		hw := g.publish(fmt.Sprint("r", i), 5, AckCommitted) + 5
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f.r.ReadIndex(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read index %d: %v", i, err)
		}
		if got := f.highWatermark(); got < hw {
			t.Fatalf("after ReadIndex the follower's high watermark is %d, the leader acknowledged up to %d", got, hw)
		}
	}
	g.net.setCut(f.id, true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := f.r.ReadIndex(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadIndex on a cut-off follower: %v, want a deadline error", err)
	}
}

// A follower that was down while the others compacted their logs catches
// up from a snapshot and then from the log; a compacted replica restarts
// from its snapshot.
func TestSnapshotCatchesUpFollower(t *testing.T) {
	for _, useGRPC := range []bool{false, true} {
		g := newGroupSnap(t, 3, useGRPC, 10)
		l := g.leader()
		var f *member
		for _, m := range g.ms {
			if m != l {
				f = m
			}
		}
		hw := g.publish("a", 5, AckCommitted) + 5
		g.converged(hw)
		g.stop(f)
		// More entries than raft pipelines to a follower (MaxInflightMsgs):
		// the gRPC transport holds the messages sent while the follower
		// was away and delivers them when it is back, which is fine, but
		// beyond them the follower needs the snapshot.
		for i := 0; i < 300; i++ {
			hw = g.publish(fmt.Sprint("b", i), 3, AckCommitted) + 3
		}
		if first, _ := g.leader().r.store.FirstIndex(); first < 290 {
			t.Fatalf("the leader's log starts at index %d after 300 entries with a snapshot every 10", first)
		}
		g.start(f)
		waitHW := func(m *member, want int64) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for m.highWatermark() != want {
				if time.Now().After(deadline) {
					t.Fatalf("node %d: hw %d, want %d", m.id, m.highWatermark(), want)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		waitHW(f, hw)
		f.mu.Lock()
		n := f.snapshots
		f.mu.Unlock()
		if n == 0 {
			ffirst, _ := f.r.store.FirstIndex()
			flast, _ := f.r.store.LastIndex()
			lfirst, _ := g.leader().r.store.FirstIndex()
			t.Fatalf("the follower caught up without a snapshot (grpc %v): follower log [%d, %d] offsets from %d, leader (node %d, was %d) from %d",
				useGRPC, ffirst, flast, f.log.StartOffset(), g.leader().id, l.id, lfirst)
		}
		if _, off := f.r.store.SnapshotState(); f.log.StartOffset() != off {
			t.Fatalf("follower log starts at %d, its snapshot at %d", f.log.StartOffset(), off)
		}
		hw = g.publish("c", 4, AckCommitted) + 4
		for _, m := range g.ms {
			waitHW(m, hw)
		}
		// Restart everyone: each reopens from its snapshot and log.
		for _, m := range g.ms {
			g.stop(m)
		}
		for _, m := range g.ms {
			g.start(m)
		}
		hw = g.publish("d", 2, AckCommitted) + 2
		for _, m := range g.ms {
			waitHW(m, hw)
		}
	}
}

// A retried batch is answered with the offset of the copy in the log, by
// the leader that stored it and, after a failover, by the new leader; it
// is stored once on every replica.
func TestRetriedBatchStoredOnce(t *testing.T) {
	g := &group{t: t, dedup: true}
	g = newGroupOpts(g, 3)
	mk := func(tag string) []byte {
		recs := []record.Record{{Timestamp: 1, Payload: []byte(tag)}, {Timestamp: 2, Payload: []byte(tag)}}
		recs[0].MessageID[0], recs[1].MessageID[0] = tag[0], tag[0]+1
		return record.AppendBatch(nil, 0, recs)
	}
	l := g.leader()
	a := <-propose(l.r, mk("a"), AckCommitted)
	g.publish("x", 3, AckCommitted)
	again := <-propose(l.r, mk("a"), AckCommitted)
	if a.err != nil || again.err != nil || again.first != a.first {
		t.Fatalf("first copy at %d (%v), retry answered %d (%v)", a.first, a.err, again.first, again.err)
	}
	hw := g.publish("y", 1, AckCommitted) + 1
	g.converged(hw) // 2 + 3 + 1 records: the retry was not stored
	if hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
	g.stop(l)
	nl := g.leader()
	for attempt := 0; ; attempt++ {
		res := <-propose(nl.r, mk("a"), AckPersisted)
		if res.err == nil {
			if res.first != a.first {
				t.Fatalf("the new leader answered the retry with %d, the copy is at %d", res.first, a.first)
			}
			break
		}
		if attempt > 50 {
			t.Fatal(res.err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.start(l) // its window is rebuilt from its log
	if res := <-propose(l.r, mk("a"), AckPersisted); res.err == nil && res.first != a.first {
		t.Fatalf("the restarted node answered the retry with %d, the copy is at %d", res.first, a.first)
	}
	hw = g.publish("z", 1, AckCommitted) + 1
	g.converged(hw)
	if hw != 7 {
		t.Fatalf("high watermark %d after the retry on the new leader, want 7", hw)
	}
}

// A replica added at runtime catches up from the leader (snapshot and
// log), takes part in commits, and leaves again when removed.
func TestAddAndRemoveVoter(t *testing.T) {
	g := newGroupSnap(t, 3, false, 10)
	for i := 0; i < 30; i++ {
		g.publish(fmt.Sprint("a", i), 2, AckCommitted)
	}
	nm := &member{id: 4, dir: t.TempDir(), joining: true}
	var err error
	if nm.meta, err = meta.Open(nm.dir, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stop(nm); nm.meta.Close() })
	g.ms = append(g.ms, nm)
	g.start(nm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.leader().r.ChangeVoter(ctx, 4, true, []byte("addr-4")); err != nil {
		t.Fatal(err)
	}
	hw := g.publish("b", 3, AckCommitted) + 3
	deadline := time.Now().Add(10 * time.Second)
	for nm.highWatermark() != hw {
		if time.Now().After(deadline) {
			t.Fatalf("the added replica is at hw %d, the group at %d", nm.highWatermark(), hw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := nm.r.Voters(); len(v) != 4 {
		t.Fatalf("the added replica sees voters %v", v)
	}
	// With 4 voters the quorum is 3: with one old replica down, the new
	// one is needed for a commit.
	g.stop(g.ms[0])
	hw = g.publish("c", 1, AckCommitted) + 1
	for nm.highWatermark() != hw {
		time.Sleep(5 * time.Millisecond)
	}
	g.start(g.ms[0])
	if err := g.leader().r.ChangeVoter(ctx, 4, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range g.ms[:3] {
		deadline := time.Now().Add(10 * time.Second)
		for len(m.r.Voters()) != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d sees voters %v after removing node 4", m.id, m.r.Voters())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Retention on a replicated log: CompactBefore folds what lies below an
// offset; a follower that was away restarts its log there from the
// leader's snapshot and goes on replicating.
func TestCompactBeforeRestartsLaggingFollower(t *testing.T) {
	g := newGroup(t, 3)
	l := g.leader()
	var f *member
	for _, m := range g.ms {
		if m != l {
			f = m
		}
	}
	g.stop(f)
	var hw int64
	for i := 0; i < 300; i++ { // past raft's inflight window (see TestSnapshotCatchesUpFollower)
		hw = g.publish(fmt.Sprint("r", i), 2, AckCommitted) + 2
	}
	l = g.leader()
	if err := l.r.CompactBefore(func() int64 { return hw - 10 }); err != nil {
		t.Fatal(err)
	}
	_, off := l.r.store.SnapshotState()
	if off == 0 || off > hw-10 {
		t.Fatalf("compacted to offset %d, want within (0, %d]", off, hw-10)
	}
	g.start(f)
	hw = g.publish("after", 3, AckCommitted) + 3
	deadline := time.Now().Add(10 * time.Second)
	for f.highWatermark() != hw {
		if time.Now().After(deadline) {
			t.Fatalf("the follower is at hw %d, the group at %d", f.highWatermark(), hw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f.log.StartOffset() != off {
		t.Fatalf("the follower's log starts at %d, the leader compacted to %d", f.log.StartOffset(), off)
	}
}

// A restart re-applies at most about commitPersistEvery entries, however
// long the log: the commit index is persisted as it moves.
func TestRestartReappliesABoundedTail(t *testing.T) {
	g := newGroup(t, 1)
	m := g.ms[0]
	const n = 3 * commitPersistEvery
	for i := range n {
		g.publish(fmt.Sprint("e", i), 1, AckCommitted)
	}
	g.stop(m)
	// What a replica opening this log would re-apply: after Applied.
	log, err := partlog.Open(m.dir+"/log", partlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := OpenLogStore("t/0", log, m.meta)
	if err != nil {
		t.Fatal(err)
	}
	applied := store.Applied()
	last, _ := store.LastIndex()
	log.Close()
	g.start(m)
	if last-applied > commitPersistEvery+2 {
		t.Fatalf("after a restart, entries %d..%d are applied again: more than %d", applied+1, last, commitPersistEvery)
	}
	if hw := g.publish("after", 1, AckCommitted) + 1; hw != n+1 {
		t.Fatalf("high watermark %d after the restart, want %d", hw, n+1)
	}
}

// The stage times of an entry add up to what its publisher waited (the
// report is made just after the answer), and name where the time went: on a group of one the commit
// follows the leader's fsync at once; with followers a network delay
// shows in the commit stage, not in the others.
func TestStagesAccountForTheRoundTrip(t *testing.T) {
	const delay = 20 * time.Millisecond
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n, " replicas"), func(t *testing.T) {
			g := newGroup(t, n)
			lead := g.leader()
			if n > 1 {
				g.net.setDelay(t, delay)
			}
			lead.mu.Lock()
			lead.stages = nil
			lead.mu.Unlock()
			var waited []time.Duration
			for i := 0; i < 10; i++ {
				start := time.Now()
				res := <-propose(lead.r, testBatch(fmt.Sprint("s", i), 3), AckCommitted)
				waited = append(waited, time.Since(start))
				if res.err != nil {
					t.Fatal(res.err)
				}
			}
			// An entry is reported right after its publishers are answered.
			var stages []Stages
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				lead.mu.Lock()
				stages = slices.Clone(lead.stages)
				lead.mu.Unlock()
				if len(stages) >= len(waited) || time.Now().After(deadline) {
					break
				}
			}
			if len(stages) != len(waited) {
				t.Fatalf("%d stage reports for %d entries", len(stages), len(waited))
			}
			for i, s := range stages {
				total := s.Queue + s.Persist + s.Commit + s.Apply
				if s.Queue < 0 || s.Persist <= 0 || s.Commit < 0 || s.Apply < 0 || total > waited[i]+time.Millisecond {
					t.Fatalf("entry %d: stages %+v (total %v) for a publish that waited %v", i, s, total, waited[i])
				}
				if s.Records != 3 {
					t.Fatalf("entry %d: %d records, want 3", i, s.Records)
				}
				if n == 1 && s.Commit > 10*time.Millisecond {
					t.Fatalf("entry %d: a group of one took %v from its fsync to the commit", i, s.Commit)
				}
				// The leader sends its append before its own fsync: the
				// round trip runs from the proposal.
				if n > 1 && (s.Persist+s.Commit < 2*delay || s.Queue+s.Persist+s.Apply > delay) {
					t.Fatalf("entry %d: with a %v network delay each way: %+v", i, delay, s)
				}
			}
		})
	}
}

// A leader sends its appends while its own copy is not yet fsynced (so
// the followers' fsyncs overlap its own); a replica answers an append or
// a vote only once everything it wrote is fsynced.
func TestLeaderSendsBeforeItsFsyncFollowersAnswerAfterTheirs(t *testing.T) {
	g := newGroup(t, 3)
	var mu sync.Mutex
	var earlyAppends, answers int
	var violations []string
	g.net.mu.Lock()
	g.net.audit = func(from *Replica, msgs []*pb.Message) {
		log := from.store.log
		synced := log.SyncedOffset()
		unsynced := log.NextOffset() > synced
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			switch m.GetType() {
			case pb.MessageType_MsgApp:
				if unsynced && len(m.GetEntries()) > 0 {
					earlyAppends++
				}
			case pb.MessageType_MsgAppResp:
				// The replica goes on writing while it answers (its
				// syncer sends the answer): what it acknowledges must
				// be durable, not everything it wrote.
				answers++
				if end := from.store.OffsetAfter(m.GetIndex()); !m.GetReject() && end > synced {
					violations = append(violations, fmt.Sprintf("node %d acknowledged index %d (offsets up to %d) with only %d fsynced",
						m.GetFrom(), m.GetIndex(), end, synced))
				}
			case pb.MessageType_MsgVoteResp, pb.MessageType_MsgPreVoteResp:
				answers++
			}
		}
	}
	g.net.mu.Unlock()
	for i := 0; i < 30; i++ {
		g.publish(fmt.Sprint("e", i), 2, AckCommitted)
	}
	g.converged(60)
	// A new election: vote answers are audited too.
	old := g.leader()
	g.stop(old)
	g.publish("after", 1, AckCommitted)
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("answers sent before the fsync: %v", violations)
	}
	if earlyAppends == 0 || answers == 0 {
		t.Fatalf("%d appends sent before the leader's fsync, %d answers audited: want both", earlyAppends, answers)
	}
}
