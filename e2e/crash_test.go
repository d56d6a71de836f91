package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// ackedRecord is where the broker said a record went.
type ackedRecord struct {
	partition int32
	offset    int64
}

// publisher streams packed batches over one PublishStream and records, per
// message id, the acknowledged position.
type publisher struct {
	mu    sync.Mutex
	sent  map[uint64][]record.MessageID // request id → ids, until answered
	acked map[record.MessageID]ackedRecord
	count atomic.Int64
}

// run publishes `total` records in batches of `batch` round-robin over
// `partitions` until done or the stream breaks; it returns how many
// records it sent.
func (p *publisher) run(ctx context.Context, c pb.HermesClient, topic string, partitions int32, total, batch int) int {
	stream, err := c.PublishStream(ctx)
	if err != nil {
		return 0
	}
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			p.mu.Lock()
			ids := p.sent[resp.RequestId]
			delete(p.sent, resp.RequestId)
			if resp.Error == nil {
				for i, id := range ids {
					p.acked[id] = ackedRecord{resp.Partition, resp.BaseOffset + int64(i)}
				}
				p.count.Add(int64(len(ids)))
			}
			p.mu.Unlock()
		}
	}()
	sent := 0
	for req := uint64(1); sent < total; req++ {
		ids := newIDs(min(batch, total-sent))
		part := int32(req % uint64(partitions))
		p.mu.Lock()
		p.sent[req] = ids
		p.mu.Unlock()
		err := stream.Send(&pb.PublishRequest{
			RequestId: req, Topic: topic, Partition: &part,
			Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(ids, 100),
		})
		if err != nil {
			break
		}
		sent += len(ids)
	}
	stream.CloseSend()
	<-recvDone
	return sent
}

// TestKill9DuringPublishLosesNoAckedRecord publishes 100,000 records in
// consistent mode over PublishStream, kills the broker with SIGKILL while
// publishing, restarts it, publishes the rest, and checks that every
// acknowledged message id is in the log exactly once, at the offset it was
// acknowledged with, with dense offsets per partition.
func TestKill9DuringPublishLosesNoAckedRecord(t *testing.T) {
	const (
		total      = 100_000
		batch      = 100
		partitions = 3
	)
	node := testcluster.StartNode(t)
	c, _ := dial(t, node)
	createTopic(t, c, "crash", partitions)

	pub := &publisher{sent: make(map[uint64][]record.MessageID), acked: make(map[record.MessageID]ackedRecord)}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		deadline := time.Now().Add(60 * time.Second)
		for pub.count.Load() < total/3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		node.Kill()
	}()
	sent := pub.run(ctxT(t, 2*time.Minute), c, "crash", partitions, total, batch)
	<-killed
	ackedBefore := pub.count.Load()
	t.Logf("before kill -9: sent %d, acknowledged %d", sent, ackedBefore)
	if ackedBefore == 0 || sent >= total {
		t.Fatalf("the kill did not land mid-stream (sent %d, acked %d)", sent, ackedBefore)
	}

	node.Start()
	c, _ = dial(t, node)
	pub.run(ctxT(t, 2*time.Minute), c, "crash", partitions, total-sent, batch)
	t.Logf("after restart: acknowledged %d in all", pub.count.Load())

	seen := make(map[record.MessageID]ackedRecord)
	stored := 0
	for p := int32(0); p < partitions; p++ {
		recs := readAll(t, c, "crash", p)
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d (offsets must be dense)", p, i, r.Offset)
			}
			if prev, dup := seen[r.MessageID]; dup {
				t.Fatalf("message %x stored twice: %v and %d/%d", r.MessageID, prev, p, r.Offset)
			}
			seen[r.MessageID] = ackedRecord{p, r.Offset}
		}
		stored += len(recs)
	}
	lost := 0
	for id, want := range pub.acked {
		got, ok := seen[id]
		if !ok {
			lost++
			continue
		}
		if got != want {
			t.Errorf("message %x acknowledged at %v but stored at %v", id, want, got)
		}
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged records lost (of %d acknowledged)", lost, len(pub.acked))
	}
	t.Logf("stored %d records; all %d acknowledged ones present exactly once", stored, len(pub.acked))
}
