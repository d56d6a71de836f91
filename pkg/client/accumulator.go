package client

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// recordOverhead is added to each record's size for buffer accounting, so
// that empty records still count against the bounds (id, timestamp and
// framing take about this much in a packed batch).
const recordOverhead = 40

// batch is the records of one partition that travel in one request.
// A batch moves open (accumulator.open) → queued (ready or retry) →
// in flight (pubStream.inflight) → done, possibly back to queued on a
// retriable failure. Fields without a lock note belong to whoever holds
// the batch at that stage, under Producer.mu.
type batch struct {
	seq       uint64 // unique, increasing in creation order
	partition int32
	msgs      []*Message // nil once done
	bytes     int64      // sum of record costs (size + recordOverhead)
	deadline  time.Time  // when an open batch is sealed by linger

	data     []byte // encoded packed batch, kept for retries; nil once done
	attempts int    // sends so far (and failed connects while queued)
	// slot: b holds one of the producer's in-flight slots, from when the
	// sender first takes it until it is done (a retry keeps it).
	slot bool // Lock: Producer.mu.
	// retried is the error the batch was last retried after (an
	// *Error), for a Future whose wait ends first.
	retried atomic.Pointer[Error]

	// The result, written before done is closed and read-only after.
	done     chan struct{}
	finished bool // Lock: Producer.mu. done was closed.
	err      error
	ackPart  int32
	base     int64
	mode     Mode
}

// partitioner chooses a record's partition. Keyed records go to
// record.KeyPartition(key, n); keyless records stick to one partition until
// that partition's batch is sealed, then move to the next one round-robin
// (Kafka's sticky partitioner), so keyless traffic makes full batches.
// Not safe for concurrent use.
type partitioner struct {
	n        int32
	fixed    int32 // -1: none
	sticky   int32
	hasFixed bool
}

// newPartitioner returns a partitioner over n partitions starting its
// sticky partition at a random one. fixed >= 0 sends every record there.
// REQUIRES: n > 0.
func newPartitioner(n int32, fixed int32) partitioner {
	if n <= 0 {
		panic(fmt.Sprintf("hermes client: partitioner over %d partitions", n))
	}
	return partitioner{n: n, fixed: fixed, hasFixed: fixed >= 0, sticky: rand.Int32N(n)}
}

func (p *partitioner) pick(key []byte) int32 {
	switch {
	case p.hasFixed:
		return p.fixed
	case key != nil:
		return record.KeyPartition(key, p.n)
	default:
		return p.sticky
	}
}

// batchSealed moves keyless records on when the sticky partition's batch
// was sealed.
func (p *partitioner) batchSealed(part int32) {
	if part == p.sticky {
		p.sticky = (p.sticky + 1) % p.n
	}
}

// accumulator gathers records into per-partition batches and queues the
// sealed ones for sending. It is a deterministic core: no goroutines, no
// clock of its own. Not safe for concurrent use (Producer.mu guards it).
type accumulator struct {
	maxBytes   int64 // a batch is sealed when it reaches this many bytes
	maxRecords int   // ... or this many records
	linger     time.Duration

	// pipeline bounds the sealed, unanswered batches of one partition
	// (queued or in flight); 0: no bound. While a partition is at it, a
	// lingered batch stays open and gathers the records that follow, as
	// a Kafka producer's batch does while its request is in flight: at a
	// moderate rate this makes one batch of what would be many.
	pipeline   int
	unanswered []int32 // per partition: sealed batches not yet done

	part    partitioner
	open    []*batch // per partition; nil when none is open
	ready   batchQueue
	retry   batchQueue // sent before ready: retries keep their place
	nextSeq uint64
}

func newAccumulator(n int32, fixed int32, maxBytes int64, maxRecords int, linger time.Duration, pipeline int) accumulator {
	return accumulator{
		maxBytes: maxBytes, maxRecords: maxRecords, linger: linger, pipeline: pipeline,
		part: newPartitioner(n, fixed), open: make([]*batch, n), unanswered: make([]int32, n),
	}
}

