package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// clusterClients dials every node.
func clusterClients(t *testing.T, nodes []*testcluster.Node) []pb.HermesClient {
	cs := make([]pb.HermesClient, len(nodes))
	for i, n := range nodes {
		cs[i], _ = dial(t, n)
		clientAddrs.Store(cs[i], n.GRPCAddr)
	}
	return cs
}

// clientAddrs maps the clients clusterClients made to their node's gRPC
// address.
var clientAddrs sync.Map

// retryUnavailable calls f until it stops failing with Unavailable (the
// cluster electing, nodes registering), up to d.
func retryUnavailable(t *testing.T, d time.Duration, f func() error) error {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishToLeader publishes one packed batch of ids to partition 0 through
// a live node, and returns the index of the node that stored it (the
// partition's leader: the answer names it when the node relayed the
// publish) and the base offset.
func publishToLeader(t *testing.T, cs []pb.HermesClient, live []bool, topic string, ids []record.MessageID) (int, int64) {
	t.Helper()
	return publishToLeaderSized(t, cs, live, topic, ids, 64)
}

// publishToLeaderSized is publishToLeader with payloads of size bytes.
func publishToLeaderSized(t *testing.T, cs []pb.HermesClient, live []bool, topic string, ids []record.MessageID, size int) (int, int64) {
	t.Helper()
	p0 := int32(0)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, c := range cs {
			if !live[i] {
				continue
			}
			resp, err := c.Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: topic, Partition: &p0,
				Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, size)})
			if err == nil {
				if resp.LeaderAddress == "" {
					return i, resp.BaseOffset
				}
				for j, cj := range cs {
					if addr, _ := clientAddrs.Load(cj); addr == resp.LeaderAddress {
						return j, resp.BaseOffset
					}
				}
				t.Fatalf("the publish was stored by %s, not a node of the test", resp.LeaderAddress)
			}
			// NotFound: that node has not applied the topic's creation yet
			// (metadata reaches each node through its own Raft log).
			if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded && code != codes.NotFound {
				t.Fatalf("publish through node %d: %v", i+1, err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no node accepted the publish within 20s")
	return 0, 0
}

// partitionBytes reads partition 0 of topic from node c, waiting until it
// holds want records, and returns its batches concatenated and its records.
func partitionBytes(t *testing.T, c pb.HermesClient, topic string, want int) ([]byte, []record.Record) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var raw []byte
		var recs []record.Record
		off := int64(0)
		for {
			resp, err := c.Fetch(ctxT(t, 5*time.Second), &pb.FetchRequest{Topic: topic, Offset: off, Packed: true, MaxBytes: 8 << 20})
			if err != nil || len(resp.Batches) == 0 {
				break
			}
			for _, b := range resp.Batches {
				raw = append(raw, b.Data...)
				rs, _ := record.DecodeRecords(nil, b.Data)
				recs = append(recs, rs...)
			}
			off = resp.NextOffset
		}
		if len(recs) >= want || time.Now().After(deadline) {
			return raw, recs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterReplicatesAndFailsOver runs three hermes processes: a topic
// created through a follower exists everywhere; consistent publishes
// through the partition leader are on every replica, byte for byte; the
// leader is killed with SIGKILL, another takes over (the failover time is
// reported), publishing goes on; the killed node restarts and catches up
// to byte-identical.
func TestClusterReplicatesAndFailsOver(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	live := []bool{true, true, true}
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[1].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "replicated", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatalf("create through node 2: %v", err)
	}
	for i, c := range cs {
		if _, err := c.DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: "replicated"}); err != nil {
			waitFor(t, 10*time.Second, fmt.Sprintf("node %d knows the topic", i+1), func() bool {
				_, err := c.DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: "replicated"})
				return err == nil
			})
		}
	}

	acked := map[record.MessageID]int64{}
	publish := func(batches int) int {
		leader := -1
		for i := 0; i < batches; i++ {
			ids := newIDs(100)
			l, base := publishToLeader(t, cs, live, "replicated", ids)
			leader = l
			for j, id := range ids {
				acked[id] = base + int64(j)
			}
		}
		return leader
	}
	leader := publish(30)
	checkReplicas := func(when string) {
		t.Helper()
		var ref []byte
		for i, c := range cs {
			if !live[i] {
				continue
			}
			raw, recs := partitionBytes(t, c, "replicated", len(acked))
			found := 0
			for _, r := range recs {
				if off, ok := acked[r.MessageID]; ok {
					if off != r.Offset {
						t.Fatalf("%s: node %d has %x at %d, acknowledged at %d", when, i+1, r.MessageID, r.Offset, off)
					}
					found++
				}
			}
			if found != len(acked) {
				t.Fatalf("%s: node %d holds %d of the %d acknowledged records", when, i+1, found, len(acked))
			}
			if ref == nil {
				ref = raw
			} else if !bytes.Equal(ref, raw) {
				t.Fatalf("%s: node %d's partition differs from the others' (%d vs %d bytes)", when, i+1, len(raw), len(ref))
			}
		}
	}
	checkReplicas("before the kill")

	nodes[leader].Kill()
	live[leader] = false
	killed := time.Now()
	publish(1)
	t.Logf("failover: first publish acknowledged %v after the leader was killed", time.Since(killed).Round(time.Millisecond))
	publish(20)
	checkReplicas("after failover")

	// Any node serves a publish: a follower relays it to the leader.
	for i, c := range cs {
		if !live[i] {
			continue
		}
		ids := newIDs(10)
		p0 := int32(0)
		resp, err := c.Publish(ctxT(t, 10*time.Second), &pb.PublishRequest{Topic: "replicated", Partition: &p0,
			Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, 64)})
		if err != nil {
			t.Fatalf("publish through node %d (forwarded if it does not lead): %v", i+1, err)
		}
		for j, id := range ids {
			acked[id] = resp.BaseOffset + int64(j)
		}
	}

	nodes[leader].Start()
	live[leader] = true
	cs[leader], _ = dial(t, nodes[leader])
	checkReplicas("after the old leader's restart")
	t.Logf("%d acknowledged records on all three nodes, byte-identical", len(acked))

	// hermes cluster status --json names the true leader and the replicas;
	// --addr takes a list, whose first reachable node answers.
	current, _ := publishToLeader(t, cs, live, "replicated", newIDs(1))
	addrs := testcluster.FreeAddr(t) + "," + nodes[0].GRPCAddr + "," + nodes[1].GRPCAddr
	out, err := exec.Command(testcluster.Binary(t), "cluster", "status", "--json", "--addr", addrs).Output()
	if err != nil {
		t.Fatalf("hermes cluster status: %v", err)
	}
	var st struct {
		Nodes []struct {
			ID        uint64
			Reachable bool
		}
		Partitions []struct {
			Topic     string
			Partition int32
			Leader    uint64
			Replicas  []uint64
			Lag       map[string]uint64
		}
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("cluster status JSON: %v\n%s", err, out)
	}
	if len(st.Nodes) != 3 || len(st.Partitions) != 1 || st.Partitions[0].Topic != "replicated" ||
		st.Partitions[0].Leader != uint64(current+1) || len(st.Partitions[0].Replicas) != 3 || len(st.Partitions[0].Lag) != 3 {
		t.Fatalf("cluster status (leader is node %d):\n%s", current+1, out)
	}
}

