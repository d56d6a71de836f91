package bench

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// State bits of one published record, kept per stream and sequence: one
// byte a record, so a run of 35 million records needs 35 MB.
const (
	stSent   = 1 << 0
	stAcked  = 1 << 1
	stFailed = 1 << 2
	// stReadBack: found in the log by the read-back after the run.
	stReadBack = 1 << 3
	// The number of first-and-later deliveries, saturating at 15, lives in
	// the upper four bits.
	recvShift = 4
	recvMax   = 15
)

// stream is the bookkeeping of one publishing worker's records.
type stream struct {
	mu sync.Mutex
	// st[seq] holds the state bits of record seq. Lock: mu.
	st []uint8
}

// mark ors bits into the state of seq, growing st as needed, and returns
// the state before. Lock: s.mu must not be held.
func (s *stream) mark(seq uint64, bits uint8) uint8 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uint64(len(s.st)) <= seq {
		s.st = append(s.st, 0)
	}
	old := s.st[seq]
	s.st[seq] = old | bits
	return old
}

// partKey names a partition of one of the run's topics: the topic's
// index above the partition's 32 bits (an integer key hashes several
// times faster than a struct, once per record received).
type partKey uint64

func partKeyOf(topic uint8, partition int32) partKey {
	return partKey(topic)<<32 | partKey(uint32(partition))
}

// order is what is known of one partition's order: the highest offset
// delivered for the first time, and the highest sequence of each stream.
type order struct {
	maxOffset int64
	maxSeq    map[uint32]uint64
}

// Delivery is one record as a subscriber received it, whatever the broker.
type Delivery struct {
	// ID is the message id the broker reports; HasID is false for brokers
	// without message ids (Kafka), whose id is then only in the payload.
	ID        [16]byte
	HasID     bool
	Partition int32
	// Offset is the record's position in its partition (NATS: the stream
	// sequence).
	Offset  int64
	Payload []byte
	// At is when the subscription took the record from its client
	// library (the records of one poll share it: one clock read a poll,
	// not one a record); zero when it read no clock (the caller does).
	At time.Time
}

// Verifier keeps the books of a run: what was sent, acknowledged, failed
// and received, and what was wrong with what was received. It is safe for
// concurrent use by publishers and subscribers; a record may be delivered
// before its acknowledgement is seen.
type Verifier struct {
	streams []stream

	sent, acked, failed                           atomic.Int64
	deliveries, received, duplicates              atomic.Int64
	settled                                       atomic.Int64 // both acknowledged and received
	corrupt, unattributed, idMismatch, leaks, ooo atomic.Int64
	receivedBytes                                 atomic.Int64
	readBack                                      atomic.Int64 // acknowledged records ReadBack found

	mu    sync.Mutex
	parts map[partKey]*order // Lock: mu.
}

// NewVerifier returns a Verifier for records of streams 0..streams-1.
func NewVerifier(streams int) *Verifier {
	return &Verifier{streams: make([]stream, streams), parts: make(map[partKey]*order)}
}

// Sent records that stream's record seq is about to be published.
func (v *Verifier) Sent(stream uint32, seq uint64) {
	v.streams[stream].mark(seq, stSent)
	v.sent.Add(1)
}

// Acked records that the broker acknowledged stream's record seq.
func (v *Verifier) Acked(stream uint32, seq uint64) {
	if old := v.streams[stream].mark(seq, stAcked); old>>recvShift > 0 && old&stAcked == 0 {
		v.settled.Add(1) // it was delivered before its ack was seen
	}
	v.acked.Add(1)
}

// Failed records that publishing stream's record seq failed: the broker
// may or may not have stored it.
func (v *Verifier) Failed(stream uint32, seq uint64) {
	v.streams[stream].mark(seq, stFailed)
	v.failed.Add(1)
}

// Deliver checks one record received by the subscriber of topic index
// topic. It returns the record's header time (Unix ns) and whether this
// was its first delivery, for the caller's latency histogram.
func (v *Verifier) Deliver(topic uint8, d *Delivery) (sentAt int64, first bool) {
	v.deliveries.Add(1)
	v.receivedBytes.Add(int64(len(d.Payload)))
	h, err := decodePayload(d.Payload)
	switch {
	case errors.Is(err, errNotBench):
		v.corrupt.Add(1)
		v.unattributed.Add(1)
		return 0, false
	case err != nil:
		v.corrupt.Add(1)
	case d.HasID && d.ID != h.ID:
		v.idMismatch.Add(1)
		v.corrupt.Add(1)
	}
	if h.Topic != topic {
		v.leaks.Add(1)
	}
	if h.Stream >= uint32(len(v.streams)) {
		v.unattributed.Add(1)
		return 0, false
	}
	s := &v.streams[h.Stream]
	s.mu.Lock()
	if h.Seq >= uint64(len(s.st)) || s.st[h.Seq]&stSent == 0 {
		s.mu.Unlock()
		v.unattributed.Add(1) // a damaged header, or another run's record
		return 0, false
	}
	n := s.st[h.Seq] >> recvShift
	if n == 0 && s.st[h.Seq]&stAcked != 0 {
		v.settled.Add(1)
	}
	if n < recvMax {
		s.st[h.Seq] += 1 << recvShift
	}
	s.mu.Unlock()
	if n > 0 {
		v.duplicates.Add(1)
		return h.Time, false
	}
	v.received.Add(1)
	v.checkOrder(partKeyOf(topic, d.Partition), d.Offset, h.Stream, h.Seq)
	return h.Time, true
}

