package broker

import (
	"errors"
	"sync"

	"github.com/hermes-mq/hermes/pkg/record"
)

// decodeScratch holds the slices records are decoded into before they
// are copied into a Delivery's DeliveredRecords: one allocation per
// delivery instead of two (the decoded slice grew afresh for every
// batch: 13% of a 3-node leader's allocations at 10,000 records/s).
var decodeScratch = sync.Pool{New: func() any { return new([]record.Record) }}

// maxScratchRecords bounds the scratch slices kept in the pool.
const maxScratchRecords = 4096

// pollNew looks for new records in the owned partitions, round-robin so
// that one busy partition cannot starve the others.
func (s *localSub) pollNew(maxRecords, maxBytes int) (*Delivery, error) {
	s.mu.Lock()
	owned := append([]int32(nil), s.owned...)
	rr := s.rr
	s.mu.Unlock()
	for i := range owned {
		pid := owned[(rr+i)%len(owned)]
		d, err := s.pollPartition(pid, maxRecords, maxBytes)
		if err != nil {
			return nil, err
		}
		if d != nil {
			s.mu.Lock()
			s.rr = (rr + i + 1) % len(owned)
			s.mu.Unlock()
			return d, nil
		}
	}
	return nil, nil
}

// pollPartition returns the next records of one partition, if any: live
// performance records first, then durable ones from the cursor.
func (s *localSub) pollPartition(pid int32, maxRecords, maxBytes int) (*Delivery, error) {
	p := s.t.partitions()[pid]
	s.mu.Lock()
	cursor, ok := s.cursors[pid]
	ringCursor := s.ring[pid]
	gen := s.generation
	s.mu.Unlock()
	if !ok {
		return nil, nil
	}
	if s.opts.IncludePerformance {
		if d := s.pollRing(p, ringCursor, maxRecords); d != nil {
			return d, nil
		}
	}
	limit := maxRecords
	if s.gs != nil && s.opts.AckMode == AckPerMessage {
		if limit = min(limit, s.b.groups.room(s, pid)); limit == 0 {
			return nil, nil
		}
	}
	batches, start, _, err := p.readBatches(cursor, maxBytes, limit)
	if errors.Is(err, ErrOffsetOutOfRange) && cursor < start {
		// Retention deleted what this subscriber had not read yet.
		s.b.log.Warn("subscriber fell behind retention; skipping to the log start",
			"topic", s.t.name, "partition", pid, "group", s.opts.Group, "from", cursor, "to", start)
		s.setCursor(pid, cursor, start, gen)
		s.signal() // read again at once from the new position
		return nil, nil
	}
	if err != nil || len(batches) == 0 {
		return nil, err
	}
	d := &Delivery{Partition: pid}
	next, err := s.trim(d, batches, cursor, limit)
	if err != nil {
		return nil, err
	}
	if !s.advance(pid, cursor, next, gen, controlOffsets(batches, cursor, next)) {
		return nil, nil // the assignment changed meanwhile; Poll looks again
	}
	if len(d.Records) == 0 && len(d.Batches) == 0 {
		// Only transaction markers: nothing to deliver, read on.
		s.signal()
		return nil, nil
	}
	s.b.m.consumedRecords.WithLabelValues(p.label).Add(float64(next - cursor))
	return d, nil
}

// pollRing returns live performance records of p from the ring, or nil.
func (s *localSub) pollRing(p *partition, from int64, max int) *Delivery {
	if s.opts.Live != nil {
		s.liveCatchUp(p)
		return nil
	}
	recs, next, missed := p.ring.Read(from, max, nil)
	if len(recs) == 0 && missed == 0 {
		return nil
	}
	s.mu.Lock()
	if cur, ok := s.ring[p.id]; !ok || cur != from {
		s.mu.Unlock()
		return nil
	}
	s.ring[p.id] = next
	s.mu.Unlock()
	if missed > 0 {
		s.b.m.ringMissed.WithLabelValues(p.label).Add(float64(missed))
	}
	d := &Delivery{Partition: p.id, Missed: missed, Records: make([]DeliveredRecord, len(recs))}
	for i, r := range recs {
		d.Records[i] = DeliveredRecord{Record: r, Partition: p.id, Mode: ModePerformance, DeliveryCount: 1}
	}
	return d
}

// trim fills d with the records of batches from cursor on, at most limit of
// them, and returns the offset after the last. Packed deliveries pass whole
// batches through untouched when they fit, and re-encode the part of a
// batch that does not.
func (s *localSub) trim(d *Delivery, batches [][]byte, cursor int64, limit int) (int64, error) {
	if !s.opts.Packed {
		scratch := decodeScratch.Get().(*[]record.Record)
		recs, next, err := DecodeFrom((*scratch)[:0], batches, cursor, limit)
		if err == nil {
			d.Records = make([]DeliveredRecord, len(recs))
			for i, r := range recs {
				d.Records[i] = DeliveredRecord{Record: r, Partition: d.Partition, Mode: ModeConsistent, DeliveryCount: 1}
			}
		}
		// The records alias the batches' bytes: none stays in the pool.
		clear(recs)
		if cap(recs) <= maxScratchRecords {
			*scratch = recs[:0]
			decodeScratch.Put(scratch)
		}
		if err != nil {
			return 0, errorf(ErrUnavailable, "decode %s/%d: %v", s.t.name, d.Partition, err)
		}
		return next, nil
	}
	next := cursor
	for _, bt := range batches {
		left := limit - int(next-cursor)
		if left <= 0 {
			break
		}
		h, err := record.ParseBatch(bt)
		if err != nil {
			return 0, errorf(ErrUnavailable, "decode %s/%d: %v", s.t.name, d.Partition, err)
		}
		if h.Control() { // a Kafka transaction marker: no records
			next = max(next, h.NextOffset())
			continue
		}
		if h.BaseOffset >= next && int(h.RecordCount) <= left {
			d.Batches = append(d.Batches, bt)
			next = h.NextOffset()
			continue
		}
		recs, n, err := DecodeFrom(nil, [][]byte{bt}, next, left)
		if err != nil {
			return 0, errorf(ErrUnavailable, "decode %s/%d: %v", s.t.name, d.Partition, err)
		}
		if len(recs) > 0 {
			d.Batches = append(d.Batches, record.AppendBatch(nil, recs[0].Offset, recs))
			next = n
		}
	}
	return next, nil
}

// controlOffsets are the offsets in [from, to) of the control batches
// (Kafka transaction markers) among batches: skipped, never delivered.
func controlOffsets(batches [][]byte, from, to int64) []int64 {
	var out []int64
	for _, bt := range batches {
		if h, err := record.ParseHeader(bt); err == nil && h.Control() {
			for off := max(h.BaseOffset, from); off < min(h.NextOffset(), to); off++ {
				out = append(out, off)
			}
		}
	}
	return out
}

// advance moves pid's cursor from `from` to `to` after a delivery, and does
// the group's bookkeeping for it (skipped: offsets in the range that were
// not delivered, the transaction markers). It reports false, changing
// nothing, when the partition was revoked or re-assigned since the read
// began.
func (s *localSub) advance(pid int32, from, to int64, gen int64, skipped []int64) bool {
	if s.gs != nil {
		return s.b.groups.delivered(s, pid, from, to, gen, skipped)
	}
	return s.setCursor(pid, from, to, gen)
}

func (s *localSub) setCursor(pid int32, from, to int64, gen int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.cursors[pid]; !ok || cur != from || s.generation != gen {
		return false
	}
	s.cursors[pid] = to
	return true
}
