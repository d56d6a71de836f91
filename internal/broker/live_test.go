package broker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// sinkRec is what a testSink kept of one record.
type sinkRec struct {
	origin  any
	offset  int64
	payload string
}

// testSink records what it is handed; its buffer is preallocated so that
// a publish through it allocates nothing of the test's.
type testSink struct {
	mu     sync.Mutex
	got    []sinkRec
	missed int64
	buf    []byte
	calls  chan struct{}
}

func newTestSink() *testSink {
	return &testSink{got: make([]sinkRec, 0, 1<<16), buf: make([]byte, 0, 1<<20), calls: make(chan struct{}, 1<<16)}
}

func (k *testSink) Live(origin any, partition int32, first, missed int64, recs []record.Record) {
	k.mu.Lock()
	k.missed += missed
	for i := range recs {
		if len(k.got) < cap(k.got) {
			k.got = append(k.got, sinkRec{origin: origin, offset: first + int64(i)})
		}
		k.buf = append(k.buf[:0], recs[i].Payload...) // copies as a wire sink does
	}
	k.mu.Unlock()
	select {
	case k.calls <- struct{}{}:
	default:
	}
}

func (k *testSink) snapshot() []sinkRec {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]sinkRec(nil), k.got...)
}

// TestLiveSinkOnPublisherGoroutine: PublishLive hands records to a live
// subscription synchronously, with the publisher's origin, within its
// credit; what credit did not allow is delivered through Next's catch-up
// (origin nil) once granted, in ring order, and nothing twice.
func TestLiveSinkOnPublisherGoroutine(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "fast", TopicConfig{Partitions: 1}, false); err != nil {
		t.Fatal(err)
	}
	sink := newTestSink()
	sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "fast", IncludePerformance: true, Live: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sub.Grant(3, 0)
	origin := "publisher-1"
	for i := range 5 {
		pid, off, err := b.PublishLive(ctx, "fast", 0, []record.Record{{Payload: []byte{byte(i)}}}, origin)
		if err != nil || pid != 0 || off != int64(i) {
			t.Fatalf("PublishLive %d = %d, %d, %v", i, pid, off, err)
		}
	}
	got := sink.snapshot()
	if len(got) != 3 {
		t.Fatalf("with credit 3 the sink got %d records synchronously: %+v", len(got), got)
	}
	for i, r := range got {
		if r.origin != origin || r.offset != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	// Granting more lets Next catch up from the ring, through the sink.
	sub.Grant(10, 0)
	nctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	go sub.Next(nctx) // delivers nothing itself: the ring records go to the sink
	deadline := time.Now().Add(5 * time.Second)
	for len(sink.snapshot()) < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got = sink.snapshot()
	if len(got) != 5 || got[3].offset != 3 || got[4].offset != 4 || got[3].origin != nil {
		t.Fatalf("after the grant: %+v", got)
	}
	// Caught up again: the next publish is handed over synchronously.
	if _, _, err := b.PublishLive(ctx, "fast", AnyPartition, []record.Record{{Payload: []byte("x")}}, origin); err != nil {
		t.Fatal(err)
	}
	if got = sink.snapshot(); len(got) != 6 || got[5].offset != 5 || got[5].origin != origin {
		t.Fatalf("caught up: %+v", got)
	}
	// A plain Publish in performance mode reaches the sink too.
	mustPublish(t, b, &PublishRequest{Topic: "fast", Partition: 0, Mode: ModePerformance, Records: recs("p", 2)})
	if got = sink.snapshot(); len(got) != 8 || got[7].offset != 7 {
		t.Fatalf("after Publish: %+v", got)
	}
}

// TestLiveSinkCountsMissed: a live subscriber without credit while the
// ring evicts loses those records and is told how many.
func TestLiveSinkCountsMissed(t *testing.T) {
	b := openTest(t, t.TempDir(), func(c *Config) { c.RingRecords = 4 })
	ctx := context.Background()
	b.CreateTopic(ctx, "small", TopicConfig{Partitions: 1}, false)
	sink := newTestSink()
	sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "small", IncludePerformance: true, Live: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i := range 10 {
		if _, _, err := b.PublishLive(ctx, "small", 0, []record.Record{{Payload: []byte{byte(i)}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sub.Grant(100, 0)
	nctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	go sub.Next(nctx)
	deadline := time.Now().Add(5 * time.Second)
	for len(sink.snapshot()) < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := sink.snapshot()
	sink.mu.Lock()
	missed := sink.missed
	sink.mu.Unlock()
	if len(got) != 4 || got[0].offset != 6 || missed != 6 {
		t.Fatalf("got %+v, missed %d; want offsets 6..9 and 6 missed", got, missed)
	}
}

// TestLiveSinkNeedsPerformance: a live sink without IncludePerformance is
// a mistake, refused.
func TestLiveSinkNeedsPerformance(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	b.CreateTopic(context.Background(), "t", TopicConfig{}, false)
	if _, err := b.Subscribe(context.Background(), SubscribeOptions{Topic: "t", Live: newTestSink()}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v", err)
	}
}

// TestPublishLiveAllocatesNothing: publishing one performance record to a
// partition with a live subscriber costs no allocation (the ring copies
// into its chunks, the sink is called directly).
func TestPublishLiveAllocatesNothing(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	b.CreateTopic(ctx, "fast", TopicConfig{Partitions: 1}, false)
	sink := newTestSink()
	sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "fast", IncludePerformance: true, Live: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sub.Grant(1<<30, 0)
	rec := []record.Record{{Payload: make([]byte, 96)}} // the broker gives it an id and a timestamp
	b.PublishLive(ctx, "fast", 0, rec, nil)
	avg := testing.AllocsPerRun(5000, func() {
		rec[0].MessageID, rec[0].Timestamp = record.MessageID{}, 0
		if _, _, err := b.PublishLive(ctx, "fast", 0, rec, sink); err != nil {
			t.Fatal(err)
		}
	})
	if avg != 0 {
		t.Fatalf("PublishLive allocates %.2f times per record", avg)
	}
	if n := len(sink.snapshot()); n != 5002 {
		t.Fatalf("sink got %d records", n)
	}
}

// TestByteCreditAfterRecordsOnly: bytes delivered while a subscriber gave
// record credit only do not count against the byte credit it grants
// later.
func TestByteCreditAfterRecordsOnly(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	b.CreateTopic(ctx, "c", TopicConfig{Partitions: 1}, false)
	sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "c", Start: StartPosition{Kind: StartEarliest}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mustPublish(t, b, &PublishRequest{Topic: "c", Partition: 0, Records: recs("big", 1)})
	sub.Grant(1, 0)
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if d, err := sub.Next(nctx); err != nil || d.Count() != 1 {
		t.Fatalf("first: %+v, %v", d, err)
	}
	mustPublish(t, b, &PublishRequest{Topic: "c", Partition: 0, Records: recs("next", 1)})
	sub.Grant(1, 1) // one byte: enough for one delivery
	if d, err := sub.Next(nctx); err != nil || d.Count() != 1 {
		t.Fatalf("after a byte grant: %+v, %v", d, err)
	}
}
