package wire

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hermes-mq/hermes/pkg/record"
)

// SubscribeOptions configure a subscription.
type SubscribeOptions struct {
	// Topic is an opened topic's id.
	Topic uint32
	// Group makes the subscriber a member of a consumer group ("": a
	// plain subscriber of Partitions, all when empty); ClientID names the
	// member in the group's description (default: the client's name).
	Group      string
	ClientID   string
	Partitions []int32
	// Start is where to start (StartLatest, StartEarliest, StartOffset,
	// StartTimestamp) and StartValue the offset or Unix nanoseconds.
	Start      uint8
	StartValue int64
	// AckMode for a group: 0 manual commits, 1 auto, 2 per-message acks.
	AckMode uint8
	// Performance: live performance records too. Packed: durable
	// records as whole batches (decoded by Next all the same).
	Performance bool
	Packed      bool
	// Credit is how many records may be sent before the subscriber has
	// consumed them (default 1000); the Subscription grants more as
	// Next hands records out, or as Handler returns. CreditBytes bounds
	// bytes too (0: no byte bound).
	Credit      int
	CreditBytes int
	// SessionTimeoutMs, AckWaitMs and MaxDeliveries (per-message acks:
	// then to the dead-letter topic): 0 for the node's defaults.
	SessionTimeoutMs, AckWaitMs, MaxDeliveries uint32
	// Handler, when set, is called with each delivery on the
	// connection's reader goroutine (the lowest latency; it must not
	// block), instead of Next.
	Handler func(*Delivery)
	// ManualCredit: the Subscription grants no credit of its own; the
	// caller grants it (Grant) as it consumes.
	ManualCredit bool
	// RawBatches: packed deliveries keep their batches as they came
	// (Delivery.Batches) instead of being decoded into Records.
	RawBatches bool
	// OnEnd, when set, is called once when the subscription ends (the
	// server ended it, the connection failed, or Close), with why.
	OnEnd func(error)
}

// Delivery is an ASSIGNMENT or a DELIVER.
type Delivery struct {
	// Assignment is set (and Generation) when a member's partitions
	// changed.
	Assignment []int32
	Generation int64

	Partition int32
	// Mode is ModeConsistent for durable records, ModePerformance for
	// ring records.
	Mode uint8
	// Missed counts performance records lost before these.
	Missed int64
	// Records carry their offsets; DeliveryCounts their delivery count.
	Records        []record.Record
	DeliveryCounts []int
	// Batches are the packed batches of the delivery, undecoded, with
	// SubscribeOptions.RawBatches (Records is then empty).
	Batches [][]byte
}

// Subscription is one subscription of a Client.
type Subscription struct {
	c        *Client
	id       uint32
	MemberID string
	// SessionTimeoutMs is the group session timeout in force.
	SessionTimeoutMs uint32

	handler func(*Delivery)
	credit  int
	manual  bool // ManualCredit
	raw     bool // RawBatches
	onEnd   func(error)
	// consumed counts records handed out since credit was last granted.
	mu       sync.Mutex
	queue    []*Delivery
	ready    chan struct{}
	consumed int
	err      error // why it ended
}

// Subscribe opens a subscription.
func (c *Client) Subscribe(ctx context.Context, o SubscribeOptions) (*Subscription, error) {
	if o.Credit <= 0 {
		o.Credit = 1000
	}
	if o.RawBatches && !o.ManualCredit {
		return nil, errors.New("hermes-wire: RawBatches needs ManualCredit (the subscription cannot count the records of undecoded batches)")
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextSub++
	s := &Subscription{c: c, id: c.nextSub, handler: o.Handler, credit: o.Credit, ready: make(chan struct{}, 1),
		manual: o.ManualCredit, raw: o.RawBatches, onEnd: o.OnEnd}
	c.subs[s.id] = s // deliveries may follow SUBSCRIBED at once
	c.mu.Unlock()
	corr := c.nextCorr()
	b, at := BeginFrame(nil, FrameSubscribe, 0, corr)
	b = AppendU32(b, s.id)
	b = AppendU32(b, o.Topic)
	flags := uint8(0)
	if o.Performance {
		flags |= SubPerformance
	}
	if o.Packed {
		flags |= SubPacked
	}
	b = append(b, flags, o.Start, o.AckMode, 0)
	b = AppendU64(b, uint64(o.StartValue))
	b = AppendU32(b, uint32(o.Credit))
	b = AppendU32(b, uint32(o.CreditBytes))
	b = AppendU32(b, o.SessionTimeoutMs)
	b = AppendU32(b, o.AckWaitMs)
	b = AppendU32(b, o.MaxDeliveries)
	b = AppendStr(b, o.Group)
	b = AppendU16(b, uint16(len(o.Partitions)))
	for _, p := range o.Partitions {
		b = AppendU32(b, uint32(p))
	}
	if c.caps&CapClientID != 0 {
		b = AppendStr(b, o.ClientID)
	}
	h, body, err := c.request(ctx, FinishFrame(b, at), corr)
	if err == nil && h.Type != FrameSubscribed {
		err = fmt.Errorf("hermes-wire: SUBSCRIBE answered with frame type %#02x", h.Type)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.subs, s.id)
		c.mu.Unlock()
		return nil, err
	}
	d := NewDecoder(body)
	d.U32("sub id")
	s.SessionTimeoutMs = d.U32("session timeout")
	s.MemberID = string(d.Str(1<<16-1, "member id"))
	if err := d.End(); err != nil {
		return nil, err
	}
	return s, nil
}

