package broker

import (
	"context"
	"time"

	"github.com/hermes-mq/hermes/internal/auth"
	"github.com/hermes-mq/hermes/pkg/record"
)

// The live path: performance records handed to subscribers on the
// publisher's goroutine, the moment they are in the ring.
//
// A subscription opened with SubscribeOptions.Live gets its partitions'
// performance records through its LiveSink instead of through Next. When a
// publisher appends records to a partition's ring (PublishLive, or Publish
// in ModePerformance), the broker offers them, on the publisher's
// goroutine, to every live subscription of the topic that owns the
// partition, is caught up with the ring and has credit: it takes them
// under its lock and passes them to its sink. A subscription that is
// behind (it had no credit, or another publisher's records came first)
// is only woken: its Next catches up from the ring, through the same sink,
// under the same lock, so its records stay in ring order whichever
// goroutine delivers them. Nothing waits on a subscriber: one without
// credit gets nothing, and what the ring evicts meanwhile is counted as
// missed.

// LiveSink receives a live subscription's performance records.
type LiveSink interface {
	// Live is handed records of partition, recs[i] at ring offset
	// first+i, after missed records the subscription lost (evicted from
	// the ring before it got them; recs may then be empty). The records
	// are within the subscription's credit, which they spend. Live is
	// called with the subscription's lock held — on a publisher's
	// goroutine with the origin it passed to PublishLive (nil from
	// Publish), or on the goroutine of the subscription's Next with
	// origin nil — so it must not block or call the subscription. recs
	// are valid only during the call: Live copies what it keeps.
	Live(origin any, partition int32, first, missed int64, recs []record.Record)
}

// PublishLive publishes performance records to one partition as Publish
// does in ModePerformance, without its allocations, and hands them at
// once, on the calling goroutine, to the partition's live subscriptions
// with origin (LiveSink). With AnyPartition it takes exactly one record
// and chooses its partition as Publish does. It returns the partition
// and the ring offset of the first record. It may fill recs' missing
// message ids and timestamps; the ring keeps copies. Errors: those of
// Publish.
func (b *Broker) PublishLive(ctx context.Context, topic string, partition int32, recs []record.Record, origin any) (int32, int64, error) {
	if err := b.authorize(ctx, ActionWrite, topicResource(topic)); err != nil {
		return 0, 0, err
	}
	if b.authn.quotas.Active() {
		var n int64
		for i := range recs {
			n += record.CreditBytes(&recs[i])
		}
		if err := b.admit(ctx, auth.QuotaProduce, n); err != nil {
			return 0, 0, err
		}
	}
	t, err := b.topic(topic)
	if err != nil {
		return 0, 0, err
	}
	if len(recs) == 0 {
		return 0, 0, errorf(ErrInvalidArgument, "a publish needs at least one record")
	}
	if partition == AnyPartition {
		if len(recs) != 1 {
			return 0, 0, errorf(ErrInvalidArgument, "a live publish of %d records needs a partition", len(recs))
		}
		n := int32(len(t.partitions()))
		if k := recs[0].Key; k != nil {
			partition = record.KeyPartition(k, n)
		} else {
			partition = int32(t.rr.Add(1) % uint32(n))
		}
	}
	p, err := t.partition(partition)
	if err != nil {
		return 0, 0, err
	}
	limit, size := int(t.config().MaxMessageBytes), 0
	for i := range recs {
		rs := recordSize(&recs[i])
		if rs > limit {
			return 0, 0, errorf(ErrMessageTooLarge, "record at index %d is %d bytes; topic %q allows %d", i, rs, t.name, limit)
		}
		if n := len(recs[i].Headers); n > record.MaxRecordHeaders {
			return 0, 0, errorf(ErrInvalidArgument, "record at index %d has %d headers; at most %d are allowed", i, n, record.MaxRecordHeaders)
		}
		size += rs
	}
	fillRecords(recs, time.Now().UnixNano())
	return p.id, b.appendRing(p, recs, size, origin), nil
}

// addLive counts s among the topic's subscriptions of performance
// records: live ones are offered records on append, the others polled
// awake.
func (t *topic) addLive(s *localSub) {
	if !s.opts.IncludePerformance {
		return
	}
	if s.opts.Live == nil {
		t.perfPollers.Add(1)
		return
	}
	t.liveMu.Lock()
	defer t.liveMu.Unlock()
	subs := append(append(make([]*localSub, 0, len(t.liveSubs())+1), t.liveSubs()...), s)
	t.live.Store(&subs)
}

// removeLive undoes addLive.
func (t *topic) removeLive(s *localSub) {
	if !s.opts.IncludePerformance {
		return
	}
	if s.opts.Live == nil {
		t.perfPollers.Add(-1)
		return
	}
	t.liveMu.Lock()
	defer t.liveMu.Unlock()
	old := t.liveSubs()
	subs := make([]*localSub, 0, len(old))
	for _, o := range old {
		if o != s {
			subs = append(subs, o)
		}
	}
	t.live.Store(&subs)
}

// liveSubs returns the topic's live subscriptions (not to be modified).
func (t *topic) liveSubs() []*localSub {
	if l := t.live.Load(); l != nil {
		return *l
	}
	return nil
}

// offerLive hands records just appended to p's ring at first to s, if
// s owns p, is caught up and has credit; else, when s owns p, it wakes
// s's Next to catch up from the ring.
func (s *localSub) offerLive(origin any, p *partition, first int64, recs []record.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.ring[p.id]
	if !ok || s.ended != nil {
		return
	}
	if cur != first {
		s.signal()
		return
	}
	n := s.takeLiveCredit(recs)
	if n == 0 {
		return // Grant wakes Next, which reads them from the ring
	}
	s.opts.Live.Live(origin, p.id, first, 0, recs[:n])
	s.ring[p.id] = first + int64(n)
}

// takeLiveCredit returns how many of recs s's credit allows and spends
// it. Lock: s.mu held.
func (s *localSub) takeLiveCredit(recs []record.Record) int {
	records, _, ok := s.credit.limits()
	if !ok {
		return 0
	}
	n := min(len(recs), records)
	if s.credit.byteLimited {
		var bytes int64
		for i := range n {
			c := record.CreditBytes(&recs[i])
			if i > 0 && bytes+c > s.credit.bytes {
				n = i
				break
			}
			bytes += c
		}
		s.credit.bytes -= bytes
	}
	s.credit.records -= int64(n)
	return n
}

// liveCatchUp is pollRing for a live subscription: it hands the ring's
// records from s's cursor on to the sink itself, on the caller's
// goroutine (Next's), and returns whether it delivered or reported
// anything.
func (s *localSub) liveCatchUp(p *partition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.ring[p.id]
	if !ok || s.ended != nil {
		return false
	}
	records, _, ok := s.credit.limits()
	if !ok {
		return false
	}
	recs, next, missed := p.ring.Read(cur, min(records, liveCatchUpMax), s.liveBuf[:0])
	s.liveBuf = recs[:0]
	if len(recs) == 0 && missed == 0 {
		return false
	}
	first := next - int64(len(recs))
	n := s.takeLiveCredit(recs)
	s.opts.Live.Live(nil, p.id, first, missed, recs[:n])
	s.ring[p.id] = first + int64(n)
	clear(recs) // drop the references for the GC
	if missed > 0 {
		s.b.m.ringMissed.WithLabelValues(p.label).Add(float64(missed))
	}
	s.signal() // there may be more
	return true
}

// liveCatchUpMax bounds the records one catch-up hands over.
const liveCatchUpMax = 1024
