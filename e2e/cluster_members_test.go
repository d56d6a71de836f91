package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
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

// TestClusterNodeJoinsAndLeaves adds a fourth node to a running cluster
// with `hermes cluster join`: it catches up with the metadata (a snapshot,
// the metadata log being compacted, then the log), registers, gets
// replicas of a topic created afterwards and serves reads of them. It is
// refused removal while it holds replicas, and removed once it holds none.
func TestClusterNodeJoinsAndLeaves(t *testing.T) {
	snap := []string{"--log-level", "info", "--metadata-snapshot-entries", "20"}
	nodes := testcluster.StartCluster(t, 3, snap...)
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "before", Config: &pb.TopicConfig{Partitions: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ { // metadata entries: the log is compacted
		err := retryUnavailable(t, 10*time.Second, func() error {
			_, err := cs[i%3].CommitOffsets(ctxT(t, 5*time.Second), &pb.CommitOffsetsRequest{Group: "g",
				Offsets: []*pb.PartitionOffset{{Topic: "before", Partition: 0, Offset: 0}}})
			return err
		})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}

	raft4 := testcluster.FreeAddr(t)
	var peers []string
	for i, n := range nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, n.RaftAddr))
	}
	peers = append(peers, "4="+raft4)
	n4 := testcluster.StartNode(t, append([]string{"--node-id", "4", "--raft-addr", raft4, "--peers", strings.Join(peers, ","), "--join"}, snap...)...)
	c4, _ := dial(t, n4)

	out, err := exec.Command(testcluster.Binary(t), "cluster", "join", "--addr", nodes[1].GRPCAddr,
		"--node-id", "4", "--raft-addr", raft4).CombinedOutput()
	if err != nil {
		t.Fatalf("hermes cluster join: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, "node 4 knows the cluster and is registered everywhere", func() bool {
		resp, err := c4.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
		if err != nil || len(resp.Nodes) != 4 {
			return false
		}
		_, err = c4.DescribeTopic(ctxT(t, 2*time.Second), &pb.DescribeTopicRequest{Name: "before"})
		return err == nil
	})
	if !strings.Contains(n4.Log(200), "snapshot installed") {
		t.Fatal("node 4 caught up without installing the metadata snapshot")
	}

	// A topic created now is placed on the four nodes.
	err = retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "after", Config: &pb.TopicConfig{Partitions: 4}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var held []int32
	waitFor(t, 20*time.Second, "node 4 holds replicas of the new topic", func() bool {
		resp, err := c4.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		held = nil
		for _, p := range resp.Partitions {
			if p.Topic == "after" && slices.Contains(p.Replicas, 4) {
				held = append(held, p.Partition)
			}
		}
		return len(held) == 3 // 4 partitions, 3 replicas each, over 4 nodes
	})
	for _, p := range held {
		ids := newIDs(10)
		p := p
		err := retryUnavailable(t, 20*time.Second, func() error {
			_, err := c4.Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: "after", Partition: &p,
				Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, 50)})
			return err
		})
		if err != nil {
			t.Fatalf("publish to after/%d through node 4: %v", p, err)
		}
		// Committed by a quorum; node 4's replica learns the commit a
		// heartbeat later.
		waitFor(t, 10*time.Second, fmt.Sprintf("node 4 reads the 10 records of after/%d", p), func() bool {
			got := readAll(t, c4, "after", p)
			return len(got) == 10 && got[0].MessageID == ids[0]
		})
	}

	out, err = exec.Command(testcluster.Binary(t), "cluster", "remove", "--addr", nodes[0].GRPCAddr, "4").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "replicas") {
		t.Fatalf("removing a node that holds replicas: %v\n%s", err, out)
	}
	if _, err := cs[0].DeleteTopic(ctxT(t, 20*time.Second), &pb.DeleteTopicRequest{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(testcluster.Binary(t), "cluster", "remove", "--addr", nodes[2].GRPCAddr, "4").CombinedOutput()
	if err != nil {
		t.Fatalf("hermes cluster remove 4: %v\n%s", err, out)
	}
	n4.Stop()
	resp, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
	if err != nil || len(resp.Nodes) != 3 {
		t.Fatalf("after removing node 4: %v, %v", resp, err)
	}
	// The three go on without it.
	err = retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[1].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "later", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatalf("create a topic after removing node 4: %v", err)
	}
}

