package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/pkg/record"
)

func openTest(t *testing.T, dir string, mod func(*Config)) *Broker {
	t.Helper()
	cfg := Config{DataDir: dir, GroupTick: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func recs(prefix string, n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i].Payload = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func mustPublish(t *testing.T, b *Broker, req *PublishRequest) *PublishResult {
	t.Helper()
	res, err := b.Publish(context.Background(), req)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return res
}

func fetchAll(t *testing.T, b *Broker, topic string, p int32) []record.Record {
	t.Helper()
	var out []record.Record
	off := int64(0)
	for {
		res, err := b.Fetch(context.Background(), FetchRequest{Topic: topic, Partition: p, Offset: off})
		if err != nil {
			t.Fatalf("fetch %s/%d@%d: %v", topic, p, off, err)
		}
		var next int64
		out, next, err = DecodeFrom(out, res.Batches, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		if next == off {
			return out
		}
		off = next
	}
}

func TestPublishFetchRoundTrip(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	if _, err := b.CreateTopic(context.Background(), "orders", TopicConfig{Partitions: 3}, false); err != nil {
		t.Fatal(err)
	}
	// Keyed records go to murmur2(key) % 3; keyless ones to one partition per request.
	in := recs("k", 30)
	for i := range in {
		in[i].Key = []byte(fmt.Sprintf("key-%d", i%5))
		in[i].Headers = []record.Header{{Key: "h", Value: []byte("v")}}
	}
	res := mustPublish(t, b, &PublishRequest{Topic: "orders", Partition: AnyPartition, Records: in})
	if len(res.Acks) != 30 || res.Mode != ModeConsistent {
		t.Fatalf("acks = %d, mode %v", len(res.Acks), res.Mode)
	}
	seen := 0
	stored := map[RecordAck]string{}
	for p := int32(0); p < 3; p++ {
		got := fetchAll(t, b, "orders", p)
		for i, r := range got {
			if r.Offset != int64(i) || r.MessageID.IsZero() || r.Timestamp == 0 {
				t.Fatalf("partition %d record %d: %+v", p, i, r)
			}
			stored[RecordAck{Partition: p, Offset: r.Offset}] = string(r.Payload)
		}
		seen += len(got)
	}
	if seen != 30 {
		t.Fatalf("fetched %d records, want 30", seen)
	}
	// Each record's acknowledgement names where it is.
	for i, a := range res.Acks {
		if stored[a] != string(in[i].Payload) {
			t.Fatalf("record %d acknowledged at %+v, which holds %q", i, a, stored[a])
		}
	}
	// Same key, same partition.
	for i := range in {
		if res.Acks[i].Partition != res.Acks[i%5].Partition {
			t.Fatalf("key-%d went to %d and %d", i%5, res.Acks[i%5].Partition, res.Acks[i].Partition)
		}
	}
	// A packed batch with ids and timestamps from the client is stored as is.
	batch := record.AppendBatch(nil, 0, []record.Record{{MessageID: record.MessageID{1}, Timestamp: 42, Payload: []byte("x")}})
	res = mustPublish(t, b, &PublishRequest{Topic: "orders", Partition: 1, Batch: batch})
	if res.Count != 1 || res.Partition != 1 {
		t.Fatalf("batch result %+v", res)
	}
	got := fetchAll(t, b, "orders", 1)
	last := got[len(got)-1]
	if last.MessageID != (record.MessageID{1}) || last.Timestamp != 42 || last.Offset != res.BaseOffset {
		t.Fatalf("stored batch record %+v", last)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	if _, err := b.CreateTopic(context.Background(), "t", TopicConfig{Partitions: 2, MaxMessageBytes: 100}, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"exists", func() error { _, err := b.CreateTopic(context.Background(), "t", TopicConfig{}, false); return err }(), ErrTopicExists},
		{"bad name", func() error { _, err := b.CreateTopic(context.Background(), "a/b", TopicConfig{}, false); return err }(), ErrInvalidTopicName},
		{"long name", func() error {
			_, err := b.CreateTopic(context.Background(), string(make([]byte, 250)), TopicConfig{}, false)
			return err
		}(), ErrInvalidTopicName},
		{"bad partitions", func() error {
			_, err := b.CreateTopic(context.Background(), "u", TopicConfig{Partitions: -1}, false)
			return err
		}(), ErrInvalidArgument},
		{"unknown topic", func() error {
			_, err := b.Publish(ctx, &PublishRequest{Topic: "nope", Partition: AnyPartition, Records: recs("x", 1)})
			return err
		}(), ErrTopicNotFound},
		{"too large", func() error {
			_, err := b.Publish(ctx, &PublishRequest{Topic: "t", Partition: AnyPartition, Records: []record.Record{{Payload: make([]byte, 101)}}})
			return err
		}(), ErrMessageTooLarge},
		{"bad partition", func() error {
			_, err := b.Publish(ctx, &PublishRequest{Topic: "t", Partition: 2, Records: recs("x", 1)})
			return err
		}(), ErrPartitionNotFound},
		{"corrupt batch", func() error {
			_, err := b.Publish(ctx, &PublishRequest{Topic: "t", Partition: 0, Batch: []byte("garbage garbage garbage garbage garbage garbage garbage garbage")})
			return err
		}(), ErrCorruptBatch},
		{"negative offset", func() error {
			_, err := b.Fetch(ctx, FetchRequest{Topic: "t", Offset: -1})
			return err
		}(), ErrInvalidArgument},
		{"offset past end", func() error {
			_, err := b.Fetch(ctx, FetchRequest{Topic: "t", Offset: 5})
			return err
		}(), ErrOffsetOutOfRange},
		{"unknown group", func() error { _, err := b.DescribeGroup(context.Background(), "g"); return err }(), ErrGroupNotFound},
		{"too many headers", func() error {
			r := record.Record{Payload: []byte("x"), Headers: make([]record.Header, record.MaxRecordHeaders+1)}
			_, err := b.Publish(ctx, &PublishRequest{Topic: "t", Partition: 0, Records: []record.Record{r}})
			return err
		}(), ErrInvalidArgument},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
		}
	}
	// The broker still serves after all of that.
	mustPublish(t, b, &PublishRequest{Topic: "t", Partition: 0, Records: recs("ok", 1)})
}

func TestPerformanceModeStaysInMemory(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, nil)
	b.CreateTopic(context.Background(), "live", TopicConfig{}, false)
	sub, err := b.Subscribe(context.Background(), SubscribeOptions{Topic: "live", IncludePerformance: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	res := mustPublish(t, b, &PublishRequest{Topic: "live", Partition: AnyPartition, Mode: ModePerformance, Records: recs("p", 5)})
	if res.Acks[4].Offset != 4 {
		t.Fatalf("ring offsets %+v", res.Acks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := pollN(ctx, sub, 100)
	if err != nil || len(d.Records) != 5 || d.Records[0].Mode != ModePerformance {
		t.Fatalf("poll = %+v, %v", d, err)
	}
	ti, _ := b.Topic(context.Background(), "live")
	if ti.Partitions[0].EndOffset != 0 || ti.Partitions[0].RingEnd != 5 {
		t.Fatalf("partition info %+v", ti.Partitions[0])
	}
}

// testCredit is the credit the tests gave each subscription and it has not
// spent: pollN tops it up to what a poll may take.
var testCredit = struct {
	sync.Mutex
	m map[Subscription]int
}{m: make(map[Subscription]int)}

// pollN returns the next delivery of s holding at most max records.
func pollN(ctx context.Context, s Subscription, max int) (*Delivery, error) {
	testCredit.Lock()
	if have := testCredit.m[s]; have < max {
		s.Grant(max-have, 0)
		testCredit.m[s] = max
	}
	testCredit.Unlock()
	d, err := s.Next(ctx)
	if err == nil && d.Assignment == nil {
		testCredit.Lock()
		testCredit.m[s] -= d.Count()
		testCredit.Unlock()
	}
	return d, err
}

func poll(t *testing.T, s Subscription, max int) *Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := pollN(ctx, s, max)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return d
}

func TestGroupRebalanceAndResume(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, nil)
	b.CreateTopic(context.Background(), "jobs", TopicConfig{Partitions: 4}, false)
	a, err := b.Subscribe(context.Background(), SubscribeOptions{Topic: "jobs", Group: "workers", Start: StartPosition{Kind: StartEarliest}})
	if err != nil {
		t.Fatal(err)
	}
	if d := poll(t, a, 10); d.Assignment == nil || len(d.Assignment.Partitions) != 4 {
		t.Fatalf("first member assignment %+v", d.Assignment)
	}
	c, _ := b.Subscribe(context.Background(), SubscribeOptions{Topic: "jobs", Group: "workers", Start: StartPosition{Kind: StartEarliest}})
	da, dc := poll(t, a, 10), poll(t, c, 10)
	if len(da.Assignment.Partitions) != 2 || len(dc.Assignment.Partitions) != 2 {
		t.Fatalf("after join: a=%v c=%v", da.Assignment, dc.Assignment)
	}
	for p := int32(0); p < 4; p++ {
		mustPublish(t, b, &PublishRequest{Topic: "jobs", Partition: p, Records: recs("j", 3)})
	}
	// c consumes one partition and commits; then leaves.
	d := poll(t, c, 100)
	if err := c.Commit([]Offset{{Topic: "jobs", Partition: d.Partition, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit([]Offset{{Topic: "jobs", Partition: d.Partition, Offset: 3}}); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("commit by non-owner: %v", err)
	}
	c.Close()
	if d := poll(t, a, 10); d.Assignment == nil || len(d.Assignment.Partitions) != 4 {
		t.Fatalf("after leave: %+v", d)
	}
	got := map[int32]int{}
	for i := 0; i < 3; i++ { // three partitions have records to deliver
		d := poll(t, a, 100)
		got[d.Partition] += len(d.Records)
	}
	// The committed partition resumes after its 3 records; the others from
	// the start (never committed).
	for p := int32(0); p < 4; p++ {
		want := 3
		if p == d.Partition {
			want = 0
		}
		if got[p] != want {
			t.Errorf("partition %d delivered %d, want %d (got %v)", p, got[p], want, got)
		}
	}
	a.Close()
	desc, err := b.DescribeGroup(context.Background(), "workers")
	if err != nil || len(desc.Partitions) != 4 {
		t.Fatalf("describe: %+v %v", desc, err)
	}
	b.Close()

	b2 := openTest(t, dir, nil)
	desc, err = b2.DescribeGroup(context.Background(), "workers")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Partitions {
		if p.Partition == d.Partition && (p.Committed != 3 || p.Lag != 0) {
			t.Errorf("after restart partition %d committed %d lag %d", p.Partition, p.Committed, p.Lag)
		}
	}
}

func TestPerMessageAckRedeliveryAndDeadLetter(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	b.CreateTopic(context.Background(), "tasks", TopicConfig{}, false)
	mustPublish(t, b, &PublishRequest{Topic: "tasks", Partition: 0, Records: recs("t", 3)})
	s, err := b.Subscribe(context.Background(), SubscribeOptions{
		Topic: "tasks", Group: "g", AckMode: AckPerMessage, Start: StartPosition{Kind: StartEarliest},
		AckWait: 30 * time.Millisecond, MaxDeliveries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	poll(t, s, 10) // assignment
	d := poll(t, s, 10)
	if len(d.Records) != 3 {
		t.Fatalf("first delivery %d records", len(d.Records))
	}
	if err := s.Ack(0, []int64{0, 2}); err != nil {
		t.Fatal(err)
	}
	// Offset 1 is not acked: redelivered after the ack wait, count 2.
	d = poll(t, s, 10)
	if len(d.Records) != 1 || d.Records[0].Offset != 1 || d.Records[0].DeliveryCount != 2 {
		t.Fatalf("redelivery %+v", d.Records)
	}
	// Not acked again: at max deliveries it goes to the DLQ and counts as done.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		pollN(ctx, s, 10)
		cancel()
		if ti, err := b.Topic(context.Background(), "tasks.dlq"); err == nil && ti.Partitions[0].EndOffset == 1 {
			break
		}
	}
	dlq := fetchAll(t, b, "tasks.dlq", 0)
	if len(dlq) != 1 || string(dlq[0].Payload) != "t-1" {
		t.Fatalf("dlq = %+v", dlq)
	}
	desc, _ := b.DescribeGroup(context.Background(), "g")
	if desc.Partitions[0].Committed != 3 {
		t.Fatalf("committed after DLQ = %d, want 3", desc.Partitions[0].Committed)
	}
}

func TestRestartKeepsAcknowledgedRecords(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, nil)
	b.CreateTopic(context.Background(), "d", TopicConfig{Partitions: 2}, false)
	for i := 0; i < 50; i++ {
		mustPublish(t, b, &PublishRequest{Topic: "d", Partition: int32(i % 2), Mode: ModeEventual, Records: recs("r", 10)})
	}
	b.Close()
	b = openTest(t, dir, nil)
	for p := int32(0); p < 2; p++ {
		if got := fetchAll(t, b, "d", p); len(got) != 250 {
			t.Fatalf("partition %d has %d records after restart", p, len(got))
		}
	}
	if err := b.DeleteTopic(context.Background(), "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Topic(context.Background(), "d"); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("deleted topic: %v", err)
	}
	if _, err := b.CreateTopic(context.Background(), "d", TopicConfig{}, false); err != nil {
		t.Fatalf("recreate: %v", err)
	}
}

// A retried publish (same records, same message ids) is answered with the
// offsets of the copy already stored, also after a restart; a batch that
// only shares its first id with another but holds other records is new.
func TestRetriedPublishIsNotStoredTwice(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, nil)
	b.CreateTopic(context.Background(), "dd", TopicConfig{}, false)
	mk := func(n int) []record.Record {
		rs := recs("dup", n)
		for i := range rs {
			rs[i].MessageID[0], rs[i].MessageID[1] = 0xaa, byte(i)
		}
		return rs
	}
	first := mustPublish(t, b, &PublishRequest{Topic: "dd", Records: mk(3)})
	mustPublish(t, b, &PublishRequest{Topic: "dd", Records: recs("other", 2)})
	again := mustPublish(t, b, &PublishRequest{Topic: "dd", Records: mk(3)})
	if again.Acks[0].Offset != first.Acks[0].Offset || again.Acks[2].Offset != first.Acks[2].Offset {
		t.Fatalf("retry got offsets %v, the first copy %v", again.Acks, first.Acks)
	}
	packed := record.AppendBatch(nil, 0, mk(3))
	res := mustPublish(t, b, &PublishRequest{Topic: "dd", Partition: 0, Batch: packed})
	if res.BaseOffset != first.Acks[0].Offset {
		t.Fatalf("the same records packed got base %d, want %d", res.BaseOffset, first.Acks[0].Offset)
	}
	if got := fetchAll(t, b, "dd", 0); len(got) != 5 {
		t.Fatalf("%d records stored, want 5 (3 + 2, the retries answered from the first copy)", len(got))
	}
	longer := mustPublish(t, b, &PublishRequest{Topic: "dd", Records: mk(4)})
	if longer.Acks[0].Offset != 5 {
		t.Fatalf("a batch sharing only its first id was not stored anew: %v", longer.Acks)
	}
	b.Close()
	b = openTest(t, dir, nil)
	after := mustPublish(t, b, &PublishRequest{Topic: "dd", Records: mk(3)})
	if after.Acks[0].Offset != first.Acks[0].Offset {
		t.Fatalf("after a restart the retry got offset %d, want %d", after.Acks[0].Offset, first.Acks[0].Offset)
	}
	b.Close()
	b = openTest(t, dir, func(c *Config) { c.DedupMaxBatches = -1 })
	off := mustPublish(t, b, &PublishRequest{Topic: "dd", Records: mk(3)})
	if off.Acks[0].Offset != 9 {
		t.Fatalf("with duplicate detection off the retry was not stored: %v", off.Acks)
	}
}

// TestKeylessRetryGoesToTheSamePartition: a keyless publish retried with
// the same message ids (its answer was lost) goes to the partition the
// first attempt went to, whose duplicate window answers it with the first
// copy's offsets. Spread by turns, the retry went to the next partition
// and stored the records twice (found by the fault campaign).
func TestKeylessRetryGoesToTheSamePartition(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	if _, err := b.CreateTopic(context.Background(), "kl", TopicConfig{Partitions: 3}, false); err != nil {
		t.Fatal(err)
	}
	used := map[int32]bool{}
	for i := range 30 {
		in := recs(fmt.Sprint("r", i), 2)
		for j := range in {
			in[j].MessageID = record.MessageID(uuid.Must(uuid.NewV7()))
		}
		again := append([]record.Record(nil), in...)
		first := mustPublish(t, b, &PublishRequest{Topic: "kl", Partition: AnyPartition, Records: in})
		retry := mustPublish(t, b, &PublishRequest{Topic: "kl", Partition: AnyPartition, Records: again})
		for j := range first.Acks {
			if first.Acks[j] != retry.Acks[j] {
				t.Fatalf("request %d, record %d: first stored at %+v, the retry at %+v", i, j, first.Acks[j], retry.Acks[j])
			}
		}
		used[first.Acks[0].Partition] = true
	}
	total := 0
	for p := range int32(3) {
		total += len(fetchAll(t, b, "kl", p))
	}
	if total != 60 {
		t.Fatalf("%d records stored, want 60 (30 requests of 2, each retried once)", total)
	}
	if len(used) != 3 {
		t.Fatalf("30 keyless requests went to partitions %v only", used)
	}
}

// Once a stop has begun (Drain), a subscription opened is refused with a
// retriable ErrUnavailable: one registered after Drain ended the others
// would hold the stop until its timeout (a graceful stop once took 10 s
// for a group member relayed in that window).
func TestNoSubscriptionOpensWhileDraining(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	b.CreateTopic(context.Background(), "t", TopicConfig{}, false)
	open, err := b.Subscribe(context.Background(), SubscribeOptions{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.Drain(ctx)
	if _, err := pollN(ctx, open, 10); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a subscription open at the drain: %v, want ErrUnavailable", err)
	}
	for _, opts := range []SubscribeOptions{{Topic: "t"}, {Topic: "t", Group: "g"}} {
		if _, err := b.Subscribe(context.Background(), opts); !errors.Is(err, ErrUnavailable) || !Retriable(err) {
			t.Fatalf("subscribing (group %q) while draining: %v, want a retriable ErrUnavailable", opts.Group, err)
		}
	}
}

// TestPerformanceBatch: a packed batch in mode performance is checked as
// a durable one (its CRC, the topic's record size, the transaction bits)
// and its records without an id or a timestamp get the broker's before
// they reach the ring.
func TestPerformanceBatch(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "fast", TopicConfig{MaxMessageBytes: 100}, false); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "fast", IncludePerformance: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish := func(batch []byte, txn bool) error {
		_, err := b.Publish(ctx, &PublishRequest{Topic: "fast", Partition: 0, Mode: ModePerformance, Batch: batch, Txn: txn})
		return err
	}
	good := record.AppendBatch(nil, 0, []record.Record{{Payload: []byte("a")}, {MessageID: record.MessageID{7}, Timestamp: 42, Payload: []byte("b")}})
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	large := record.AppendBatch(nil, 0, []record.Record{{MessageID: record.MessageID{1}, Timestamp: 1, Payload: make([]byte, 101)}})
	txn := bytes.Clone(good)
	record.SetTxnAttributes(txn, record.AttrTransactional)
	for _, tc := range []struct {
		name  string
		batch []byte
		txn   bool
		want  error
	}{
		{"corrupt", corrupt, false, ErrCorruptBatch},
		{"record too large", large, false, ErrMessageTooLarge},
		{"transaction bits", txn, false, ErrCorruptBatch},
		{"a transaction's batch", good, true, ErrInvalidArgument},
		{"short", good[:len(good)-1], false, ErrCorruptBatch},
	} {
		if err := publish(tc.batch, tc.txn); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	before := time.Now().UnixNano()
	if err := publish(good, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := pollN(ctx, sub, 10)
	if err != nil || len(d.Records) != 2 {
		t.Fatalf("poll = %+v, %v", d, err)
	}
	r0, r1 := d.Records[0].Record, d.Records[1].Record
	if r0.MessageID.IsZero() || r0.Timestamp < before || string(r0.Payload) != "a" || r0.Offset != 0 {
		t.Errorf("record without id and timestamp: %+v", r0)
	}
	if r1.MessageID != (record.MessageID{7}) || r1.Timestamp != 42 || string(r1.Payload) != "b" || r1.Offset != 1 {
		t.Errorf("record with its own id and timestamp: %+v", r1)
	}
}

// TestFetchInto: a fetch given a buffer reads the log into it, and the
// buffer it gives back can be used for the next fetch while the records
// of each come back intact.
func TestFetchInto(t *testing.T) {
	b := openTest(t, t.TempDir(), func(c *Config) { c.TailCacheBytes = 1 }) // the log, not the cache
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "into", TopicConfig{Partitions: 1}, false); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		in := recs(fmt.Sprintf("batch%d", i), 10)
		for _, r := range in {
			want = append(want, string(r.Payload))
		}
		mustPublish(t, b, &PublishRequest{Topic: "into", Partition: 0, Records: in})
	}
	buf := make([]byte, 0, 256) // smaller than a fetch: the read grows it
	var got []string
	fromBuf := 0
	for off := int64(0); off < int64(len(want)); {
		res, err := b.Fetch(ctx, FetchRequest{Topic: "into", Partition: 0, Offset: off, MaxBytes: 2000, Into: buf})
		if err != nil {
			t.Fatal(err)
		}
		if res.Read != nil {
			fromBuf++
			first, last := res.Batches[0], res.Batches[len(res.Batches)-1]
			if &first[0] != &res.Read[0] || &last[len(last)-1] != &res.Read[len(res.Read)-1] {
				t.Fatalf("fetch at %d: the batches are not in the buffer given back", off)
			}
			buf = res.Read[:0]
		}
		out, next, err := DecodeFrom(nil, res.Batches, off, 0)
		if err != nil || next <= off {
			t.Fatalf("fetch at %d: next %d, err %v", off, next, err)
		}
		for _, r := range out {
			got = append(got, string(r.Payload)) // copied before the buffer is reused
		}
		off = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records read through a reused buffer differ from those published")
	}
	if fromBuf < 2 {
		t.Fatalf("%d fetches read into the buffer, want most of them", fromBuf)
	}
}

// A publisher may reuse the memory its records alias once PublishAsync
// returns (hermes-wire hands the broker records that alias its read
// buffer): whatever the mode, and whether the records go to one
// partition or several, what is stored and delivered is what was
// published.
func TestPublishedRecordsMayBeReusedOnReturn(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "reuse", TopicConfig{Partitions: 3}, false); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "reuse", IncludePerformance: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 30
	want := func(mode Mode, i int) (key, payload, header string) {
		return fmt.Sprintf("k%d", i), fmt.Sprintf("%s-payload-%d", mode, i), fmt.Sprintf("h%d", i)
	}
	for _, mode := range []Mode{ModeConsistent, ModePerformance} {
		buf := make([]byte, 0, 4096)
		take := func(s string) []byte {
			at := len(buf)
			buf = append(buf, s...)
			return buf[at:len(buf):len(buf)]
		}
		in := make([]record.Record, n)
		for i := range in {
			k, p, h := want(mode, i)
			in[i] = record.Record{Key: take(k), Payload: take(p), Headers: []record.Header{{Key: "h", Value: take(h)}}}
		}
		if len(buf) > cap(buf)/2 {
			t.Fatal("records outgrew the buffer")
		}
		answered := make(chan error, 1)
		b.PublishAsync(ctx, &PublishRequest{Topic: "reuse", Partition: AnyPartition, Mode: mode, Records: in},
			func(_ *PublishResult, err error) { answered <- err })
		for i := range buf {
			buf[i] = 'X'
		}
		clear(in)
		if err := <-answered; err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
	}
	check := func(where string, mode Mode, got []record.Record) {
		t.Helper()
		seen := map[string]bool{}
		for _, r := range got {
			var i int
			if _, err := fmt.Sscanf(string(r.Key), "k%d", &i); err != nil {
				t.Fatalf("%s: key %q", where, r.Key)
			}
			k, p, h := want(mode, i)
			if string(r.Key) != k || string(r.Payload) != p || len(r.Headers) != 1 || string(r.Headers[0].Value) != h {
				t.Fatalf("%s: record %d read back as key %q payload %q headers %q", where, i, r.Key, r.Payload, r.Headers)
			}
			seen[k] = true
		}
		if len(seen) != n {
			t.Fatalf("%s: %d distinct records, want %d", where, len(seen), n)
		}
	}
	var durable []record.Record
	for p := range int32(3) {
		durable = append(durable, fetchAll(t, b, "reuse", p)...)
	}
	check("the log", ModeConsistent, durable)
	var perf []record.Record
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(perf) < n {
		d, err := pollN(deadline, sub, 1000)
		if err != nil {
			t.Fatalf("after %d performance records: %v", len(perf), err)
		}
		for _, r := range d.Records {
			if r.Mode == ModePerformance {
				perf = append(perf, r.Record)
			}
		}
	}
	check("the ring", ModePerformance, perf)
}