// publishDirect publishes one batch to partition 0 through node c (the
// leader, or the node relays it there), in the given mode; it returns the
// base offset or the error.
func publishDirect(t *testing.T, c pb.HermesClient, topic string, mode pb.DeliveryMode, ids []record.MessageID) (int64, error) {
	p0 := int32(0)
	resp, err := c.Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: topic, Partition: &p0, Mode: mode, Batch: packed(ids, 64)})
	if err != nil {
		return 0, err
	}
	return resp.BaseOffset, nil
}

// TestClusterPausedFollowerAndEventualLoss: with a follower stopped
// (SIGSTOP) a consistent publish still commits on the other two, and the
// follower catches up after SIGCONT; eventual publishes lose nothing while
// no node dies; when the leader dies during eventual publishing, the
// acknowledged records that did not survive are counted and reported.
func TestClusterPausedFollowerAndEventualLoss(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	live := []bool{true, true, true}
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "paused", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	leader, _ := publishToLeader(t, cs, live, "paused", newIDs(1))
	acked := map[record.MessageID]bool{}
	total := 1

	follower := (leader + 1) % 3
	nodes[follower].Pause()
	for i := 0; i < 10; i++ {
		ids := newIDs(100)
		if _, err := publishDirect(t, cs[leader], "paused", pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, ids); err != nil {
			nodes[follower].Resume()
			t.Fatalf("consistent publish with one follower paused: %v", err)
		}
		for _, id := range ids {
			acked[id] = true
		}
		total += len(ids)
	}
	nodes[follower].Resume()

	// Eventual, nobody dies: nothing acknowledged is lost.
	for i := 0; i < 10; i++ {
		ids := newIDs(100)
		if _, err := publishDirect(t, cs[leader], "paused", pb.DeliveryMode_DELIVERY_MODE_EVENTUAL, ids); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			acked[id] = true
		}
		total += len(ids)
	}
	var ref []byte
	for i, c := range cs {
		raw, recs := partitionBytes(t, c, "paused", total)
		found := 0
		for _, r := range recs {
			if acked[r.MessageID] {
				found++
			}
		}
		if found != len(acked) {
			t.Fatalf("node %d holds %d of %d acknowledged records (after a pause, and eventual with no failure)", i+1, found, len(acked))
		}
		if ref == nil {
			ref = raw
		} else if !bytes.Equal(ref, raw) {
			t.Fatalf("node %d differs from the others after catching up", i+1)
		}
	}

	// Eventual while the leader dies: count what was acknowledged but lost.
	eventual := map[record.MessageID]bool{}
	stop := time.After(1500 * time.Millisecond)
	killAt := time.After(500 * time.Millisecond)
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-killAt:
			nodes[leader].Kill()
			live[leader] = false
		default:
		}
		if !live[leader] {
			break
		}
		ids := newIDs(50)
		if _, err := publishDirect(t, cs[leader], "paused", pb.DeliveryMode_DELIVERY_MODE_EVENTUAL, ids); err == nil {
			for _, id := range ids {
				eventual[id] = true
			}
		}
	}
	newLeader, _ := publishToLeader(t, cs, live, "paused", newIDs(1))
	_, recs := partitionBytes(t, cs[newLeader], "paused", 0)
	kept := 0
	for _, r := range recs {
		if eventual[r.MessageID] {
			kept++
		}
	}
	t.Logf("eventual: %d records acknowledged by the leader before it was killed; %d survived on the new leader, %d lost",
		len(eventual), kept, len(eventual)-kept)
}

