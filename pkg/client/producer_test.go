package client

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc/codes"
	"testing"
	"time"

	"google.golang.org/grpc"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, c *Client, name string, parts int32) {
	t.Helper()
	if _, err := c.CreateTopic(testCtx(t), name, WithPartitionCount(parts)); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// checkAcks waits for every future and checks that acks are unique, dense
// per partition from 0, and that the fake's log holds each record's id at
// its acked offset.
func checkAcks(t *testing.T, fb *fakeBroker, topic string, futs []*Future) {
	t.Helper()
	seen := map[[2]int64]bool{}
	for i, f := range futs {
		a, err := f.Wait(testCtx(t))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		key := [2]int64{int64(a.Partition), a.Offset}
		if seen[key] {
			t.Fatalf("record %d: ack %v given twice", i, a)
		}
		seen[key] = true
		fb.mu.Lock()
		got := fb.topics[topic][a.Partition][a.Offset].MessageID
		fb.mu.Unlock()
		if got != [16]byte(a.ID) || a.ID != f.ID() {
			t.Fatalf("record %d: log has id %x at %v, future says %x", i, got, a, a.ID)
		}
	}
	total := 0
	for _, n := range fb.logLen(topic) {
		total += n
	}
	if total != len(futs) || len(seen) != len(futs) {
		t.Fatalf("log holds %d records, %d acked, published %d", total, len(seen), len(futs))
	}
}

func TestProducerPublishes(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "orders", 3)
	p, err := c.NewProducer(testCtx(t), "orders", WithMaxBatchRecords(50))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	for i := range 1000 {
		m := &Message{Payload: []byte(fmt.Sprint(i)), Headers: []Header{{Key: "n", Value: []byte("v")}}}
		if i%2 == 0 {
			m.Key = []byte(fmt.Sprint("key-", i%7))
		}
		futs = append(futs, p.Publish(testCtx(t), m))
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "orders", futs)
	if f := p.Publish(testCtx(t), &Message{}); !errors.Is(waitErr(t, f), ErrClosed) {
		t.Errorf("publish after close: %v", waitErr(t, f))
	}
}

// TestProducerMaxInFlightPerPartition: with a bound of one, a partition
// never has more than one batch unanswered at the broker, and every
// record lands once, in order; without the bound, batches pile up
// unanswered (so the first check can fail). Close, which sends what is
// left at once, comes after every answer.
func TestProducerMaxInFlightPerPartition(t *testing.T) {
	for _, bound := range []int{1, 0} {
		fb, c := startFake(t)
		fb.answerDelay = 5 * time.Millisecond
		mustCreate(t, c, "bounded", 1)
		p, err := c.NewProducer(testCtx(t), "bounded", WithMaxInFlightPerPartition(bound))
		if err != nil {
			t.Fatal(err)
		}
		var futs []*Future
		for i := range 300 {
			futs = append(futs, p.Publish(testCtx(t), &Message{Payload: []byte(fmt.Sprint(i))}))
			if i%10 == 9 {
				time.Sleep(time.Millisecond) // let batches go out between records
			}
		}
		checkAcks(t, fb, "bounded", futs)
		for i, f := range futs {
			if a, _ := f.Wait(testCtx(t)); a.Offset != int64(i) {
				t.Fatalf("bound %d: record %d at offset %d", bound, i, a.Offset)
			}
		}
		if err := p.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		fb.mu.Lock()
		peak := fb.maxInFlight
		fb.mu.Unlock()
		switch {
		case bound == 1 && peak != 1:
			t.Errorf("bound 1: %d batches of the partition were unanswered at once", peak)
		case bound == 0 && peak < 2:
			t.Errorf("no bound: never more than %d batch unanswered; the bounded run shows nothing", peak)
		}
	}
}

// TestProducerPublishBatch: records given as slices land once each, at
// the offsets their Futures say, in order within a key's partition; a
// record too large fails alone; a slice larger than the buffer bound
// goes through (the sender is woken to free space), and after Close
// every record of a slice fails with ErrClosed.
func TestProducerPublishBatch(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "orders", 3)
	p, err := c.NewProducer(testCtx(t), "orders", WithMaxBatchRecords(50), WithMaxBufferedBytes(3_000))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	var tooLarge *Future
	for s := range 10 {
		msgs := make([]*Message, 100)
		for i := range msgs {
			msgs[i] = &Message{Key: []byte(fmt.Sprint("key-", i%7)), Payload: []byte(fmt.Sprint(s*100 + i))}
		}
		if s == 4 {
			msgs = append(msgs, &Message{Payload: make([]byte, 30_000)}) // over the buffer bound
		}
		got := p.PublishBatch(testCtx(t), msgs)
		if len(got) != len(msgs) {
			t.Fatalf("%d futures for %d messages", len(got), len(msgs))
		}
		if s == 4 {
			tooLarge, got = got[100], got[:100]
		}
		futs = append(futs, got...)
	}
	if err := waitErr(t, tooLarge); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("the record too large: %v", err)
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "orders", futs)
	last := map[string]Ack{} // by key: offsets grow in publish order
	for i, f := range futs {
		a, _ := f.Wait(testCtx(t))
		k := fmt.Sprint("key-", (i%100)%7)
		if prev, ok := last[k]; ok && (a.Partition != prev.Partition || a.Offset <= prev.Offset) {
			t.Fatalf("record %d of %s at %v after %v", i, k, a, prev)
		}
		last[k] = a
	}
	for _, f := range p.PublishBatch(testCtx(t), []*Message{{}, {}}) {
		if err := waitErr(t, f); !errors.Is(err, ErrClosed) {
			t.Errorf("publish after close: %v", err)
		}
	}
}