// TestClusterRebalanceMovesReplicas: after a fourth node joins, `hermes
// cluster rebalance` moves replicas to it while the partitions stay
// writable; the moved replicas hold every record, byte for byte as the
// others; `rebalance --drain 4` moves them all away again, and the node
// can then be removed.
func TestClusterRebalanceMovesReplicas(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "info")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "moving",
			Config: &pb.TopicConfig{Partitions: 4, ReplicationFactor: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	published := map[int32][]record.MessageID{}
	publish := func(via pb.HermesClient) {
		t.Helper()
		for p := int32(0); p < 4; p++ {
			ids := newIDs(25)
			p := p
			err := retryUnavailable(t, 20*time.Second, func() error {
				_, err := via.Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: "moving", Partition: &p,
					Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, 100)})
				return err
			})
			if err != nil {
				t.Fatalf("publish to moving/%d: %v", p, err)
			}
			published[p] = append(published[p], ids...)
		}
	}
	publish(cs[0])

	n4 := joinFourthNode(t, nodes, cs[0])
	c4, _ := dial(t, n4)

	start := time.Now()
	out := hermesCLI(t, "cluster", "rebalance", "--addr", nodes[1].GRPCAddr, "--wait", "60s")
	t.Logf("rebalance onto node 4 (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	publish(c4) // through the new node, after the moves

	holds := func(node uint64) []int32 {
		resp, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var held []int32
		for _, p := range resp.Partitions {
			if p.Topic == "moving" && slices.Contains(p.Replicas, node) {
				held = append(held, p.Partition)
			}
		}
		return held
	}
	held := holds(4)
	if len(held) != 2 {
		t.Fatalf("node 4 holds replicas of partitions %v after rebalancing 8 replicas over 4 nodes, want 2", held)
	}
	for _, p := range held {
		want := published[p]
		var ref []byte
		replicas := mustReplicas(t, cs[0], p)
		for i, c := range append(cs, c4) {
			if !slices.Contains(replicas, uint64(i+1)) {
				continue // reads through a node without a replica are not relayed yet
			}
			var got []record.Record
			waitFor(t, 10*time.Second, fmt.Sprintf("node %d reads moving/%d", i+1, p), func() bool {
				got = readAll(t, c, "moving", p)
				return len(got) == len(want)
			})
			for j, r := range got {
				if r.MessageID != want[j] {
					t.Fatalf("node %d: moving/%d record %d is %x, want %x", i+1, p, j, r.MessageID[:4], want[j][:4])
				}
			}
			raw := rawBatches(t, c, "moving", p)
			if ref == nil {
				ref = raw
			} else if !bytes.Equal(raw, ref) {
				t.Fatalf("node %d's copy of moving/%d differs from another replica's", i+1, p)
			}
		}
	}

	out = hermesCLI(t, "cluster", "rebalance", "--addr", nodes[2].GRPCAddr, "--drain", "4", "--wait", "60s")
	t.Logf("drain node 4:\n%s", out)
	if held := holds(4); len(held) != 0 {
		t.Fatalf("node 4 still holds %v after draining it", held)
	}
	hermesCLI(t, "cluster", "remove", "--addr", nodes[0].GRPCAddr, "4")
	n4.Stop()
	publish(cs[1])
	for p := int32(0); p < 4; p++ {
		var got []record.Record
		for _, r := range mustReplicas(t, cs[0], p) {
			waitFor(t, 10*time.Second, fmt.Sprintf("node %d reads every record of moving/%d", r, p), func() bool {
				got = readAll(t, cs[r-1], "moving", p)
				return len(got) == len(published[p])
			})
		}
	}
}

func mustReplicas(t *testing.T, c pb.HermesClient, partition int32) []uint64 {
	t.Helper()
	resp, err := c.DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Partitions {
		if p.Topic == "moving" && p.Partition == partition {
			return p.Replicas
		}
	}
	t.Fatalf("no partition moving/%d", partition)
	return nil
}