// TestClusterIsolatedLeader cuts the partition leader off from the other
// two nodes: it can no longer acknowledge a consistent publish, the
// majority elects a new leader and takes writes; after healing, every
// acknowledged record is on every replica exactly once, byte-identical,
// and the publish the isolated leader could not commit is nowhere.
func TestClusterIsolatedLeader(t *testing.T) {
	cl := testcluster.StartLinkedCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, cl.Nodes)
	live := []bool{true, true, true}
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "split", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[record.MessageID]bool{}
	leader := 0
	for i := 0; i < 5; i++ {
		ids := newIDs(100)
		leader, _ = publishToLeader(t, cs, live, "split", ids)
		for _, id := range ids {
			acked[id] = true
		}
	}

	cl.Cut(leader)
	cut := time.Now()
	orphan := newIDs(10)
	orphanErr := make(chan error, 1)
	isolated := cs[leader]
	go func() {
		_, err := publishDirect(t, isolated, "split", pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, orphan)
		orphanErr <- err
	}()
	live[leader] = false
	for i := 0; i < 5; i++ {
		ids := newIDs(100)
		publishToLeader(t, cs, live, "split", ids)
		for _, id := range ids {
			acked[id] = true
		}
	}
	t.Logf("the majority side took writes %v after the leader was cut off", time.Since(cut).Round(time.Millisecond))
	if err := <-orphanErr; err == nil {
		t.Fatal("a leader cut off from its followers acknowledged a consistent publish")
	} else {
		t.Logf("the isolated leader did not acknowledge: %v", status.Code(err))
	}

	cl.Heal(leader)
	live[leader] = true
	var ref []byte
	for i, c := range cs {
		raw, recs := partitionBytes(t, c, "split", len(acked))
		seen := map[record.MessageID]int{}
		for _, r := range recs {
			seen[r.MessageID]++
		}
		for id := range acked {
			if seen[id] != 1 {
				t.Fatalf("node %d holds acknowledged record %x %d times, want once", i+1, id, seen[id])
			}
		}
		for _, id := range orphan {
			if seen[id] != 0 {
				t.Fatalf("node %d holds a record the isolated leader never committed", i+1)
			}
		}
		if ref == nil {
			ref = raw
		} else if !bytes.Equal(ref, raw) {
			t.Fatalf("node %d differs from the others after healing", i+1)
		}
	}
}

