package group

import (
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// Defaults of TrackerConfig.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliveries = 5
	DefaultMaxPending    = 1000
)

// TrackerConfig bounds one Tracker. Zero fields take their defaults.
type TrackerConfig struct {
	// AckWait is how long a delivery may stay unacked before it is due for
	// redelivery. Default DefaultAckWait.
	AckWait time.Duration
	// MaxDeliveries is how many deliveries a record gets: when the last one
	// expires, Due reports it for the dead-letter topic instead of
	// redelivery. 0 means DefaultMaxDeliveries; a negative value means
	// unlimited.
	MaxDeliveries int
	// MaxPending bounds the delivered-but-unacked records. At the limit
	// Full reports true and the broker must not deliver new records of this
	// partition (redeliveries are fine). Default DefaultMaxPending; it
	// cannot be unlimited.
	MaxPending int
}

func (c TrackerConfig) withDefaults() TrackerConfig {
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	return c
}

// Tracker tracks, for one (group, topic, partition), the records delivered
// but not yet acked: it computes the committed offset, finds expired
// deliveries and the records to dead-letter. Deterministic and clock-free
// (time comes in as now); not safe for concurrent use.
//
// An offset is in one of three states: acked (below Committed, or above it
// and acked out of order, or never delivered and skipped over), pending and
// armed (in the deadline heap), or pending and parked (returned by Due, in
// no heap, waiting for the broker to call Delivered, Nack or Ack).
type Tracker struct {
	cfg TrackerConfig
	// next is one past the highest offset ever delivered, or the initial
	// committed offset. Invariant: every pending offset < next.
	next    int64
	pending map[int64]*delivery
	// order holds pending offsets in increasing order, plus offsets acked
	// since they were added (removed lazily). Invariant: every pending
	// offset is in order; order is strictly increasing.
	order []int64
	// deadlines is a min-heap of the armed deliveries by (deadline, offset).
	deadlines deadlineHeap
}

type delivery struct {
	offset   int64
	deadline time.Time
	count    int // deliveries so far, >= 1
	index    int // position in deadlines; -1 when parked
}

// NewTracker returns a tracker for a partition whose records below
// committed are all acked; the next new delivery must be >= committed.
func NewTracker(committed int64, cfg TrackerConfig) *Tracker {
	return &Tracker{cfg: cfg.withDefaults(), next: committed, pending: make(map[int64]*delivery)}
}

// Delivered records that offset was sent to the consumer at now, and
// returns how many times it has been delivered, this one included. Its ack
// deadline becomes now+AckWait.
//
// A new record must have an offset >= every offset delivered before
// (offsets skipped over count as acked). An offset that is pending is a
// redelivery. An offset that is already acked is not tracked: the result
// is 0.
//
// REQUIRES: !t.Full() when offset is new. Breaking it is a caller bug and
// panics, since the bound would otherwise silently not hold.
func (t *Tracker) Delivered(offset int64, now time.Time) (count int) {
	if d, ok := t.pending[offset]; ok {
		d.count++
		t.arm(d, now.Add(t.cfg.AckWait))
		return d.count
	}
	if offset < t.next {
		return 0
	}
	if t.Full() {
		panic(fmt.Sprintf("group: Tracker.Delivered(%d) of a new record with %d pending (MaxPending %d)",
			offset, len(t.pending), t.cfg.MaxPending))
	}
	d := &delivery{offset: offset, count: 1, index: -1}
	t.pending[offset] = d
	t.order = append(t.order, offset)
	t.next = offset + 1
	t.arm(d, now.Add(t.cfg.AckWait))
	return 1
}

// Ack marks offset as processed and returns the committed offset after it
// and whether the ack advanced it. Acks of offsets below the committed
// offset are no-ops. ErrNotPending for any other offset that is not
// pending (never delivered, or acked already).
func (t *Tracker) Ack(offset int64) (committed int64, advanced bool, err error) {
	before := t.Committed()
	if offset < before {
		return before, false, nil
	}
	d, ok := t.pending[offset]
	if !ok {
		return before, false, ErrNotPending
	}
	if d.index >= 0 {
		heap.Remove(&t.deadlines, d.index)
	}
	delete(t.pending, offset)
	t.trimOrder()
	after := t.Committed()
	return after, after > before, nil
}