// push takes a pushed frame of the subscription (on the reader
// goroutine).
func (s *Subscription) push(typ uint8, d *Decoder) error {
	switch typ {
	case FrameSubEnd:
		s.end(d.ErrorBody())
		return d.End()
	case FrameAssignment:
		dl := &Delivery{Generation: d.I64("generation")}
		n := int(d.U16("count"))
		if n*4 != d.Len() {
			d.Fail("%d partitions in %d bytes", n, d.Len())
		}
		dl.Assignment = make([]int32, 0, n)
		for range n {
			dl.Assignment = append(dl.Assignment, d.I32("partition"))
		}
		if err := d.End(); err != nil {
			return err
		}
		s.deliver(dl)
		return nil
	}
	dl := &Delivery{Partition: d.I32("partition"), Mode: d.U8("mode")}
	format := d.U8("format")
	d.Zero(2, "reserved")
	dl.Missed = int64(d.U64("missed"))
	n := int(d.U32("count"))
	if d.Err() != nil {
		return d.Err()
	}
	switch format {
	case FormatRecords:
		if n > d.Len()/8 {
			return fmt.Errorf("%w: %d records in %d bytes", errMalformed, n, d.Len())
		}
		dl.Records = make([]record.Record, n)
		dl.DeliveryCounts = make([]int, n)
		for i := range n {
			dl.DeliveryCounts[i] = d.Delivered(&dl.Records[i])
		}
		if err := d.End(); err != nil {
			return err
		}
	case FormatBatch:
		if s.raw {
			dl.Batches = splitBatches(d.Rest())
			break
		}
		for _, bt := range splitBatches(d.Rest()) {
			recs, err := record.DecodeRecords(nil, bt)
			if err != nil {
				return fmt.Errorf("%w: %v", errMalformed, err)
			}
			h, _ := record.ParseHeader(bt)
			if h.Control() {
				continue
			}
			for range recs {
				dl.DeliveryCounts = append(dl.DeliveryCounts, 1)
			}
			dl.Records = append(dl.Records, recs...)
		}
	default:
		return fmt.Errorf("%w: DELIVER format %d", errMalformed, format)
	}
	s.deliver(dl)
	return nil
}

// splitBatches cuts concatenated packed batches apart.
func splitBatches(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := 4 + int(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24)
		if n > len(b) {
			break
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out
}

func (s *Subscription) deliver(d *Delivery) {
	if s.handler != nil {
		s.handler(d)
		s.consumedRecords(len(d.Records))
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, d)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// consumedRecords grants credit back once half of it was consumed
// (unless the caller grants it: ManualCredit).
func (s *Subscription) consumedRecords(n int) {
	if n == 0 || s.manual {
		return
	}
	s.mu.Lock()
	s.consumed += n
	grant := 0
	if s.consumed >= (s.credit+1)/2 {
		grant, s.consumed = s.consumed, 0
	}
	s.mu.Unlock()
	if grant > 0 {
		s.Grant(grant, 0)
	}
}

// Grant gives the server credit for more records (and bytes).
func (s *Subscription) Grant(records, bytes int) error {
	var tmp [HeaderSize + 12]byte
	b, at := BeginFrame(tmp[:0], FrameCredit, 0, s.c.nextCorr())
	b = AppendU32(b, s.id)
	b = AppendU32(b, uint32(records))
	b = AppendU32(b, uint32(bytes))
	return s.c.send(FinishFrame(b, at), 0, nil)
}

// Next returns the next delivery (not with a Handler). It fails when
// the subscription or the connection ends, or ctx does.
func (s *Subscription) Next(ctx context.Context) (*Delivery, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			d := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.mu.Unlock()
			s.consumedRecords(len(d.Records))
			return d, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Subscription) end(err error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = err
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
	if first && s.onEnd != nil {
		s.onEnd(err)
	}
}

// Ack acknowledges records of a partition (per-message ack mode); Nack
// asks for them again. Errors come back asynchronously and are dropped:
// unacknowledged records are delivered again.
func (s *Subscription) Ack(partition int32, offsets []int64) error {
	return s.ackFrame(FrameAck, partition, offsets)
}

func (s *Subscription) Nack(partition int32, offsets []int64) error {
	return s.ackFrame(FrameNack, partition, offsets)
}

func (s *Subscription) ackFrame(typ uint8, partition int32, offsets []int64) error {
	b, at := BeginFrame(nil, typ, 0, s.c.nextCorr())
	b = AppendU32(b, s.id)
	b = AppendU32(b, uint32(partition))
	b = AppendU32(b, uint32(len(offsets)))
	for _, o := range offsets {
		b = AppendU64(b, uint64(o))
	}
	return s.c.send(FinishFrame(b, at), 0, nil)
}

// Commit commits a group's offsets (the next offset to consume, per
// partition) and waits until they are durable.
func (s *Subscription) Commit(ctx context.Context, offsets map[int32]int64) error {
	corr := s.c.nextCorr()
	b, at := BeginFrame(nil, FrameCommit, 0, corr)
	b = AppendU32(b, s.id)
	b = AppendU32(b, uint32(len(offsets)))
	for p, o := range offsets {
		b = AppendU32(b, uint32(p))
		b = AppendU64(b, uint64(o))
	}
	h, _, err := s.c.request(ctx, FinishFrame(b, at), corr)
	if err == nil && h.Type != FrameOK {
		err = fmt.Errorf("hermes-wire: COMMIT answered with frame type %#02x", h.Type)
	}
	return err
}

// Close ends the subscription (a group member leaves its group).
func (s *Subscription) Close(ctx context.Context) error {
	corr := s.c.nextCorr()
	b, at := BeginFrame(nil, FrameUnsubscribe, 0, corr)
	_, _, err := s.c.request(ctx, FinishFrame(AppendU32(b, s.id), at), corr)
	s.c.mu.Lock()
	delete(s.c.subs, s.id)
	s.c.mu.Unlock()
	s.end(ErrClosed)
	return err
}