// TestClusterBalancesLeaders: the partitions of a topic end up led by
// their preferred replicas, which placement spreads over the nodes, and
// leadership returns there after a leader's node comes back.
func TestClusterBalancesLeaders(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "spread", Config: &pb.TopicConfig{Partitions: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	balanced := func() (bool, string) {
		out, err := exec.Command(testcluster.Binary(t), "cluster", "status", "--json", "--addr", nodes[0].GRPCAddr).Output()
		if err != nil {
			return false, err.Error()
		}
		var st struct {
			Partitions []struct {
				Leader   uint64
				Replicas []uint64
			}
		}
		json.Unmarshal(out, &st)
		leaders := map[uint64]bool{}
		for _, p := range st.Partitions {
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				return false, string(out)
			}
			leaders[p.Leader] = true
		}
		return len(st.Partitions) == 3 && len(leaders) == 3, string(out)
	}
	waitBalanced := func(when string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok, out := balanced()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: leaders not on their preferred replicas after 20s:\n%s", when, out)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitBalanced("after creation")
	nodes[1].Kill()
	time.Sleep(2 * time.Second) // its partition fails over to another node
	nodes[1].Start()
	cs[1], _ = dial(t, nodes[1])
	waitBalanced("after node 2 came back")
}

// TestClusterSlowGroupConsumerThroughLeaderKill is design document 001's
// HA test: a slow group consumer (1 ms per record) reads while records are
// published, the partition leader is killed with SIGKILL, publishing goes
// on through the survivors; the consumer, on a surviving node, receives
// every acknowledged record (at-least-once: no gap, duplicates allowed).
func TestClusterSlowGroupConsumerThroughLeaderKill(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	live := []bool{true, true, true}
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "ha-slow", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	leader, _ := publishToLeader(t, cs, live, "ha-slow", newIDs(1))
	consumerNode := (leader + 1) % 3
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sc, err := client.Dial(ctx, nodes[consumerNode].GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	cons, err := sc.Subscribe(ctx, "ha-slow", client.WithGroup("ha-slow-group"), client.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var mu sync.Mutex
	received := map[record.MessageID]int{}
	go func() {
		for {
			m, err := cons.Next(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			received[record.MessageID(m.ID)]++
			mu.Unlock()
			time.Sleep(time.Millisecond) // the slow consumer
		}
	}()

	acked := map[record.MessageID]bool{}
	publish := func(batches int) {
		for i := 0; i < batches; i++ {
			ids := newIDs(50)
			publishToLeader(t, cs, live, "ha-slow", ids)
			for _, id := range ids {
				acked[id] = true
			}
		}
	}
	publish(20)
	nodes[leader].Kill() // a backlog is still being consumed
	live[leader] = false
	publish(20)
	waitFor(t, 60*time.Second, "the slow consumer received every acknowledged record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range acked {
			if received[id] == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	dups := 0
	for _, n := range received {
		dups += n - 1
	}
	mu.Unlock()
	t.Logf("all %d acknowledged records consumed through the leader kill; %d delivered twice", len(acked), dups)
}
