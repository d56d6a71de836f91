package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// relayedBatches reads a node's hermes_publish_relayed_batches_total for
// topic: the publishes it relayed to other nodes.
func relayedBatches(t testing.TB, n *testcluster.Node, topic string) int {
	t.Helper()
	return counter(t, n, `hermes_publish_relayed_batches_total{topic="`+topic+`"}`)
}

// counter reads one series (name with its labels) of a node's metrics.
func counter(t testing.TB, n *testcluster.Node, series string) int {
	t.Helper()
	for _, line := range strings.Split(n.Metrics(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return int(f)
		}
	}
	t.Fatalf("node %s exposes no %s", n.GRPCAddr, series)
	return 0
}

// partitionLeaders waits until node c sees each of the topic's partitions
// led by its preferred replica (the first), where leader balancing keeps
// it, and returns the leaders.
func partitionLeaders(t testing.TB, c pb.HermesClient, topic string, partitions int) map[int32]uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.DescribeCluster(ctx, &pb.DescribeClusterRequest{})
		cancel()
		leaders := map[int32]uint64{}
		if err == nil {
			for _, p := range resp.Partitions {
				if p.Topic == topic && p.Leader != 0 && len(p.Replicas) > 0 && p.Leader == p.Replicas[0] {
					leaders[p.Partition] = p.Leader
				}
			}
		}
		if len(leaders) == partitions {
			return leaders
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions of %s led by their preferred replicas after 20s: %v (err %v)", topic, leaders, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publishAll publishes n records through p, keyed to spread over every
// partition, and waits for every acknowledgement; it returns the ids.
func publishAll(t *testing.T, p *client.Producer, n int) []record.MessageID {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	futs := make([]*client.Future, n)
	for i := range futs {
		futs[i] = p.Publish(ctx, &client.Message{Key: fmt.Appendf(nil, "key-%d", i), Payload: fmt.Appendf(nil, "record %d", i)})
	}
	ids := make([]record.MessageID, n)
	for i, f := range futs {
		ack, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("record %d of %d: %v", i, n, err)
		}
		ids[i] = record.MessageID(ack.ID)
	}
	return ids
}

// routedTopic is a 3-node cluster with a topic of three partitions, each
// led by its preferred replica, and the node the clients dial: the one
// leading the fewest partitions, so that some are led elsewhere (remote
// is one of those).
type routedTopic struct {
	nodes   []*testcluster.Node
	cs      []pb.HermesClient
	leaders map[int32]uint64
	e       int // index of the entry node
	entry   *testcluster.Node
	remote  int32
}

func newRoutedTopic(t *testing.T, topic string) routedTopic {
	t.Helper()
	r := routedTopic{nodes: testcluster.StartCluster(t, 3, "--log-level", "warn")}
	r.cs = clusterClients(t, r.nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := r.cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: topic, Config: &pb.TopicConfig{Partitions: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.leaders = partitionLeaders(t, r.cs[0], topic, 3)
	r.checkAdvertised(t)
	led := make([]int, len(r.nodes))
	for _, l := range r.leaders {
		led[l-1]++
	}
	r.e = slices.Index(led, slices.Min(led))
	r.entry = r.nodes[r.e]
	r.remote = -1
	for part, l := range r.leaders {
		if l != uint64(r.e+1) {
			r.remote = part
		}
	}
	t.Logf("partition leaders %v; the clients dial node %d", r.leaders, r.e+1)
	return r
}

// checkAdvertised reads GET /v1/cluster/status of the first node: every
// node is listed with the addresses it registered, its hermes-wire
// address (where leader routing sends publishes) included.
func (r routedTopic) checkAdvertised(t *testing.T) {
	t.Helper()
	var st struct {
		Nodes []struct{ ID, GRPC, Kafka, Wire string }
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + r.nodes[0].HTTPAddr + "/v1/cluster/status")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Nodes) == len(r.nodes) || time.Now().After(deadline) {
			break
		}
	}
	if len(st.Nodes) != len(r.nodes) {
		t.Fatalf("/v1/cluster/status lists %d nodes, want %d: %+v", len(st.Nodes), len(r.nodes), st.Nodes)
	}
	for i, n := range st.Nodes {
		want := r.nodes[i]
		if n.ID != strconv.Itoa(i+1) || n.GRPC != want.GRPCAddr || n.Kafka != want.KafkaAddr || n.Wire != want.WireAddr {
			t.Errorf("node %d in /v1/cluster/status: %+v; it listens on gRPC %s, Kafka %s, hermes-wire %s", i+1, n, want.GRPCAddr, want.KafkaAddr, want.WireAddr)
		}
	}
}