func waitErr(t *testing.T, f *Future) error {
	_, err := f.Wait(testCtx(t))
	return err
}

// TestProducerRetriesExhausted: RESOURCE_EXHAUSTED answers are retried
// and the records land once.
func TestProducerRetriesExhausted(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	fb.exhaust = 3
	p, err := c.NewProducer(testCtx(t), "t", WithMaxInFlight(1), WithMaxBatchRecords(4))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	for range 20 {
		futs = append(futs, p.Publish(testCtx(t), &Message{Payload: []byte("x")}))
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "t", futs)
	if fb.exhaust != 0 {
		t.Errorf("exhaust left %d", fb.exhaust)
	}
}

// TestProducerLostReplyResendsSameIDs: the broker applies a batch and the
// stream breaks before its answer; the producer reconnects and resends
// the same ids, which this fake drops as duplicates (as the real broker
// does within its duplicate window).
func TestProducerLostReplyResendsSameIDs(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 2)
	fb.loseReply = 2
	p, err := c.NewProducer(testCtx(t), "t", WithMaxBatchRecords(10), WithMaxInFlight(1))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	for i := range 100 {
		futs = append(futs, p.Publish(testCtx(t), &Message{Payload: []byte(fmt.Sprint(i))}))
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "t", futs)
	if fb.dups == 0 || fb.streamsOpen < 2 {
		t.Errorf("dups %d, streams %d: the lost reply was not retried on a new stream", fb.dups, fb.streamsOpen)
	}
}

// TestProducerStreamCancelledIsRetried: a publish stream that ends
// Cancelled while the producer is not closing (its sender cancels it when
// a Send fails, racing the receiver's Recv) is a broken stream: what was
// in flight is sent again, not failed with context.Canceled.
func TestProducerStreamCancelledIsRetried(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	fb.mu.Lock()
	fb.breakAfter, fb.breakCode = 3, codes.Canceled
	fb.mu.Unlock()
	p, err := c.NewProducer(testCtx(t), "t", WithMaxBatchRecords(5), WithMaxInFlight(4))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	for i := range 60 {
		futs = append(futs, p.Publish(testCtx(t), &Message{Payload: []byte(fmt.Sprint(i))}))
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "t", futs)
	if fb.streamsOpen < 2 {
		t.Errorf("%d streams: the cancelled stream was not replaced", fb.streamsOpen)
	}
}