// add appends m, costing cost bytes, to the open batch of its partition.
// A batch that cannot take cost more bytes is sealed first (a record larger
// than maxBytes travels alone); a batch reaching maxBytes or maxRecords is
// sealed right after. It returns the batch m joined, m's index in it, and
// whether that batch is new (so the caller can track it). now is the
// time of the call, or zero when the caller did not need the clock: it is
// then read here if a batch with a linger opens.
func (a *accumulator) add(m *Message, cost int64, now time.Time) (b *batch, idx int, isNew bool) {
	p := a.part.pick(m.Key)
	b = a.open[p]
	if b != nil && b.bytes+cost > a.maxBytes {
		a.seal(b)
		p = a.part.pick(m.Key) // a keyless record moves with the sticky partition
		b = a.open[p]
	}
	if b == nil {
		a.nextSeq++
		b = &batch{seq: a.nextSeq, partition: p, done: make(chan struct{})}
		if a.linger > 0 {
			if now.IsZero() {
				now = time.Now()
			}
			b.deadline = now.Add(a.linger)
		} // else the zero deadline: sealed at the sender's next look (expire)
		a.open[p] = b
		isNew = true
	}
	idx = len(b.msgs)
	b.msgs = append(b.msgs, m)
	b.bytes += cost
	if len(b.msgs) >= a.maxRecords || b.bytes >= a.maxBytes {
		a.seal(b)
	}
	return b, idx, isNew
}

// seal moves the open batch b to the ready queue.
func (a *accumulator) seal(b *batch) {
	a.open[b.partition] = nil
	a.ready.push(b)
	a.unanswered[b.partition]++
	a.part.batchSealed(b.partition)
}

// answered notes that batch b is done. A batch still open was never
// counted (every batch is open from add until seal, and never again).
func (a *accumulator) answered(b *batch) {
	p := b.partition
	if a.open[p] == b {
		return
	}
	a.unanswered[p]--
	if a.unanswered[p] < 0 {
		panic(fmt.Sprintf("hermes client: partition %d has %d unanswered batches", p, a.unanswered[p]))
	}
}

// expire seals the open batches whose linger deadline is not after now,
// unless their partition has pipeline batches unanswered (they are sealed
// at a later call, after an answer), and returns the earliest deadline of
// those still open and not held so (zero when none).
func (a *accumulator) expire(now time.Time) (next time.Time) {
	for _, b := range a.open {
		if b == nil {
			continue
		}
		switch {
		case b.deadline.After(now):
			if next.IsZero() || b.deadline.Before(next) {
				next = b.deadline
			}
		case a.pipeline == 0 || int(a.unanswered[b.partition]) < a.pipeline:
			a.seal(b)
		}
	}
	return next
}

// sealAll seals every open batch (for Flush).
func (a *accumulator) sealAll() {
	for _, b := range a.open {
		if b != nil {
			a.seal(b)
		}
	}
}

// pending reports whether a queued batch waits to be sent.
func (a *accumulator) pending() bool { return a.retry.len() > 0 || a.ready.len() > 0 }

// pop takes the next batch to send: retries first, then sealed batches in
// seal order. It returns nil when none is queued.
func (a *accumulator) pop() *batch {
	if b := a.retry.pop(); b != nil {
		return b
	}
	return a.ready.pop()
}

// batchQueue is a FIFO of batches. Its length is bounded by the
// producer's buffered bytes: every batch holds at least recordOverhead.
type batchQueue struct {
	items []*batch
	head  int
}

func (q *batchQueue) len() int { return len(q.items) - q.head }

func (q *batchQueue) push(b *batch) { q.items = append(q.items, b) }

// peek returns the next batch without taking it; nil when none is queued.
func (q *batchQueue) peek() *batch {
	if q.head == len(q.items) {
		return nil
	}
	return q.items[q.head]
}

func (q *batchQueue) pop() *batch {
	if q.head == len(q.items) {
		return nil
	}
	b := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return b
}

// drain removes and returns every queued batch in order.
func (q *batchQueue) drain() []*batch {
	out := append([]*batch(nil), q.items[q.head:]...)
	clear(q.items)
	q.items, q.head = q.items[:0], 0
	return out
}