// learnLeaders publishes through prod until the entry node relays
// nothing more of a round (the Producer connects to the leaders in the
// background and keeps sending through the entry node until those
// streams are open; on a loaded machine that can outlast the first
// round), then a last round that must not be relayed. It returns the
// records acknowledged and the batches the entry relayed meanwhile.
func (r routedTopic) learnLeaders(t *testing.T, prod *client.Producer, topic string) ([]record.MessageID, int) {
	t.Helper()
	acked := publishAll(t, prod, 3000)
	learned := relayedBatches(t, r.entry, topic)
	if learned == 0 {
		t.Fatalf("node %d relayed nothing, yet it leads only some of %v", r.e+1, r.leaders)
	}
	for round := 0; ; round++ {
		acked = append(acked, publishAll(t, prod, 300)...)
		n := relayedBatches(t, r.entry, topic)
		if n == learned {
			break
		}
		learned = n
		if round == 50 {
			t.Fatalf("node %d still relays after 50 rounds: the producer never connected to the leaders", r.e+1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	acked = append(acked, publishAll(t, prod, 3000)...)
	if n := relayedBatches(t, r.entry, topic); n != learned {
		t.Fatalf("node %d relayed %d more batches after the producer learned the leaders", r.e+1, n-learned)
	}
	t.Logf("relayed while learning the leaders: %d batches; after: 0", learned)
	return acked, learned
}

// killRemoteLeader kills the leader of partition remote and publishes to
// it through prod until acknowledged, then 3,000 more records.
func (r routedTopic) killRemoteLeader(t *testing.T, prod *client.Producer) []record.MessageID {
	t.Helper()
	r.nodes[r.leaders[r.remote]-1].Kill()
	killed := time.Now()
	key := []byte("k")
	for i := 0; record.KeyPartition(key, 3) != r.remote; i++ {
		key = fmt.Appendf(nil, "k%d", i)
	}
	ack, err := prod.Publish(context.Background(), &client.Message{Key: key, Payload: []byte("first after the kill")}).Wait(ctxT(t, 30*time.Second))
	if err != nil {
		t.Fatalf("first publish to partition %d after its leader was killed: %v", r.remote, err)
	}
	t.Logf("failover seen by the producer: partition %d acknowledged again %v after its leader was killed", r.remote, time.Since(killed).Round(time.Millisecond))
	acked := append([]record.MessageID{record.MessageID(ack.ID)}, publishAll(t, prod, 3000)...)
	t.Logf("3000 records acknowledged %v after killing node %d (leader of partition %d)", time.Since(killed).Round(time.Millisecond), r.leaders[r.remote], r.remote)
	return acked
}

// storedOnce checks that every acknowledged record is in the topic
// exactly once, read through the entry node (which may apply the last
// commits a moment after the leader acknowledged them).
func (r routedTopic) storedOnce(t *testing.T, topic string, acked []record.MessageID) {
	t.Helper()
	var seen map[record.MessageID]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		seen = map[record.MessageID]int{}
		for part := range int32(3) {
			for _, rec := range readAll(t, r.cs[r.e], topic, part) {
				seen[rec.MessageID]++
			}
		}
		if len(seen) >= len(acked) || time.Now().After(deadline) {
			break
		}
	}
	for i, id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged record %d (%v) is stored %d times", i, id, seen[id])
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("the topic holds %d records, %d were acknowledged", len(seen), len(acked))
	}
}

// producerTo dials addr and opens a Producer of topic, both closed at the
// test's end.
func producerTo(t *testing.T, addr, topic string, opts ...client.Option) (*client.Client, *client.Producer) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return c, p
}

