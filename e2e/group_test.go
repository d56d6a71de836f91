package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// delivery is one record as a consumer saw it.
type delivery struct {
	consumer  string
	partition int32
	offset    int64
	id        record.MessageID
}

// consumer is a group member on its own connection, committing every
// commitEvery records per partition.
type consumer struct {
	name   string
	conn   *grpc.ClientConn
	stream pb.Hermes_SubscribeClient
	cancel context.CancelFunc

	mu        sync.Mutex
	assigned  []int32
	confirmed map[int32]int64 // partition → last commit the broker confirmed
	got       int
	// stopCommitsAt: after this many records the consumer commits no more
	// (0: never stops; negative: never commits), so it dies holding
	// uncommitted records.
	stopCommitsAt int
	sendMu        sync.Mutex
}

// send serializes sends on the stream (gRPC allows one sender at a time).
func (cs *consumer) send(req *pb.SubscribeRequest) error {
	cs.sendMu.Lock()
	defer cs.sendMu.Unlock()
	return cs.stream.Send(req)
}

func startConsumer(t *testing.T, node *testcluster.Node, name, topic, group string, log chan<- delivery, stopCommitsAt int) *consumer {
	t.Helper()
	c, conn := dial(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: &pb.SubscribeOptions{
		Topic: topic, Group: group, ClientId: name, CreditRecords: 200, Packed: true,
		Start: &pb.StartPosition{Position: &pb.StartPosition_Earliest{Earliest: true}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cs := &consumer{name: name, conn: conn, stream: stream, cancel: cancel, confirmed: map[int32]int64{}, stopCommitsAt: stopCommitsAt}
	go cs.loop(topic, log)
	return cs
}

func (cs *consumer) loop(topic string, log chan<- delivery) {
	sinceCommit := map[int32]int{}
	for {
		resp, err := cs.stream.Recv()
		if err != nil {
			return
		}
		switch k := resp.Kind.(type) {
		case *pb.SubscribeResponse_Assignment:
			cs.mu.Lock()
			cs.assigned = k.Assignment.Partitions
			cs.mu.Unlock()
		case *pb.SubscribeResponse_Commit:
			if k.Commit.Error == nil {
				cs.mu.Lock()
				for _, o := range k.Commit.Offsets {
					cs.confirmed[o.Partition] = o.Offset
				}
				cs.mu.Unlock()
			}
		case *pb.SubscribeResponse_Deliveries:
			n := 0
			var last map[int32]int64 = map[int32]int64{}
			for _, b := range k.Deliveries.Batches {
				recs, err := record.DecodeRecords(nil, b.Data)
				if err != nil {
					panic(err)
				}
				for _, r := range recs {
					log <- delivery{cs.name, b.Partition, r.Offset, r.MessageID}
					last[b.Partition] = r.Offset
					sinceCommit[b.Partition]++
					n++
				}
			}
			cs.mu.Lock()
			cs.got += n
			committing := cs.stopCommitsAt == 0 || cs.got < cs.stopCommitsAt && cs.stopCommitsAt > 0
			cs.mu.Unlock()
			for p, off := range last {
				if committing && sinceCommit[p] >= 20 {
					sinceCommit[p] = 0
					cs.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Commit{Commit: &pb.CommitRequest{
						Offsets: []*pb.PartitionOffset{{Topic: topic, Partition: p, Offset: off + 1}},
					}}})
				}
			}
			cs.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Credit{Credit: &pb.Credit{Records: int32(n)}}})
		}
	}
}

func (cs *consumer) partitions() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.assigned)
}

func (cs *consumer) received() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.got
}

// TestGroupMemberDeathRedeliversOnlyUncommitted runs a group of three
// consumers on a 6-partition topic while records are published, kills one
// consumer's connection mid-stream without a goodbye, and checks that the
// group received every record at least once and that the only duplicates
// are records the dead member received but had not committed.
func TestGroupMemberDeathRedeliversOnlyUncommitted(t *testing.T) {
	const perPartition = 1000
	node := testcluster.StartNode(t)
	c, _ := dial(t, node)
	createTopic(t, c, "g6", 6)

	log := make(chan delivery, 100000)
	cons := []*consumer{
		startConsumer(t, node, "a", "g6", "workers", log, 0),
		startConsumer(t, node, "b", "g6", "workers", log, 0),
		startConsumer(t, node, "victim", "g6", "workers", log, 0),
	}
	waitFor(t, 10*time.Second, "each member owns 2 partitions", func() bool {
		return cons[0].partitions() == 2 && cons[1].partitions() == 2 && cons[2].partitions() == 2
	})

	published := make(map[record.MessageID]bool)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; i < perPartition/50; i++ {
			for p := int32(0); p < 6; p++ {
				ids := newIDs(50)
				part := p
				_, err := c.Publish(ctxT(t, 10*time.Second), &pb.PublishRequest{Topic: "g6", Partition: &part, Batch: packed(ids, 64)})
				if err != nil {
					panic(fmt.Sprintf("publish: %v", err))
				}
				for _, id := range ids {
					published[id] = true
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	victim := cons[2]
	victim.mu.Lock()
	victim.stopCommitsAt = 200
	victim.mu.Unlock()
	waitFor(t, 30*time.Second, "the victim consumes", func() bool { return victim.received() >= 300 })
	time.Sleep(50 * time.Millisecond) // let the last commit confirmations arrive
	victim.mu.Lock()
	confirmed := make(map[int32]int64)
	for p, off := range victim.confirmed {
		confirmed[p] = off
	}
	victim.mu.Unlock()
	victim.conn.Close() // dies: no commit, no leave
	<-pubDone

	byID := make(map[record.MessageID][]delivery)
	deadline := time.After(60 * time.Second)
	for covered := 0; covered < len(published); {
		select {
		case d := <-log:
			if len(byID[d.id]) == 0 && published[d.id] {
				covered++
			}
			byID[d.id] = append(byID[d.id], d)
		case <-deadline:
			t.Fatalf("only %d of %d records reached the group", covered, len(published))
		}
	}
	time.Sleep(200 * time.Millisecond) // late duplicates, if any, land now
	for len(log) > 0 {
		d := <-log
		byID[d.id] = append(byID[d.id], d)
	}

	dups := 0
	for id, ds := range byID {
		if !published[id] {
			t.Fatalf("received a record never published: %x", id)
		}
		if len(ds) == 1 {
			continue
		}
		dups += len(ds) - 1
		first := ds[0]
		if first.consumer != "victim" || len(ds) != 2 || ds[1].consumer == "victim" {
			t.Fatalf("record %d/%d delivered as %v: only the dead member's records may come twice", first.partition, first.offset, ds)
		}
		if c, ok := confirmed[first.partition]; ok && first.offset < c {
			t.Fatalf("record %d/%d was committed by the victim (at %d) but delivered again", first.partition, first.offset, c)
		}
	}
	if dups == 0 {
		t.Fatalf("the dead member's uncommitted records were not delivered again")
	}
	t.Logf("group received all %d records; %d duplicates, all uncommitted records of the dead member", len(published), dups)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