// TestProducerLostReplyStoresTwice: as a broker with duplicate detection
// off (or past its window), the fake keeps duplicates; the batch resent
// after a lost answer is stored twice,
// and both copies carry the same message ids, by which a consumer can
// recognise them (the documented contract of retries).
func TestProducerLostReplyStoresTwice(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	fb.keepDups, fb.loseReply = true, 2
	p, err := c.NewProducer(testCtx(t), "t", WithMaxBatchRecords(10), WithMaxInFlight(1), WithLinger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future // three full batches of 10
	for i := range 30 {
		futs = append(futs, p.Publish(testCtx(t), &Message{Payload: []byte(fmt.Sprint(i))}))
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	copies := map[MessageID][]string{}
	fb.mu.Lock()
	for _, r := range fb.topics["t"][0] {
		copies[MessageID(r.MessageID)] = append(copies[MessageID(r.MessageID)], string(r.Payload))
	}
	stored := len(fb.topics["t"][0])
	fb.mu.Unlock()
	twice := 0
	for i, f := range futs {
		a, err := f.Wait(testCtx(t))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		cs := copies[a.ID]
		for _, pl := range cs {
			if pl != fmt.Sprint(i) {
				t.Fatalf("record %d: id %v also names payload %q", i, a.ID, pl)
			}
		}
		switch len(cs) {
		case 1:
		case 2:
			twice++
		default:
			t.Fatalf("record %d stored %d times", i, len(cs))
		}
	}
	if twice != 10 || stored != 40 {
		t.Errorf("%d records stored twice, %d stored in all; want the lost batch's 10, 40", twice, stored)
	}
}

// TestProducerAttemptsBounded: a batch that keeps failing fails after the
// client's max attempts with the broker's error.
func TestProducerAttemptsBounded(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	fb.exhaust = 1000
	p, err := c.NewProducer(testCtx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	f := p.Publish(testCtx(t), &Message{Payload: []byte("x")})
	if err := waitErr(t, f); !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("err = %v, want ErrResourceExhausted", err)
	}
	if used := 1000 - fb.exhaust; used != 5 {
		t.Errorf("attempts = %d, want 5 (WithRetry(5, ...))", used)
	}
	p.Close(testCtx(t))
}

// TestProducerBufferBound: with the broker silent, Publish blocks once
// max buffered bytes are taken and gives up when its ctx ends; Close
// fails what is left with ErrClosed.
func TestProducerBufferBound(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	fb.stall = true
	p, err := c.NewProducer(testCtx(t), "t", WithMaxBufferedBytes(1000))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	for range 7 { // 7 * (100 + recordOverhead) = 980 bytes
		futs = append(futs, p.Publish(testCtx(t), &Message{Payload: make([]byte, 100)}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	f := p.Publish(ctx, &Message{Payload: make([]byte, 100)})
	if err := waitErr(t, f); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("8th publish: %v after %v, want to block then DeadlineExceeded", err, time.Since(start))
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer ccancel()
	if err := p.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close: %v", err)
	}
	for _, f := range futs {
		if err := waitErr(t, f); !errors.Is(err, ErrClosed) {
			t.Errorf("pending future after close: %v", err)
		}
	}
}

// TestProducerCloseBrokerNotReading: the broker stops reading the stream,
// so HTTP/2 flow control blocks the sender inside stream.Send; Close with
// a 300 ms ctx must still return soon, failing what is left with
// ErrClosed.
func TestProducerCloseBrokerNotReading(t *testing.T) {
	// A fixed 64 KiB window (no BDP growth) so that flow control blocks soon.
	fb, c := startFakeServer(t, []grpc.ServerOption{grpc.InitialWindowSize(64 << 10), grpc.InitialConnWindowSize(64 << 10)})
	mustCreate(t, c, "t", 1)
	fb.noRead = true
	p, err := c.NewProducer(testCtx(t), "t", WithMaxBatchBytes(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	var futs []*Future
	for range 64 { // 1 MiB, far beyond the windows and gRPC's write buffers
		futs = append(futs, p.Publish(testCtx(t), &Message{Payload: make([]byte, 16<<10)}))
	}
	waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return fb.streamsOpen > 0 })
	time.Sleep(100 * time.Millisecond) // let the sender fill the windows and block
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }()
	select {
	case err := <-closed:
		if err == nil {
			t.Errorf("Close returned nil with records unacknowledged")
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %v", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not return within 3s")
	}
	for i, f := range futs {
		if err := waitErr(t, f); !errors.Is(err, ErrClosed) {
			t.Fatalf("record %d after Close: %v, want ErrClosed", i, err)
		}
	}
}

func TestProducerRejects(t *testing.T) {
	_, c := startFake(t)
	if _, err := c.NewProducer(testCtx(t), "missing"); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("missing topic: %v", err)
	}
	mustCreate(t, c, "t", 2)
	if _, err := c.NewProducer(testCtx(t), "t", WithPartition(2)); !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("partition 2 of 2: %v", err)
	}
	p, err := c.NewProducer(testCtx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(testCtx(t))
	f := p.Publish(testCtx(t), &Message{Payload: make([]byte, 1<<20+1)})
	if err := waitErr(t, f); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

func TestSyncPublishAndAdmin(t *testing.T) {
	fb, c := startFake(t)
	ctx := testCtx(t)
	mustCreate(t, c, "t", 2)
	if _, err := c.CreateTopic(ctx, "t"); !errors.Is(err, ErrTopicExists) {
		t.Errorf("create twice: %v", err)
	}
	if _, err := c.CreateTopic(ctx, "t", IfNotExists()); err != nil {
		t.Errorf("create if not exists: %v", err)
	}
	msgs := []*Message{{Payload: []byte("a")}, {Key: []byte("k"), Payload: []byte("b")}, {Payload: []byte("c")}}
	acks, err := c.Publish(ctx, "t", msgs, WithMode(ModeEventual))
	if err != nil || len(acks) != 3 {
		t.Fatalf("publish: %v %v", acks, err)
	}
	for i, a := range acks {
		if msgs[i].ID.IsZero() || a.ID != msgs[i].ID {
			t.Errorf("msg %d: id %v, ack id %v", i, msgs[i].ID, a.ID)
		}
		fb.mu.Lock()
		got := fb.topics["t"][a.Partition][a.Offset]
		fb.mu.Unlock()
		if string(got.Payload) != string(msgs[i].Payload) {
			t.Errorf("ack %v holds %q, want %q", a, got.Payload, msgs[i].Payload)
		}
	}
	info, err := c.DescribeTopic(ctx, "t")
	if err != nil || len(info.Partitions) != 2 || info.Partitions[0].EndOffset+info.Partitions[1].EndOffset != 3 {
		t.Errorf("describe: %+v %v", info, err)
	}
	if _, err := c.Publish(ctx, "nope", msgs); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("publish to missing topic: %v", err)
	}
}