// TestClusterProducerGoesToLeaders: a Producer dialled to one node of
// three sends its first batches through that node, which relays those of
// partitions it does not lead and names their leaders; from then on the
// Producer sends to the leaders itself, and the node relays nothing more.
// With WithLeaderRouting(false) the node keeps relaying (the control).
// Client.Publish to a fixed partition learns its leader the same way.
// When a leader is killed, the Producer falls back to the dialled node
// and finds the new leader; every acknowledged record is in the topic
// exactly once.
func TestClusterProducerGoesToLeaders(t *testing.T) {
	const topic = "routed"
	r := newRoutedTopic(t, topic)
	c, prod := producerTo(t, r.entry.GRPCAddr, topic)
	acked, learned := r.learnLeaders(t, prod, topic)

	// The control: without leader routing the entry node relays on.
	_, pp := producerTo(t, r.entry.GRPCAddr, topic, client.WithLeaderRouting(false))
	acked = append(acked, publishAll(t, pp, 3000)...)
	pp.Close(context.Background())
	before := relayedBatches(t, r.entry, topic)
	if before == learned {
		t.Fatal("without leader routing the entry node relayed nothing: the control cannot tell")
	}

	// Client.Publish to one partition: the first call is relayed, the
	// next go to the leader.
	for i := range 3 {
		acks, err := c.Publish(ctxT(t, 10*time.Second), topic, []*client.Message{{Payload: []byte("unary")}}, client.WithPartition(r.remote))
		if err != nil {
			t.Fatalf("unary publish %d: %v", i, err)
		}
		acked = append(acked, record.MessageID(acks[0].ID))
	}
	if n := relayedBatches(t, r.entry, topic) - before; n != 1 {
		t.Fatalf("three unary publishes to partition %d: node %d relayed %d, want 1 (the first)", r.remote, r.e+1, n)
	}

	// Kill the leader of a partition the producer now sends to directly.
	acked = append(acked, r.killRemoteLeader(t, prod)...)
	acked = append(acked, publishAll(t, prod, 3000)...)
	r.storedOnce(t, topic, acked)
}

// TestClusterWireProducerGoesToLeaders: over hermes-wire too, a Producer
// dialled to one node sends its first batches through it; the node relays
// those of partitions it does not lead and names the leaders' hermes-wire
// addresses in its acknowledgements (capability LEADER), and from then on
// the Producer sends to the leaders itself. Without leader routing the
// node keeps relaying (the control). After a leader is killed the
// Producer goes on through the dialled node to the new leader, and every
// acknowledged record is stored exactly once.
func TestClusterWireProducerGoesToLeaders(t *testing.T) {
	const topic = "wire-routed"
	r := newRoutedTopic(t, topic)
	_, prod := producerTo(t, "wire://"+r.entry.WireAddr, topic)
	acked, learned := r.learnLeaders(t, prod, topic)

	_, pp := producerTo(t, "wire://"+r.entry.WireAddr, topic, client.WithLeaderRouting(false))
	acked = append(acked, publishAll(t, pp, 3000)...)
	pp.Close(context.Background())
	if relayedBatches(t, r.entry, topic) == learned {
		t.Fatal("without leader routing the entry node relayed nothing: the control cannot tell")
	}

	acked = append(acked, r.killRemoteLeader(t, prod)...)
	r.storedOnce(t, topic, acked)
}

// TestClusterGroupMemberGoesToCoordinator: a group member subscribing on a
// node that does not coordinate groups is relayed to the coordinator,
// whose address the answer carries; the Client's next subscription of the
// group goes to the coordinator itself. Without leader routing it is
// relayed again (the control).
func TestClusterGroupMemberGoesToCoordinator(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "cg", Config: &pb.TopicConfig{Partitions: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	coord := metadataLeader(t, cs, []bool{true, true, true})
	entry := nodes[(coord+1)%3]
	const series = "hermes_group_members_relayed_total"
	ctx := context.Background()
	c, err := client.Dial(ctx, entry.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	prod, err := c.NewProducer(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close(context.Background()) })
	want := map[record.MessageID]bool{}
	for _, id := range publishAll(t, prod, 200) {
		want[id] = true
	}

	consume := func(cl *client.Client, n int) {
		t.Helper()
		cctx := ctxT(t, 30*time.Second)
		cons, err := cl.Subscribe(cctx, "cg", client.WithGroup("g"), client.FromBeginning(), client.WithAutoCommitInterval(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for i := 0; i < n && len(want) > 0; i++ { // a record may come twice (at-least-once)
			m, err := cons.Next(cctx)
			if err != nil {
				t.Fatal(err)
			}
			delete(want, record.MessageID(m.ID))
		}
	}
	consume(c, 100)
	if got := counter(t, entry, series); got != 1 {
		t.Fatalf("the first member through node %d: %d relayed, want 1", (coord+1)%3+1, got)
	}
	consume(c, 200) // the Client knows the coordinator now
	if got := counter(t, entry, series); got != 1 {
		t.Fatalf("the second member of the Client was relayed too (%d relayed)", got)
	}
	if len(want) > 0 {
		t.Fatalf("%d published records not consumed by the two members", len(want))
	}

	plain, err := client.Dial(ctx, entry.GRPCAddr, client.WithLeaderRouting(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	consume(plain, 0)
	if got := counter(t, entry, series); got != 2 {
		t.Fatalf("without leader routing: %d relayed, want 2", got)
	}
}