// rawBatches is a partition's batches as stored, concatenated.
func rawBatches(t *testing.T, c pb.HermesClient, topic string, partition int32) []byte {
	t.Helper()
	var raw []byte
	for off := int64(0); ; {
		resp, err := c.Fetch(ctxT(t, 5*time.Second), &pb.FetchRequest{Topic: topic, Partition: partition, Offset: off, Packed: true, MaxBytes: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Batches) == 0 {
			return raw
		}
		for _, b := range resp.Batches {
			raw = append(raw, b.Data...)
		}
		off = resp.NextOffset
	}
}

// TestClusterReadsWithoutLocalReplica: with one replica per partition,
// every node lacks most partitions, yet fetches, plain subscriptions and
// group members on any node get every record: reads are relayed to a node
// holding the partition.
func TestClusterReadsWithoutLocalReplica(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "sparse",
			Config: &pb.TopicConfig{Partitions: 3, ReplicationFactor: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var all []record.MessageID
	publish := func(n int) {
		t.Helper()
		for p := int32(0); p < 3; p++ {
			ids := newIDs(n)
			p := p
			err := retryUnavailable(t, 20*time.Second, func() error {
				_, err := cs[int(p+1)%3].Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: "sparse", Partition: &p,
					Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, 64)})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ids...)
		}
	}
	start := time.Now()
	publish(20)
	t.Logf("published 60 records in %s", time.Since(start).Round(time.Millisecond))
	// Fetch every partition through every node.
	for i, c := range cs {
		for p := int32(0); p < 3; p++ {
			if got := readAll(t, c, "sparse", p); len(got) != 20 {
				t.Fatalf("node %d fetched %d records of sparse/%d, want 20", i+1, len(got), p)
			}
		}
	}
	// A plain subscriber and a group member on node 1, from the beginning.
	sc, err := client.Dial(ctx, nodes[0].GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	plain, err := sc.Subscribe(ctx, "sparse", client.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	member := startGroupConsumer(t, ctx, nodes[1].GRPCAddr, "sparse", "sparse-group")
	got := map[record.MessageID]bool{}
	var mu sync.Mutex
	go func() {
		for {
			m, err := plain.Next(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			got[record.MessageID(m.ID)] = true
			mu.Unlock()
		}
	}()
	publish(10) // after they subscribed: reach them by polling
	subscribed := time.Now()
	waitFor(t, 30*time.Second, "both consumers received every record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range all {
			if !got[id] || member.count(id) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("every record reached both consumers %s after the last publish", time.Since(subscribed).Round(time.Millisecond))
}

// TestClusterRetentionOnReplicatedPartitions: retention bounds a
// replicated partition's disk on every replica (its Raft log is compacted
// up to where retention cuts), and a replica that was down while the
// others cut past its end restarts from the leader's retention point and
// goes on replicating.
func TestClusterRetentionOnReplicatedPartitions(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "info", "--retention-check", "300ms")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "bounded", Config: &pb.TopicConfig{
			Partitions: 1, SegmentBytes: 1 << 20, RetentionBytes: 3 << 20}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	publishMiB := func(mib int) {
		t.Helper()
		for i := 0; i < mib*16; i++ { // 16 batches of 64 records of 1 KiB
			publishToLeaderSized(t, cs, live, "bounded", newIDs(64), 1024)
		}
	}
	startOn := func(i int) (int64, int64) {
		resp, err := cs[i].DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: "bounded"})
		if err != nil {
			return -1, -1
		}
		p := resp.Topic.Partitions[0]
		return p.StartOffset, p.EndOffset
	}
	publishMiB(8)
	// 3 MiB kept + the active segment, of ~1 KiB records; retention cuts
	// at its next check after the entries are applied.
	waitFor(t, 20*time.Second, "retention bounds every replica", func() bool {
		for i := range cs {
			if s, e := startOn(i); s <= 0 || e-s > 6*1024 {
				return false
			}
		}
		return true
	})
	for i := range cs {
		s, e := startOn(i)
		t.Logf("node %d keeps offsets [%d, %d)", i+1, s, e)
	}

	// A follower away while the others cut past its end.
	leader, _ := publishToLeader(t, cs, live, "bounded", newIDs(1))
	away := (leader + 1) % 3
	nodes[away].Kill()
	live[away] = false
	// What the stopped node holds: at most the leader's end (every
	// publish was acknowledged). Its own high watermark may lag the
	// entries it stored, which it could then catch up from without a
	// snapshot.
	_, awayEnd := startOn(leader)
	publishMiB(8)
	waitFor(t, 20*time.Second, "the others cut past the stopped node's end", func() bool {
		for i := range cs {
			if live[i] {
				if s, _ := startOn(i); s <= awayEnd {
					return false
				}
			}
		}
		return true
	})
	nodes[away].Start()
	live[away] = true
	_, end := startOn(leader)
	waitFor(t, 30*time.Second, "the restarted node caught up from the leader's retention point", func() bool {
		s, e := startOn(away)
		return s > awayEnd && e >= end
	})
	if !strings.Contains(nodes[away].Log(400), "restarted from its leader's retention point") {
		t.Fatal("the node caught up without the leader's snapshot")
	}
	ids := newIDs(10)
	publishToLeader(t, cs, live, "bounded", ids)
	waitFor(t, 20*time.Second, "the restarted node replicates new records", func() bool {
		_, e := startOn(away)
		return e >= end+10
	})
}

// TestClusterRebalanceThroughLeaderKill: replicas move onto a fourth node
// while an SDK producer publishes, and the leader of a moving partition is
// killed with SIGKILL in the middle of the move and restarted. The moves
// still complete (each step is checked against the group's actual voters
// by whichever replica leads next); every acknowledged record is stored
// once on every replica, and the replicas are byte-identical.
func TestClusterRebalanceThroughLeaderKill(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "info")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "moving",
			Config: &pb.TopicConfig{Partitions: 4, ReplicationFactor: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n4 := joinFourthNode(t, nodes, cs[0])
	c4, _ := dial(t, n4)

	// An SDK producer publishes throughout, through the three first nodes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, err := client.Dial(ctx, nodes[0].GRPCAddr+","+nodes[1].GRPCAddr+","+nodes[2].GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	prod, err := pc.NewProducer(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close(context.Background()) })
	stop := make(chan struct{})
	type sent struct {
		f   *client.Future
		key int
	}
	var futs []sent
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; i < 20000; i++ { // bounded: 100 per 20 ms for at most ~4 s of moves and kills, then stop
			select {
			case <-stop:
				return
			default:
			}
			futs = append(futs, sent{prod.Publish(ctx, &client.Message{Key: fmt.Appendf(nil, "k%d", i), Payload: fmt.Appendf(nil, "r%d", i)}), i})
			if i%100 == 99 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)

	hermesCLI(t, "cluster", "rebalance", "--addr", nodes[1].GRPCAddr)
	// Kill the leader of a partition that is moving onto node 4 (or, when
	// the small moves were quicker than the first look, that just moved
	// there: the other moves may still be under way).
	var victim uint64
	waitFor(t, 10*time.Second, "a partition moving onto node 4 with a known leader", func() bool {
		// Only a node holding a replica knows its leader: ask each.
		for _, c := range cs[:3] {
			resp, err := c.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
			if err != nil {
				continue
			}
			for _, p := range resp.Partitions {
				onto4 := slices.Contains(p.Target, 4) || slices.Contains(p.Replicas, 4)
				if p.Topic == "moving" && onto4 && p.Leader != 0 && p.Leader != 4 {
					victim = p.Leader
					return true
				}
			}
		}
		return false
	})
	nodes[victim-1].Kill()
	t.Logf("killed node %d, leader of a partition moving onto node 4", victim)
	time.Sleep(2 * time.Second)
	nodes[victim-1].Start()
	live := cs[victim%3] // a node that stayed up
	start := time.Now()
	var state string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := live.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
		moving := err != nil
		state = fmt.Sprint(err)
		if err == nil {
			state = ""
			for _, p := range resp.Partitions {
				state += fmt.Sprintf("\n  %s/%d leader %d replicas %v target %v", p.Topic, p.Partition, p.Leader, p.Replicas, p.Target)
				if p.Topic == "moving" && len(p.Target) > 0 {
					moving = true
				}
			}
		}
		if !moving {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("moves not done 60s after node %d came back:%s", victim, state)
		}
	}
	t.Logf("moves done %v after node %d came back", time.Since(start).Round(time.Millisecond), victim)
	close(stop)
	<-pubDone
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	acked := map[int32][]record.MessageID{}
	for _, s := range futs {
		ack, err := s.f.Wait(ctx)
		if err != nil {
			t.Fatalf("record k%d: %v", s.key, err)
		}
		acked[ack.Partition] = append(acked[ack.Partition], record.MessageID(ack.ID))
	}
	t.Logf("%d records acknowledged during the moves", len(futs))

	all := append(slices.Clone(cs), c4)
	held := 0
	for p := int32(0); p < 4; p++ {
		replicas := mustReplicas(t, live, p)
		if slices.Contains(replicas, 4) {
			held++
		}
		var ref []byte
		for _, r := range replicas {
			var got []record.Record
			waitFor(t, 20*time.Second, fmt.Sprintf("node %d holds every acknowledged record of moving/%d", r, p), func() bool {
				got = readAll(t, all[r-1], "moving", p)
				return len(got) >= len(acked[p])
			})
			seen := map[record.MessageID]int{}
			for _, rec := range got {
				seen[rec.MessageID]++
			}
			for _, id := range acked[p] {
				if seen[id] != 1 {
					t.Fatalf("node %d: acknowledged record %x of moving/%d is stored %d times", r, id[:4], p, seen[id])
				}
			}
			raw := rawBatches(t, all[r-1], "moving", p)
			if ref == nil {
				ref = raw
			} else if !bytes.Equal(raw, ref) {
				t.Fatalf("node %d's copy of moving/%d differs from another replica's", r, p)
			}
		}
	}
	if held != 2 {
		t.Fatalf("node 4 holds replicas of %d partitions after rebalancing 8 replicas over 4 nodes, want 2", held)
	}
}

