package client

import (
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

var t0 = time.Unix(1700000000, 0)

func msg(key string, payload int) *Message {
	m := &Message{Payload: make([]byte, payload)}
	if key != "" {
		m.Key = []byte(key)
	}
	return m
}

// TestStickyPartitioner: keyless records stay on one partition until its
// batch is sealed, then move round-robin; keyed records follow murmur2.
func TestStickyPartitioner(t *testing.T) {
	a := newAccumulator(3, -1, 1<<20, 4, time.Hour, 0)
	a.part.sticky = 0
	var parts []int32
	for range 12 {
		b, _, _ := a.add(msg("", 10), 50, t0)
		parts = append(parts, b.partition)
	}
	want := []int32{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}
	for i := range want {
		if parts[i] != want[i] {
			t.Fatalf("keyless partitions = %v, want %v", parts, want)
		}
	}
	if a.ready.len() != 3 {
		t.Fatalf("ready batches = %d, want 3", a.ready.len())
	}
	for _, k := range []string{"a", "order-17", ""} {
		b, _, _ := a.add(&Message{Key: []byte(k)}, 50, t0)
		if want := record.KeyPartition([]byte(k), 3); b.partition != want {
			t.Errorf("key %q: partition %d, want %d", k, b.partition, want)
		}
	}
}

func TestFixedPartition(t *testing.T) {
	a := newAccumulator(4, 2, 1<<20, 100, time.Hour, 0)
	for _, k := range []string{"", "x", "y"} {
		if b, _, _ := a.add(msg(k, 1), 50, t0); b.partition != 2 {
			t.Errorf("key %q went to %d, want fixed 2", k, b.partition)
		}
	}
}

// TestBatchBounds: a batch is sealed at max records and before it would
// pass max bytes; a record larger than max bytes travels alone.
func TestBatchBounds(t *testing.T) {
	a := newAccumulator(1, -1, 1000, 3, time.Hour, 0)
	b1, i, isNew := a.add(msg("", 0), 400, t0)
	if !isNew || i != 0 {
		t.Fatalf("first add: idx %d new %v", i, isNew)
	}
	b2, i, isNew := a.add(msg("", 0), 400, t0)
	if b2 != b1 || i != 1 || isNew {
		t.Fatalf("second record opened a new batch")
	}
	b3, _, isNew := a.add(msg("", 0), 400, t0) // 1200 > 1000: seal b1 first
	if b3 == b1 || !isNew || a.ready.len() != 1 || len(b1.msgs) != 2 || b1.bytes != 800 {
		t.Fatalf("byte bound: b1 has %d records/%d bytes, ready %d", len(b1.msgs), b1.bytes, a.ready.len())
	}
	big, _, _ := a.add(msg("", 0), 5000, t0) // seals b3, travels alone, sealed at once
	if len(big.msgs) != 1 || a.ready.len() != 3 || a.open[0] != nil {
		t.Fatalf("oversized: %d records, ready %d", len(big.msgs), a.ready.len())
	}
	for range 3 {
		a.add(msg("", 0), 1, t0)
	}
	if a.ready.len() != 4 || a.open[0] != nil {
		t.Fatalf("record bound: ready %d, open %v", a.ready.len(), a.open[0])
	}
	want := []*batch{b1, b3, big}
	for _, w := range want {
		if got := a.pop(); got != w {
			t.Fatalf("pop order wrong: got seq %d, want %d", got.seq, w.seq)
		}
	}
}

func TestLingerExpiry(t *testing.T) {
	a := newAccumulator(2, -1, 1<<20, 100, 5*time.Millisecond, 0)
	k1, k2 := keysOnDistinctPartitions(2)
	a.add(msg(k1, 1), 50, t0)
	a.add(msg(k2, 1), 50, t0.Add(2*time.Millisecond))
	if next := a.expire(t0.Add(time.Millisecond)); !next.Equal(t0.Add(5 * time.Millisecond)) {
		t.Fatalf("next deadline %v", next)
	}
	if a.pending() {
		t.Fatal("sealed before linger")
	}
	next := a.expire(t0.Add(5 * time.Millisecond))
	if a.ready.len() != 1 || !next.Equal(t0.Add(7*time.Millisecond)) {
		t.Fatalf("after first linger: ready %d next %v", a.ready.len(), next)
	}
	if next := a.expire(t0.Add(time.Second)); !next.IsZero() || a.ready.len() != 2 {
		t.Fatalf("after all lingers: ready %d next %v", a.ready.len(), next)
	}
}

// A caller that needed no clock (zero now) gets a batch sealed at the
// sender's next look with linger 0, and a deadline from the clock with a
// linger.
func TestLingerWithoutTheCallersClock(t *testing.T) {
	a := newAccumulator(1, -1, 1<<20, 100, 0, 0)
	b, _, _ := a.add(msg("", 1), 50, time.Time{})
	if !b.deadline.IsZero() {
		t.Fatalf("linger 0: deadline %v", b.deadline)
	}
	if next := a.expire(time.Now()); !next.IsZero() || a.ready.len() != 1 {
		t.Fatalf("linger 0: not sealed at the first look (ready %d, next %v)", a.ready.len(), next)
	}
	a = newAccumulator(1, -1, 1<<20, 100, time.Hour, 0)
	before := time.Now()
	b, _, _ = a.add(msg("", 1), 50, time.Time{})
	if b.deadline.Before(before.Add(time.Hour)) || b.deadline.After(time.Now().Add(time.Hour)) {
		t.Fatalf("linger 1h: deadline %v, want an hour after %v", b.deadline, before)
	}
	if a.expire(time.Now()); a.pending() {
		t.Fatal("linger 1h: sealed at once")
	}
}

// With a per-partition bound, a partition at the bound keeps its lingered
// batch open: the records that follow join it, and it is sealed once an
// answer comes back. A batch that fills goes at once.
func TestPipelineHoldsTheNextBatchOpen(t *testing.T) {
	a := newAccumulator(1, -1, 1<<20, 3, 0, 1)
	first, _, _ := a.add(msg("", 1), 50, t0)
	if next := a.expire(t0); !next.IsZero() || a.ready.pop() != first {
		t.Fatal("the first batch was not sealed at once")
	}
	second, _, _ := a.add(msg("", 1), 50, t0)
	if next := a.expire(t0.Add(time.Second)); !next.IsZero() || a.pending() {
		t.Fatalf("sealed while the partition's batch is unanswered (next %v)", next)
	}
	if b, idx, isNew := a.add(msg("", 1), 50, t0); b != second || idx != 1 || isNew {
		t.Fatalf("a held batch did not take the next record: %v %d %v", b == second, idx, isNew)
	}
	a.answered(first)
	if a.expire(t0); a.ready.pop() != second || len(second.msgs) != 2 {
		t.Fatal("the held batch was not sealed after the answer")
	}
	third, _, _ := a.add(msg("", 1), 50, t0) // second is unanswered
	a.add(msg("", 1), 50, t0)
	a.add(msg("", 1), 50, t0) // the third record fills it
	if a.ready.pop() != third {
		t.Fatal("a full batch was held")
	}
	a.answered(second) // third is unanswered
	open, _, _ := a.add(msg("", 1), 50, t0)
	a.answered(open) // never sealed: not counted
	if a.expire(t0); a.pending() {
		t.Fatal("answering an open batch freed the pipeline")
	}
}

// TestRetryQueueFirst: batches waiting for a retry go before new ones.
func TestRetryQueueFirst(t *testing.T) {
	a := newAccumulator(1, -1, 1<<20, 1, time.Hour, 0)
	b1, _, _ := a.add(msg("", 0), 1, t0)
	b2, _, _ := a.add(msg("", 0), 1, t0)
	if a.pop() != b1 {
		t.Fatal("want b1 first")
	}
	a.retry.push(b1)
	if a.pop() != b1 || a.pop() != b2 || a.pop() != nil {
		t.Fatal("retry not first")
	}
	if a.pending() {
		t.Fatal("pending after draining")
	}
}

func TestBatchQueueDrain(t *testing.T) {
	var q batchQueue
	bs := []*batch{{seq: 1}, {seq: 2}, {seq: 3}}
	for _, b := range bs {
		q.push(b)
	}
	q.pop()
	got := q.drain()
	if len(got) != 2 || got[0].seq != 2 || got[1].seq != 3 || q.len() != 0 || q.pop() != nil {
		t.Fatalf("drain = %v, len after %d", got, q.len())
	}
}

// keysOnDistinctPartitions returns two keys that hash to different
// partitions of n.
func keysOnDistinctPartitions(n int32) (string, string) {
	k1 := "k0"
	for i := 1; ; i++ {
		k2 := "k" + string(rune('0'+i))
		if record.KeyPartition([]byte(k1), n) != record.KeyPartition([]byte(k2), n) {
			return k1, k2
		}
	}
}