// checkOrder counts a first delivery as out of order when its offset is not
// above every offset delivered before in its partition, or its sequence is
// below one delivered before from the same stream in that partition.
// Redeliveries are not checked: they are duplicates.
func (v *Verifier) checkOrder(k partKey, offset int64, stream uint32, seq uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	o := v.parts[k]
	if o == nil {
		o = &order{maxOffset: -1, maxSeq: make(map[uint32]uint64)}
		v.parts[k] = o
	}
	last, seen := o.maxSeq[stream]
	if offset <= o.maxOffset || (seen && seq < last) {
		v.ooo.Add(1)
	}
	o.maxOffset = max(o.maxOffset, offset)
	if !seen || seq > last {
		o.maxSeq[stream] = seq
	}
}

// ReadBack checks one record of the read-back after the run (the topic
// read again from its beginning): an acknowledged record the subscribers
// never received is marked found, i.e. stored but not delivered live.
// Nothing else is counted: every record is read again, the received ones
// included, and what was wrong with them was counted when they were
// delivered. It returns whether the record was one not received.
func (v *Verifier) ReadBack(d *Delivery) bool {
	h, err := decodePayload(d.Payload)
	if err != nil || h.Stream >= uint32(len(v.streams)) || d.HasID && d.ID != h.ID {
		return false
	}
	s := &v.streams[h.Stream]
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.Seq >= uint64(len(s.st)) {
		return false
	}
	st := s.st[h.Seq]
	if st&stSent == 0 || st>>recvShift > 0 || st&stReadBack != 0 {
		return false
	}
	s.st[h.Seq] = st | stReadBack
	if st&stAcked != 0 {
		v.readBack.Add(1)
	}
	return true
}

// Outstanding returns how many acknowledged records have not been received
// yet, from the counters (no walk).
func (v *Verifier) Outstanding() int64 { return v.acked.Load() - v.settled.Load() }

// Counts is the verification outcome of a run.
type Counts struct {
	Sent       int64 `json:"sent"`
	Acked      int64 `json:"acknowledged"`
	Failed     int64 `json:"failed"`
	Unresolved int64 `json:"unresolved"` // sent, neither acknowledged nor failed
	Deliveries int64 `json:"deliveries"`
	Received   int64 `json:"received"` // distinct records
	// Lost: acknowledged, never received, and not found by the read-back
	// of the log after the run (when one ran: see ReadBackDone).
	Lost int64 `json:"lost"`
	// NotReceived: acknowledged records the subscribers did not receive
	// before the drain ended; FoundOnReadBack of them were then found in
	// the log (stored, not delivered live: not lost).
	NotReceived     int64 `json:"not_received"`
	FoundOnReadBack int64 `json:"found_on_read_back"`
	// ReadBackDone: the log was read again from the beginning to its end
	// after the run, so Lost records are proven absent. False when no
	// read-back was needed or possible, or it failed (ReadBackError).
	ReadBackDone  bool   `json:"read_back_done"`
	ReadBackError string `json:"read_back_error,omitempty"`
	Duplicates    int64  `json:"duplicates"`
	Corrupt       int64  `json:"corrupt"`
	IDMismatch    int64  `json:"id_mismatch"`
	Unattributed  int64  `json:"unattributed"` // unreadable or unknown records received
	OutOfOrder    int64  `json:"out_of_order"`
	Leaks         int64  `json:"leaks"`
	// ReceivedUnacked: received although their publish failed or was
	// never answered (at-least-once: the broker stored them anyway).
	ReceivedUnacked int64  `json:"received_unacknowledged"`
	ReceivedBytes   int64  `json:"received_bytes"`
	LostSample      []Lost `json:"lost_sample,omitempty"`
}

// Lost names one lost record.
type Lost struct {
	Stream uint32 `json:"stream"`
	Seq    uint64 `json:"seq"`
}

// Counts walks every record's state. Call it once publishers and
// subscribers have stopped.
func (v *Verifier) Counts() Counts {
	c := Counts{
		Sent: v.sent.Load(), Acked: v.acked.Load(), Failed: v.failed.Load(),
		Deliveries: v.deliveries.Load(), Received: v.received.Load(), Duplicates: v.duplicates.Load(),
		Corrupt: v.corrupt.Load(), IDMismatch: v.idMismatch.Load(), Unattributed: v.unattributed.Load(),
		OutOfOrder: v.ooo.Load(), Leaks: v.leaks.Load(), ReceivedBytes: v.receivedBytes.Load(),
	}
	for i := range v.streams {
		s := &v.streams[i]
		s.mu.Lock()
		for seq, st := range s.st {
			recv := st>>recvShift > 0
			switch {
			case st&stAcked != 0 && !recv:
				c.NotReceived++
				if st&stReadBack != 0 {
					c.FoundOnReadBack++
					break
				}
				c.Lost++
				if len(c.LostSample) < 10 {
					c.LostSample = append(c.LostSample, Lost{uint32(i), uint64(seq)})
				}
			case st&stAcked == 0 && recv:
				c.ReceivedUnacked++
			}
			if st&stSent != 0 && st&(stAcked|stFailed) == 0 {
				c.Unresolved++
			}
		}
		s.mu.Unlock()
	}
	return c
}

// since returns the time from a header time (Unix ns) to now.
func since(unixNano int64, now time.Time) time.Duration { return now.Sub(time.Unix(0, unixNano)) }