// TestClusterCancelMoveToDeadNode: moves onto a node that died can never
// finish (the new replica cannot catch up); `hermes cluster rebalance
// --cancel` sends the partitions back to their replicas, their leaders
// remove the voter they had added, and the dead node can be removed.
func TestClusterCancelMoveToDeadNode(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "info")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "moving",
			Config: &pb.TopicConfig{Partitions: 4, ReplicationFactor: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n4 := joinFourthNode(t, nodes, cs[0])
	n4.Kill() // for good

	out := hermesCLI(t, "cluster", "rebalance", "--addr", nodes[1].GRPCAddr)
	t.Logf("rebalance onto the dead node 4:\n%s", out)
	time.Sleep(2 * time.Second) // the leaders add node 4 as a voter; it never catches up
	moving := func() int {
		resp, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range resp.Partitions {
			if len(p.Target) > 0 {
				n++
			}
		}
		return n
	}
	if n := moving(); n == 0 {
		t.Fatal("the moves onto a dead node finished")
	}
	out = hermesCLI(t, "cluster", "rebalance", "--addr", nodes[2].GRPCAddr, "--cancel", "--wait", "30s")
	t.Logf("cancel:\n%s", out)
	if n := moving(); n != 0 {
		t.Fatalf("%d partitions still moving after the cancel", n)
	}
	for p := int32(0); p < 4; p++ {
		if r := mustReplicas(t, cs[0], p); slices.Contains(r, 4) {
			t.Fatalf("moving/%d replicas %v include the dead node", p, r)
		}
		p := p
		err := retryUnavailable(t, 20*time.Second, func() error {
			_, err := cs[0].Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: "moving", Partition: &p,
				Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(newIDs(10), 64)})
			return err
		})
		if err != nil {
			t.Fatalf("publish to moving/%d after the cancel: %v", p, err)
		}
	}
	hermesCLI(t, "cluster", "remove", "--addr", nodes[0].GRPCAddr, "4")
}