// Nack makes a pending offset due for redelivery at now (the consumer gave
// it back, or the broker could not redeliver a due record and returns it).
// ErrNotPending if offset is not pending.
func (t *Tracker) Nack(offset int64, now time.Time) error {
	d, ok := t.pending[offset]
	if !ok {
		return ErrNotPending
	}
	t.arm(d, now)
	return nil
}

// Due returns up to max deliveries whose deadline is <= now, earliest
// deadline first, split into those to redeliver and those that used all
// MaxDeliveries and go to the dead-letter topic; each list is in offset
// order. The returned offsets are parked: they stay pending (so they hold
// back Committed and count for Full) but Due and NextDeadline skip them
// until the broker calls Delivered (redelivery), Nack (could not send it:
// due again) or Ack (dead-lettered, or given up). max <= 0 returns nothing.
func (t *Tracker) Due(now time.Time, max int) (redeliver []int64, deadLetter []int64) {
	for len(t.deadlines) > 0 && len(redeliver)+len(deadLetter) < max {
		d := t.deadlines[0]
		if d.deadline.After(now) {
			break
		}
		heap.Pop(&t.deadlines)
		if t.cfg.MaxDeliveries > 0 && d.count >= t.cfg.MaxDeliveries {
			deadLetter = append(deadLetter, d.offset)
		} else {
			redeliver = append(redeliver, d.offset)
		}
	}
	slices.Sort(redeliver)
	slices.Sort(deadLetter)
	return redeliver, deadLetter
}

// Committed returns the next offset to consume: every offset below it is
// acked. It is the lowest pending offset, or, with none pending, one past
// the highest delivered offset (the initial committed offset if none).
func (t *Tracker) Committed() int64 {
	if len(t.pending) == 0 {
		return t.next
	}
	return t.order[0] // trimOrder keeps the front pending
}

// Pending returns the number of delivered-but-unacked records.
func (t *Tracker) Pending() int { return len(t.pending) }

// Full reports whether MaxPending records are pending: the broker must not
// deliver new records of this partition until an Ack.
func (t *Tracker) Full() bool { return len(t.pending) >= t.cfg.MaxPending }

// NextDeadline returns the earliest ack deadline of an armed delivery (the
// time at which to call Due next); ok is false if there is none.
func (t *Tracker) NextDeadline() (at time.Time, ok bool) {
	if len(t.deadlines) == 0 {
		return time.Time{}, false
	}
	return t.deadlines[0].deadline, true
}

// arm sets d's deadline and puts it in (or moves it within) the heap.
func (t *Tracker) arm(d *delivery, deadline time.Time) {
	d.deadline = deadline
	if d.index >= 0 {
		heap.Fix(&t.deadlines, d.index)
	} else {
		heap.Push(&t.deadlines, d)
	}
}

// trimOrder drops acked offsets from the front of order, and compacts it
// when acked offsets behind a pending front make up most of it, so that
// len(order) stays O(Pending) and each ack costs O(1) amortized.
func (t *Tracker) trimOrder() {
	i := 0
	for i < len(t.order) && t.pending[t.order[i]] == nil {
		i++
	}
	t.order = t.order[i:]
	if len(t.order) > 2*len(t.pending)+32 {
		t.order = slices.DeleteFunc(slices.Clone(t.order), func(off int64) bool {
			return t.pending[off] == nil
		})
	}
	if len(t.order) == 0 {
		t.order = nil // release the backing array
	}
}

// deadlineHeap orders deliveries by deadline, then offset, and keeps each
// delivery's index up to date.
type deadlineHeap []*delivery

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if !h[i].deadline.Equal(h[j].deadline) {
		return h[i].deadline.Before(h[j].deadline)
	}
	return h[i].offset < h[j].offset
}
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *deadlineHeap) Push(x any) {
	d := x.(*delivery)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	d.index = -1
	*h = old[:len(old)-1]
	return d
}
