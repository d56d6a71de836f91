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
)

type metaNode struct {
	id      uint64
	dir     string
	addr    string
	ms      *meta.Store
	srv     *grpc.Server
	tr      *replication.GRPCTransport
	g       *MetaGroup
	mu      sync.Mutex
	changes []Change
}

func startMetaNodes(t *testing.T, n int) []*metaNode {
	nodes := make([]*metaNode, n)
	for i := range nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &metaNode{id: uint64(i + 1), dir: t.TempDir(), addr: l.Addr().String()}
		l.Close()
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
	nd.tr = replication.NewGRPCTransport(nd.id, host.Deliver, quiet)
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
	go nd.srv.Serve(l)
	nd.mu.Lock()
	nd.changes = nil
	nd.mu.Unlock()
	nd.g, err = OpenMetaGroup(MetaConfig{
		NodeID: nd.id, Peers: peers, Dir: nd.dir + "/meta-log", Meta: nd.ms, Transport: nd.tr, Host: host, Forward: nd.tr,
		Logger: quiet, TickInterval: 10 * time.Millisecond,
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
}
