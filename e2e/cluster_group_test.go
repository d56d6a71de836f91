package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// metadataLeader asks the nodes which node leads the metadata group (the
// group coordinator) and returns its index.
func metadataLeader(t *testing.T, cs []pb.HermesClient, live []bool) int {
	t.Helper()
	var idx int
	waitFor(t, 20*time.Second, "a metadata leader", func() bool {
		for i, c := range cs {
			if !live[i] {
				continue
			}
			resp, err := c.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
			if err == nil && resp.MetadataLeader != 0 && live[resp.MetadataLeader-1] {
				idx = int(resp.MetadataLeader - 1)
				return true
			}
		}
		return false
	})
	return idx
}

// groupConsumer consumes in a group and counts what it received, by
// message id, and the partitions it was assigned.
type groupConsumer struct {
	mu       sync.Mutex
	received map[record.MessageID]int
	cons     *client.Consumer
}

func startGroupConsumer(t *testing.T, ctx context.Context, addr, topic, group string) *groupConsumer {
	t.Helper()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cons, err := c.Subscribe(ctx, topic, client.WithGroup(group), client.FromBeginning(),
		client.WithAutoCommitInterval(100*time.Millisecond), client.WithSessionTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	gc := &groupConsumer{received: map[record.MessageID]int{}, cons: cons}
	go func() {
		for {
			m, err := cons.Next(ctx)
			if err != nil {
				return
			}
			gc.mu.Lock()
			gc.received[record.MessageID(m.ID)]++
			gc.mu.Unlock()
		}
	}()
	return gc
}

func (gc *groupConsumer) count(id record.MessageID) int {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.received[id]
}

// TestClusterGroupThroughCoordinatorKill: two members of one group on
// different nodes share the partitions (one coordinator for the cluster);
// the coordinator is killed with SIGKILL while they consume; the member
// that was connected to it moves to another node by itself, the group
// goes on at the new coordinator from the replicated offsets, and every
// acknowledged record is consumed (at least once, no gap). A member that
// joins afterwards resumes from the committed offsets, not from the start.
func TestClusterGroupThroughCoordinatorKill(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	live := []bool{true, true, true}
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "ha-group", Config: &pb.TopicConfig{Partitions: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	coord := metadataLeader(t, cs, live)
	other := (coord + 1) % 3
	var addrs []string // the coordinator first: the member starts there
	for _, i := range []int{coord, other, (coord + 2) % 3} {
		addrs = append(addrs, nodes[i].GRPCAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	pc, err := client.Dial(ctx, nodes[other].GRPCAddr+","+nodes[(coord+2)%3].GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	prod, err := pc.NewProducer(ctx, "ha-group")
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(context.Background())
	var acked []record.MessageID
	publish := func(n int) {
		t.Helper()
		futs := make([]*client.Future, n)
		for i := range futs {
			futs[i] = prod.Publish(ctx, &client.Message{Key: []byte{byte(i)}, Payload: []byte("group through a coordinator kill")})
		}
		for _, f := range futs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatalf("publish: %v", err)
			}
			acked = append(acked, record.MessageID(f.ID()))
		}
	}
	publish(1500)

	a := startGroupConsumer(t, ctx, strings.Join(addrs, ","), "ha-group", "ha-members")
	b := startGroupConsumer(t, ctx, nodes[other].GRPCAddr, "ha-group", "ha-members")
	waitFor(t, 20*time.Second, "both members share the three partitions", func() bool {
		pa, pb := a.cons.Assignment(), b.cons.Assignment()
		all := append(slices.Clone(pa), pb...)
		slices.Sort(all)
		return len(pa) > 0 && len(pb) > 0 && slices.Equal(all, []int32{0, 1, 2})
	})
	t.Logf("assignment: member at the coordinator %v, member relayed from node %d %v", a.cons.Assignment(), other+1, b.cons.Assignment())

	consumedAll := func() bool {
		for _, id := range acked {
			if a.count(id)+b.count(id) == 0 {
				return false
			}
		}
		return true
	}
	waitFor(t, 30*time.Second, "the backlog consumed", consumedAll)

	// Kill the coordinator while records are published and consumed.
	killedAt := make(chan time.Time, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		nodes[coord].Kill()
		killedAt <- time.Now()
	}()
	publish(1500)
	killed := <-killedAt
	live[coord] = false
	waitFor(t, 60*time.Second, "every acknowledged record consumed after the coordinator kill", consumedAll)
	dups := 0
	for _, id := range acked {
		dups += a.count(id) + b.count(id) - 1
	}
	newCoord := metadataLeader(t, cs, live)
	t.Logf("all %d acknowledged records consumed %s after killing the coordinator (node %d; now node %d); %d delivered twice",
		len(acked), time.Since(killed).Round(time.Millisecond), coord+1, newCoord+1, dups)

	// Offsets are replicated: every live node describes the same commits,
	// and a member that joins after the others left starts from them.
	a.cons.Close()
	b.cons.Close()
	var committed int64
	waitFor(t, 20*time.Second, "the group's offsets committed up to the end", func() bool {
		resp, err := cs[other].DescribeGroup(ctxT(t, 5*time.Second), &pb.DescribeGroupRequest{Group: "ha-members"})
		if err != nil {
			return false
		}
		committed = 0
		for _, p := range resp.Partitions {
			if p.CommittedOffset < p.HighWatermark {
				return false
			}
			committed += p.CommittedOffset
		}
		return committed == int64(len(acked))
	})
	publish(30)
	late := startGroupConsumer(t, ctx, nodes[(coord+2)%3].GRPCAddr, "ha-group", "ha-members")
	waitFor(t, 20*time.Second, "the late member gets the 30 new records", func() bool {
		for _, id := range acked[len(acked)-30:] {
			if late.count(id) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	late.mu.Lock()
	n := len(late.received)
	late.mu.Unlock()
	if n != 30 {
		t.Fatalf("the late member received %d records, want the 30 published after the commits", n)
	}
}

// A topic created through one node is known at once on every other node
// (they catch up with the metadata group before answering "not found").
func TestClusterTopicVisibleEverywhereAtOnce(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	for i := 0; i < 10; i++ {
		name := fmt.Sprint("at-once-", i)
		creator := i % 3
		err := retryUnavailable(t, 30*time.Second, func() error {
			_, err := cs[creator].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: name, Config: &pb.TopicConfig{Partitions: 2}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for j, c := range cs {
			if _, err := c.DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: name}); err != nil {
				t.Fatalf("topic %s created through node %d, described on node %d: %v", name, creator+1, j+1, err)
			}
		}
	}
}

// A publish retried with the same records (same message ids) is answered
// with the first copy's offset through any node, and after the
// partition's leader is killed, by the new leader: it is stored once.
func TestClusterRetriedPublishStoredOnce(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "retry", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := newIDs(20)
	batch := packed(ids, 100)
	p0 := int32(0)
	publishVia := func(i int) int64 {
		t.Helper()
		var base int64
		err := retryUnavailable(t, 20*time.Second, func() error {
			resp, err := cs[i].Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: "retry", Partition: &p0,
				Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: append([]byte(nil), batch...)})
			if err == nil {
				base = resp.BaseOffset
			}
			return err
		})
		if err != nil {
			t.Fatalf("publish through node %d: %v", i+1, err)
		}
		return base
	}
	first := publishVia(0)
	live := []bool{true, true, true}
	leader, _ := publishToLeader(t, cs, live, "retry", newIDs(5)) // something after it
	for i := range cs {
		if got := publishVia(i); got != first {
			t.Fatalf("the retry through node %d got offset %d, the first copy is at %d", i+1, got, first)
		}
	}
	nodes[leader].Kill()
	live[leader] = false
	survivor := (leader + 1) % 3
	if got := publishVia(survivor); got != first {
		t.Fatalf("after the leader's kill the retry got offset %d, the first copy is at %d", got, first)
	}
	_, recs := partitionBytes(t, cs[survivor], "retry", 25)
	seen := map[record.MessageID]int{}
	for _, r := range recs {
		seen[r.MessageID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("message %x stored %d times", id[:4], seen[id])
		}
	}
	if len(recs) != 25 {
		t.Fatalf("%d records in the partition, want 25", len(recs))
	}
}
