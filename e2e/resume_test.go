package e2e

import (
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestGroupResumesFromCommittedOffsetsAfterRestart commits through a
// member's stream, kills the broker with SIGKILL, restarts it, and checks
// that a new member of the group starts exactly at the committed offsets.
func TestGroupResumesFromCommittedOffsetsAfterRestart(t *testing.T) {
	node := testcluster.StartNode(t)
	c, _ := dial(t, node)
	createTopic(t, c, "resume", 2)
	for p := int32(0); p < 2; p++ {
		part := p
		if _, err := c.Publish(ctxT(t, 10*time.Second), &pb.PublishRequest{Topic: "resume", Partition: &part, Batch: packed(newIDs(100), 16)}); err != nil {
			t.Fatal(err)
		}
	}

	log := make(chan delivery, 1000)
	first := startConsumer(t, node, "first", "resume", "readers", log, -1)
	waitFor(t, 10*time.Second, "all records delivered", func() bool { return first.received() == 200 })
	committed := map[int32]int64{0: 37, 1: 61}
	err := first.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Commit{Commit: &pb.CommitRequest{Offsets: []*pb.PartitionOffset{
		{Topic: "resume", Partition: 0, Offset: committed[0]}, {Topic: "resume", Partition: 1, Offset: committed[1]},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "commit confirmed", func() bool {
		first.mu.Lock()
		defer first.mu.Unlock()
		return first.confirmed[0] == committed[0] && first.confirmed[1] == committed[1]
	})
	first.cancel()

	node.Kill()
	node.Start()
	c, _ = dial(t, node)
	desc, err := c.DescribeGroup(ctxT(t, 10*time.Second), &pb.DescribeGroupRequest{Group: "readers"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Partitions {
		if p.CommittedOffset != committed[p.Partition] || p.Lag != 100-committed[p.Partition] {
			t.Fatalf("after restart partition %d: committed %d lag %d, want %d", p.Partition, p.CommittedOffset, p.Lag, committed[p.Partition])
		}
	}

	for len(log) > 0 {
		<-log
	}
	startConsumer(t, node, "second", "resume", "readers", log, 0)
	firstSeen := map[int32]int64{}
	deadline := time.After(10 * time.Second)
	for len(firstSeen) < 2 {
		select {
		case d := <-log:
			if _, ok := firstSeen[d.partition]; !ok {
				firstSeen[d.partition] = d.offset
			}
		case <-deadline:
			t.Fatalf("second member got nothing on some partition: %v", firstSeen)
		}
	}
	t.Logf("committed before the kill: %v; the new member started at %v", committed, firstSeen)
	for p, off := range firstSeen {
		if off != committed[p] {
			t.Errorf("partition %d resumed at %d, want committed offset %d", p, off, committed[p])
		}
	}
}