// joinFourthNode starts node 4 with --join, adds it to the cluster of
// nodes through `hermes cluster join`, and waits until c sees it
// registered.
func joinFourthNode(t *testing.T, nodes []*testcluster.Node, c pb.HermesClient) *testcluster.Node {
	t.Helper()
	raft4 := testcluster.FreeAddr(t)
	var peers []string
	for i, n := range nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, n.RaftAddr))
	}
	peers = append(peers, "4="+raft4)
	n4 := testcluster.StartNode(t, "--node-id", "4", "--raft-addr", raft4, "--peers", strings.Join(peers, ","), "--join", "--log-level", "info")
	hermesCLI(t, "cluster", "join", "--addr", nodes[0].GRPCAddr, "--node-id", "4", "--raft-addr", raft4)
	waitFor(t, 20*time.Second, "node 4 registered", func() bool {
		resp, err := c.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
		return err == nil && len(resp.Nodes) == 4
	})
	return n4
}

// hermesCLI runs the hermes command and returns its output; it fails the
// test when the command fails.
func hermesCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testcluster.Binary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hermes %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestClusterMovesAcrossCompactions: a partition's replicas move three
// times, with its Raft log compacted by retention before the first move
// and again between the second and the third, so that each new replica
// starts from a snapshot taken before some of the configuration changes
// it then replays. Every move completes, and the replicas end up holding
// the same bytes. (A snapshot that carried the configuration of its
// taking instead of its compaction point made a new replica believe a
// removed node a voter and refuse its real leader.)
func TestClusterMovesAcrossCompactions(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "info", "--retention-check", "300ms")
	cs := clusterClients(t, nodes)
	const topic = "shifting"
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: topic, Config: &pb.TopicConfig{
			Partitions: 1, ReplicationFactor: 2, SegmentBytes: 1 << 20, RetentionBytes: 2 << 20}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	replicas := func() []uint64 {
		t.Helper()
		resp, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Partitions {
			if p.Topic == topic {
				return p.Replicas
			}
		}
		t.Fatalf("no partition %s/0", topic)
		return nil
	}
	span := func(node uint64) (int64, int64) {
		resp, err := cs[node-1].DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: topic})
		if err != nil {
			return -1, -1
		}
		p := resp.Topic.Partitions[0]
		return p.StartOffset, p.EndOffset
	}
	// compact publishes 5 MiB and waits until every replica has cut its
	// log past where it was.
	compact := func() {
		t.Helper()
		var before int64
		for _, r := range replicas() {
			if s, _ := span(r); s > before {
				before = s
			}
		}
		for i := 0; i < 5*16; i++ { // 16 batches of 64 records of 1 KiB a MiB
			publishToLeaderSized(t, cs, live, topic, newIDs(64), 1024)
		}
		waitFor(t, 20*time.Second, "retention cuts every replica's log", func() bool {
			for _, r := range replicas() {
				if s, _ := span(r); s <= before {
					return false
				}
			}
			return true
		})
	}
	move := func(round int) {
		t.Helper()
		was := replicas()
		drain := was[0]
		start := time.Now()
		hermesCLI(t, "cluster", "rebalance", "--addr", nodes[(round+1)%3].GRPCAddr, "--drain", fmt.Sprint(drain), "--wait", "60s")
		now := replicas()
		if slices.Contains(now, drain) || len(now) != 2 {
			t.Fatalf("round %d: replicas %v after draining node %d from %v", round, now, drain, was)
		}
		t.Logf("round %d: replicas %v -> %v in %v", round, was, now, time.Since(start).Round(time.Millisecond))
	}

	compact()
	move(1)
	move(2) // its new replica starts from the snapshot taken before round 1
	compact()
	move(3)

	ids := newIDs(10)
	publishToLeader(t, cs, live, topic, ids)
	final := replicas()
	_, end := span(final[0])
	var ref []byte
	for _, r := range final {
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d holds the last records", r), func() bool {
			_, e := span(r)
			return e >= end
		})
		s, _ := span(r)
		var raw []byte
		for off := s; off < end; {
			resp, err := cs[r-1].Fetch(ctxT(t, 5*time.Second), &pb.FetchRequest{Topic: topic, Offset: off, Packed: true, MaxBytes: 8 << 20})
			if err != nil {
				t.Fatalf("node %d: fetch at %d: %v", r, off, err)
			}
			if len(resp.Batches) == 0 {
				t.Fatalf("node %d: nothing at %d, below its end %d", r, off, end)
			}
			for _, b := range resp.Batches {
				raw = append(raw, b.Data...)
			}
			off = resp.NextOffset
		}
		if ref == nil {
			ref = raw
		} else if !bytes.HasSuffix(ref, raw) && !bytes.HasSuffix(raw, ref) {
			// Retention may cut one replica a segment further than the
			// other: what both hold must be the same bytes.
			t.Fatalf("node %d's copy differs from node %d's", r, final[0])
		}
	}
	got := readFrom(t, cs[final[1]-1], topic, 0, end-10)
	for i, id := range ids {
		if got[i].MessageID != id {
			t.Fatalf("record %d is %x, want %x", end-10+int64(i), got[i].MessageID[:4], id[:4])
		}
	}
}

