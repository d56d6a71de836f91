package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/internal/testcluster"
)

// metaSnapshotEntries is SnapshotEntries of the test nodes (0: default).
var metaSnapshotEntries int

type metaNode struct {
	id      uint64
	dir     string
	addr    string
	ms      *meta.Store
	srv     *grpc.Server
	tr      *replication.NodeTransport
	g       *MetaGroup
	mu      sync.Mutex
	changes []Change
}

func startMetaNodes(t *testing.T, n int) []*metaNode {
	nodes := make([]*metaNode, n)
	for i := range nodes {
		nodes[i] = &metaNode{id: uint64(i + 1), dir: t.TempDir(), addr: testcluster.FreeAddr(t)} // below the ephemeral range
		var err error
		if nodes[i].ms, err = meta.Open(nodes[i].dir, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range nodes {
		startMetaNode(t, nd, nodes)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.stop()
			nd.ms.Close()
		}
	})
	return nodes
}

func startMetaNode(t *testing.T, nd *metaNode, all []*metaNode) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	host := replication.NewHost()
	nd.tr = replication.NewNodeTransport(nd.id, nil, host.Deliver, quiet)
	var peers []uint64
	for _, o := range all {
		peers = append(peers, o.id)
		if o != nd {
			nd.tr.SetPeer(o.id, o.addr)
		}
	}
	l, err := net.Listen("tcp", nd.addr)
	if err != nil {
		t.Fatal(err)
	}
	nd.srv = grpc.NewServer()
	nd.tr.Register(nd.srv)
	go nd.srv.Serve(nd.tr.Listen(l))
	nd.mu.Lock()
	nd.changes = nil
	nd.mu.Unlock()
	nd.g, err = OpenMetaGroup(MetaConfig{
		NodeID: nd.id, Peers: peers, Dir: nd.dir + "/meta-log", Meta: nd.ms, Transport: nd.tr, Host: host, Forward: nd.tr,
		Logger: quiet, TickInterval: 10 * time.Millisecond, SnapshotEntries: metaSnapshotEntries,
		OnChange: func(c Change) {
			nd.mu.Lock()
			nd.changes = append(nd.changes, c)
			nd.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (nd *metaNode) stop() {
	if nd.g == nil {
		return
	}
	nd.srv.Stop()
	nd.tr.Close()
	nd.g.Close()
	nd.g = nil
}

// propose sends cmd to whichever node leads, retrying until one does.
func propose(t *testing.T, nodes []*metaNode, cmd *pb.Command) (Change, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, nd := range nodes {
			if nd.g == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ch, err := nd.g.Propose(ctx, cmd)
			cancel()
			if errors.Is(err, ErrNotLeader) || errors.Is(err, replication.ErrNotLeader) || errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			return ch, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no metadata leader accepted the command within 10s")
	return Change{}, nil
}

func TestMetaGroupReplicatesAndReplays(t *testing.T) {
	nodes := startMetaNodes(t, 3)
	for _, nd := range nodes {
		if _, err := propose(t, nodes, register(nd.id)); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := propose(t, nodes, create("orders", 3, 3))
	if err != nil || ch.Created == nil || len(ch.Created.Replicas) != 3 {
		t.Fatalf("create: %+v, %v", ch, err)
	}
	if _, err := propose(t, nodes, create("orders", 1, 1)); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	// Every node applies the same commands.
	waitUntil(t, "all nodes have the topic", func() bool {
		for _, nd := range nodes {
			if _, ok := nd.g.Topic("orders"); !ok || len(nd.g.Nodes()) != 3 {
				return false
			}
		}
		return true
	})
	// A restarted node replays its log: same state, OnChange again.
	nd := nodes[1]
	nd.stop()
	startMetaNode(t, nd, nodes)
	waitUntil(t, "the restarted node has the topic", func() bool {
		_, ok := nd.g.Topic("orders")
		return ok
	})
	nd.mu.Lock()
	created := 0
	for _, c := range nd.changes {
		if c.Created != nil && c.Created.Name == "orders" {
			created++
		}
	}
	nd.mu.Unlock()
	if created != 1 {
		t.Fatalf("the restarted node saw the topic created %d times, want once", created)
	}
	if _, err := propose(t, nodes, del("orders")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "all nodes dropped the topic", func() bool {
		for _, nd := range nodes {
			if _, ok := nd.g.Topic("orders"); ok {
				return false
			}
		}
		return true
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Any node runs a command: a follower forwards it to the leader, and has
// applied it itself when Run returns; command failures keep their kind.
func TestMetaGroupRunForwardsToTheLeader(t *testing.T) {
	nodes := startMetaNodes(t, 3)
	if _, err := propose(t, nodes, register(1)); err != nil {
		t.Fatal(err)
	}
	var follower *metaNode
	waitUntil(t, "a leader is known", func() bool {
		for _, nd := range nodes {
			if l := nd.g.Leader(); l != 0 && l != nd.id {
				follower = nd
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range []uint64{2, 3} {
		if _, err := follower.g.Run(ctx, register(id)); err != nil {
			t.Fatalf("register %d through a follower: %v", id, err)
		}
		known := false
		for _, n := range follower.g.Nodes() {
			known = known || n.ID == id
		}
		if !known { // any forwarded command, not only topic changes
			t.Fatalf("Run returned before the follower applied the registration of node %d", id)
		}
	}
	ch, err := follower.g.Run(ctx, create("forwarded", 2, 3))
	if err != nil || ch.Created == nil || len(ch.Created.Replicas) != 2 {
		t.Fatalf("create through a follower: %+v, %v", ch, err)
	}
	if _, ok := follower.g.Topic("forwarded"); !ok {
		t.Fatal("Run returned before the follower applied the topic")
	}
	if _, err := follower.g.Run(ctx, create("forwarded", 1, 1)); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create through a follower: %v, want ErrTopicExists", err)
	}
	if _, err := follower.g.Run(ctx, del("forwarded")); err != nil {
		t.Fatal(err)
	}
	if _, ok := follower.g.Topic("forwarded"); ok {
		t.Fatal("Run returned before the follower applied the deletion")
	}
	// A group's commit made by a node that coordinated it before another
	// claimed it is refused, and the refusal travels back as ErrFenced.
	if _, err := follower.g.Run(ctx, create("orders", 1, 3)); err != nil {
		t.Fatal(err)
	}
	claimed, err := propose(t, nodes, &pb.Command{Kind: &pb.Command_ClaimGroup{ClaimGroup: &pb.ClaimGroup{Group: "billing"}}})
	if err != nil || claimed.GroupEpoch == 0 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	if _, err := follower.g.ClaimGroup(ctx, "billing"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("claim on a follower: %v, want ErrNotLeader", err)
	}
	stale := commit("billing", "orders", 0, 7)
	stale.GetCommitOffsets().CoordinatorEpoch = claimed.GroupEpoch
	if _, err := follower.g.Run(ctx, stale); err != nil {
		t.Fatalf("commit in the group's epoch: %v", err)
	}
	if _, err := propose(t, nodes, &pb.Command{Kind: &pb.Command_ClaimGroup{ClaimGroup: &pb.ClaimGroup{Group: "billing"}}}); err != nil {
		t.Fatal(err)
	}
	stale.GetCommitOffsets().Offsets[0].Offset = 3
	if _, err := follower.g.Run(ctx, stale); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit of the previous epoch: %v, want ErrFenced", err)
	}
	if off, _ := follower.g.Committed("billing", Partition{"orders", 0}); off != 7 {
		t.Fatalf("committed %d after a fenced commit, want 7", off)
	}
}

// With a snapshot every few entries, a node that was down while the
// others went on catches up from a snapshot (topics, nodes and group
// offsets alike, and its OnChange hears of the topics), and every node
// restarts from its snapshot plus the log after it.
func TestMetaGroupSnapshots(t *testing.T) {
	metaSnapshotEntries = 5
	defer func() { metaSnapshotEntries = 0 }()
	nodes := startMetaNodes(t, 3)
	for _, nd := range nodes {
		if _, err := propose(t, nodes, register(nd.id)); err != nil {
			t.Fatal(err)
		}
	}
	down := nodes[2]
	if _, err := propose(t, nodes, create("before", 1, 3)); err != nil {
		t.Fatal(err)
	}
	waitState(t, down, func(g *MetaGroup) bool { _, ok := g.Topic("before"); return ok })
	down.stop()
	for i := 0; i < 30; i++ {
		if _, err := propose(t, nodes[:2], commit("g", "before", 0, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := propose(t, nodes[:2], create("during", 2, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := propose(t, nodes[:2], del("before")); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes[:2] {
		if first := nd.g.rep.FirstIndex(); first < 10 {
			t.Fatalf("node %d: metadata log starts at index %d after 35 commands, snapshot every 5", nd.id, first)
		}
	}
	startMetaNode(t, down, nodes)
	waitState(t, down, func(g *MetaGroup) bool {
		_, gone := g.Topic("before")
		_, ok := g.Topic("during")
		return ok && !gone
	})
	down.mu.Lock()
	var created, deleted bool
	for _, c := range down.changes {
		created = created || c.Created != nil && c.Created.Name == "during"
		deleted = deleted || c.Deleted != nil && c.Deleted.Name == "before"
	}
	down.mu.Unlock()
	if !created || !deleted {
		t.Fatalf("the node that caught up was told of the topic created while it was down: %v, of the one deleted: %v", created, deleted)
	}
	// Offsets of a deleted topic went with it; new ones replicate.
	if _, err := propose(t, nodes, commit("g", "during", 1, 7)); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		waitState(t, nd, func(g *MetaGroup) bool { off, ok := g.Committed("g", Partition{"during", 1}); return ok && off == 7 })
		if _, ok := nd.g.Committed("g", Partition{"before", 0}); ok {
			t.Fatalf("node %d still has offsets of the deleted topic", nd.id)
		}
	}
	for _, nd := range nodes {
		nd.stop()
	}
	for _, nd := range nodes {
		startMetaNode(t, nd, nodes)
	}
	for _, nd := range nodes {
		waitState(t, nd, func(g *MetaGroup) bool {
			_, ok := g.Topic("during")
			off, _ := g.Committed("g", Partition{"during", 1})
			return ok && off == 7 && len(g.Nodes()) == 3
		})
	}
}

func waitState(t *testing.T, nd *metaNode, ok func(*MetaGroup) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(nd.g) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d did not reach the expected metadata state", nd.id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