// TestSingleNodeGrowsIntoACluster: a single node (started without
// --peers) becomes a 3-node cluster by `hermes cluster join` alone; its
// topic keeps its records, a topic created afterwards is replicated on the
// three, and after a full stop the first node, restarted with the flags
// it always had, is a member of that cluster: it waits for the others
// instead of acting as a cluster of one, then serves both topics.
func TestSingleNodeGrowsIntoACluster(t *testing.T) {
	// Node TLS from the start, as the nodes that join it use.
	n1 := testcluster.StartNode(t, append(testcluster.NodeTLSArgs(t, 1), "--log-level", "info")...)
	c1, _ := dial(t, n1)
	if _, err := c1.CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "before", Config: &pb.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	publish := func(c pb.HermesClient, topic string, ids []record.MessageID) {
		t.Helper()
		err := retryUnavailable(t, 30*time.Second, func() error {
			_, err := c.Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: topic, Partition: &p0,
				Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, 64)})
			return err
		})
		if err != nil {
			t.Fatalf("publish to %s: %v", topic, err)
		}
	}
	before := newIDs(10)
	publish(c1, "before", before)

	nodes := []*testcluster.Node{n1}
	peers := "1=" + n1.RaftAddr
	for id := 2; id <= 3; id++ {
		raft := testcluster.FreeAddr(t)
		n := testcluster.StartNode(t, "--node-id", fmt.Sprint(id), "--raft-addr", raft,
			"--peers", fmt.Sprintf("%s,%d=%s", peers, id, raft), "--join", "--log-level", "info")
		hermesCLI(t, "cluster", "join", "--addr", n1.GRPCAddr, "--node-id", fmt.Sprint(id), "--raft-addr", raft)
		peers += fmt.Sprintf(",%d=%s", id, raft)
		nodes = append(nodes, n)
	}
	waitFor(t, 20*time.Second, "three nodes registered", func() bool {
		resp, err := c1.DescribeCluster(ctxT(t, 2*time.Second), &pb.DescribeClusterRequest{})
		return err == nil && len(resp.Nodes) == 3
	})
	err := retryUnavailable(t, 20*time.Second, func() error {
		_, err := c1.CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "after", Config: &pb.TopicConfig{Partitions: 1, ReplicationFactor: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	after := newIDs(10)
	publish(c1, "after", after)

	for _, n := range nodes {
		n.Stop()
	}
	n1.Launch() // its flags still name no peer
	time.Sleep(2 * time.Second)
	if code := n1.ExitCode(); code != -1 {
		t.Fatalf("the first node exited (%d) while the others were down:\n%s", code, n1.Log(40))
	}
	if n1.Ready() {
		t.Fatal("the first node is ready alone: it acts as a cluster of one")
	}
	if !strings.Contains(n1.Log(100), "a member of their cluster") {
		t.Fatalf("the first node does not say it is a member of the grown cluster:\n%s", n1.Log(40))
	}
	testcluster.StartAll(nodes[1:]...)
	n1.WaitReady()
	c1, _ = dial(t, n1)
	for topic, ids := range map[string][]record.MessageID{"before": before, "after": after} {
		var got []record.Record
		waitFor(t, 20*time.Second, "the first node reads "+topic, func() bool {
			resp, err := c1.Fetch(ctxT(t, 5*time.Second), &pb.FetchRequest{Topic: topic, Partition: 0, Offset: 0, Packed: true, MaxBytes: 1 << 20})
			if err != nil {
				return false
			}
			got = nil
			for _, b := range resp.Batches {
				recs, err := record.DecodeRecords(nil, b.Data)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, recs...)
			}
			return len(got) == len(ids)
		})
		for i, r := range got {
			if r.MessageID != ids[i] {
				t.Fatalf("%s record %d is %x, want %x", topic, i, r.MessageID[:4], ids[i][:4])
			}
		}
	}
	publish(c1, "after", newIDs(5))
}
