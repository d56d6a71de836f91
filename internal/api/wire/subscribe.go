package wire

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// sub is one subscription of a connection. Its goroutine (run) sends
// what Next delivers; with performance records, Live sends those from
// the publishers' goroutines.
type sub struct {
	id     uint32
	c      *conn
	topic  string
	group  bool
	bs     broker.Subscription
	cancel context.CancelFunc
	done   chan struct{}
	// lastBeat is when the member last heartbeated (Unix ns): frames of
	// a subscription heartbeat at most once a heartbeatEvery.
	lastBeat atomic.Int64
}

const heartbeatEvery = time.Second

func (c *conn) subscribe(h wire.Header, d *wire.Decoder) error {
	id := d.U32("sub id")
	topicID := d.U32("topic id")
	flags := d.U8("flags")
	start := d.U8("start")
	ackMode := d.U8("ack mode")
	d.Zero(1, "reserved")
	startValue := d.I64("start value")
	creditRecords := d.U32("credit records")
	creditBytes := d.U32("credit bytes")
	sessionMs := d.U32("session timeout")
	ackWaitMs := d.U32("ack wait")
	maxDeliveries := d.U32("max deliveries")
	group := d.Str(wire.MaxName, "group")
	var parts []int32
	if n := int(d.U16("partition count")); n > 0 && d.Err() == nil {
		if n*4 > d.Len() {
			d.Fail("%d partitions in %d bytes", n, d.Len())
		} else {
			parts = make([]int32, n)
			for i := range parts {
				parts[i] = d.I32("partition")
			}
		}
	}
	clientID := c.clientName
	if c.caps&wire.CapClientID != 0 {
		if id := d.Str(wire.MaxClientName, "client id"); len(id) > 0 {
			clientID = string(id)
		}
	}
	if flags&^(wire.SubPerformance|wire.SubPacked) != 0 {
		d.Fail("unknown subscribe flags %#02x", flags)
	}
	if err := d.End(); err != nil {
		return err
	}
	name, ok := c.topic(h.Corr, topicID)
	if !ok {
		return nil
	}
	invalid := func(format string, args ...any) error {
		c.answerError(h.Corr, broker.Errorf(broker.ErrInvalidArgument, format, args...))
		return nil
	}
	if id == 0 {
		return invalid("sub id 0 is reserved")
	}
	c.subsMu.Lock()
	_, taken := c.subs[id]
	open := len(c.subs)
	c.subsMu.Unlock()
	if taken {
		return invalid("sub id %d is open on this connection", id)
	}
	if open >= wire.MaxSubscriptions {
		return invalid("a connection may have at most %d subscriptions", wire.MaxSubscriptions)
	}
	opts := broker.SubscribeOptions{
		Topic: name, Group: string(group), Partitions: parts, ClientID: clientID,
		SessionTimeout:     time.Duration(sessionMs) * time.Millisecond,
		AckWait:            time.Duration(ackWaitMs) * time.Millisecond,
		MaxDeliveries:      int(min(maxDeliveries, 1<<20)),
		IncludePerformance: flags&wire.SubPerformance != 0,
		Packed:             flags&wire.SubPacked != 0,
	}
	switch start {
	case wire.StartLatest:
		opts.Start = broker.StartPosition{Kind: broker.StartLatest}
	case wire.StartEarliest:
		opts.Start = broker.StartPosition{Kind: broker.StartEarliest}
	case wire.StartOffset:
		opts.Start = broker.StartPosition{Kind: broker.StartOffset, Value: startValue}
	case wire.StartTimestamp:
		opts.Start = broker.StartPosition{Kind: broker.StartTimestamp, Value: startValue}
	default:
		return invalid("unknown start %d", start)
	}
	switch ackMode {
	case 0:
		opts.AckMode = broker.AckManual
	case 1:
		opts.AckMode = broker.AckAuto
	case 2:
		opts.AckMode = broker.AckPerMessage
	default:
		return invalid("unknown ack mode %d", ackMode)
	}
	s := &sub{id: id, c: c, topic: name, group: len(group) > 0, done: make(chan struct{})}
	if opts.IncludePerformance {
		opts.Live = s
	}
	bs, err := c.s.api.Subscribe(c.ctx, opts)
	if err != nil {
		c.answerError(h.Corr, err)
		return nil
	}
	s.bs = bs
	s.lastBeat.Store(time.Now().UnixNano())
	var ctx context.Context
	ctx, s.cancel = context.WithCancel(c.ctx)
	c.subsMu.Lock()
	c.subs[id] = s
	c.subsMu.Unlock()
	b, at := wire.BeginFrame(c.out[:0], wire.FrameSubscribed, 0, h.Corr)
	b = wire.AppendU32(b, id)
	b = wire.AppendU32(b, uint32(bs.SessionTimeout().Milliseconds()))
	b = wire.AppendStr(b, bs.MemberID())
	c.out = wire.FinishFrame(b, at)
	c.queue(c.out)
	c.markDirty(c)
	// Credit only now: nothing is delivered before SUBSCRIBED.
	bs.Grant(int(creditRecords), int64(creditBytes))
	c.subsWG.Add(1)
	go func() {
		defer c.subsWG.Done()
		s.run(ctx)
	}()
	return nil
}

// run sends what the subscription delivers until it ends.
func (s *sub) run(ctx context.Context) {
	defer close(s.done)
	c := s.c
	for {
		d, err := s.bs.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return // unsubscribed, or the connection closed
			}
			// The server ended it: say why, and forget it.
			c.subsMu.Lock()
			if c.subs[s.id] == s {
				delete(c.subs, s.id)
			}
			c.subsMu.Unlock()
			s.bs.Close()
			var tmp [256]byte
			b, at := wire.BeginFrame(tmp[:0], wire.FrameSubEnd, 0, 0)
			b = wire.AppendU32(b, s.id)
			c.queue(wire.FinishFrame(wire.AppendErrorBody(b, c.s.toWire(err, false)), at))
			c.kick()
			return
		}
		c.wmu.Lock()
		if a := d.Assignment; a != nil {
			b, at := wire.BeginFrame(c.wbuf, wire.FrameAssignment, 0, 0)
			b = wire.AppendU32(b, s.id)
			b = wire.AppendU64(b, uint64(a.Generation))
			b = wire.AppendU16(b, uint16(len(a.Partitions)))
			for _, p := range a.Partitions {
				b = wire.AppendU32(b, uint32(p))
			}
			c.wbuf = wire.FinishFrame(b, at)
		} else {
			c.wbuf = s.appendDeliver(c.wbuf, d)
		}
		c.wmu.Unlock()
		c.kick()
	}
}

// appendDeliver appends a DELIVER of d.
func (s *sub) appendDeliver(b []byte, d *broker.Delivery) []byte {
	mode, format := uint8(wire.ModeConsistent), uint8(wire.FormatRecords)
	if len(d.Batches) > 0 {
		format = wire.FormatBatch
	} else if len(d.Records) > 0 && d.Records[0].Mode == broker.ModePerformance {
		mode = wire.ModePerformance
	}
	b, at := wire.BeginFrame(b, wire.FrameDeliver, 0, 0)
	b = wire.AppendU32(b, s.id)
	b = wire.AppendU32(b, uint32(d.Partition))
	b = append(b, mode, format, 0, 0)
	b = wire.AppendU64(b, uint64(d.Missed))
	b = wire.AppendU32(b, uint32(d.Count()))
	if format == wire.FormatBatch {
		for _, bt := range d.Batches {
			b = append(b, bt...)
		}
	} else {
		for i := range d.Records {
			b = wire.AppendDelivered(b, &d.Records[i].Record, d.Records[i].DeliveryCount)
		}
	}
	return wire.FinishFrame(b, at)
}

// Live is the subscription's broker.LiveSink: it appends a DELIVER of
// performance records to the connection's output buffer, to be flushed
// by the publisher's reader at the end of its read batch (origin is that
// reader's connection) or else by this connection's writer. Records that
// follow the last DELIVER still waiting in the buffer (the same
// subscription and partition, the next offsets, nothing missed, nothing
// appended after it) extend that frame instead of starting one: the
// PUBLISHes of one read batch reach the subscriber as one DELIVER.
func (s *sub) Live(origin any, partition int32, first, missed int64, recs []record.Record) {
	c := s.c
	c.wmu.Lock()
	lf := &c.live
	var b []byte
	if lf.sub == s && lf.end == len(c.wbuf) && lf.partition == partition && lf.next == first &&
		missed == 0 && lf.end-lf.at < maxLiveFrame && lf.count+len(recs) <= wire.MaxRecords {
		b = c.wbuf
	} else {
		var at int
		b, at = wire.BeginFrame(c.wbuf, wire.FrameDeliver, 0, 0)
		b = wire.AppendU32(b, s.id)
		b = wire.AppendU32(b, uint32(partition))
		b = append(b, wire.ModePerformance, wire.FormatRecords, 0, 0)
		b = wire.AppendU64(b, uint64(missed))
		b = wire.AppendU32(b, 0) // the count, set below
		*lf = liveFrame{sub: s, at: at, partition: partition}
	}
	for i := range recs {
		r := recs[i]
		r.Offset = first + int64(i)
		b = wire.AppendDelivered(b, &r, 1)
	}
	lf.count += len(recs)
	lf.next = first + int64(len(recs))
	binary.LittleEndian.PutUint32(b[lf.at+liveCountAt:], uint32(lf.count))
	c.wbuf = wire.FinishFrame(b, lf.at)
	lf.end = len(c.wbuf)
	c.wmu.Unlock()
	if o, ok := origin.(*conn); ok && o.s == c.s {
		o.markDirty(c)
	} else {
		c.kick()
	}
}

// liveFrame is where the last DELIVER of performance records sits in a
// connection's output buffer (sub nil: none to extend). Any other frame
// appended after it, or the buffer handed to a write, ends it.
type liveFrame struct {
	sub       *sub
	at, end   int // the frame's start and end in wbuf
	partition int32
	next      int64 // the offset after its last record
	count     int
}

const (
	// liveCountAt is where a DELIVER's count sits in the frame: after
	// the header, the subscription id, the partition, mode, format and
	// reserved bytes, and missed.
	liveCountAt = wire.HeaderSize + 4 + 4 + 4 + 8
	// maxLiveFrame bounds the DELIVER Live extends.
	maxLiveFrame = 256 << 10
)

// heartbeat keeps a group member's session alive, at most once a
// heartbeatEvery.
func (s *sub) heartbeat() {
	if !s.group {
		return
	}
	now := time.Now().UnixNano()
	last := s.lastBeat.Load()
	if now-last < int64(heartbeatEvery) || !s.lastBeat.CompareAndSwap(last, now) {
		return
	}
	go s.bs.Heartbeat() // a relayed member's heartbeat is a network call
}

// lookup returns the open subscription id, or answers the error.
func (c *conn) lookup(corr uint64, id uint32) *sub {
	c.subsMu.Lock()
	s := c.subs[id]
	c.subsMu.Unlock()
	if s == nil {
		c.answerError(corr, broker.Errorf(broker.ErrInvalidArgument, "no subscription %d is open on this connection", id))
	}
	return s
}

func (c *conn) credit(h wire.Header, d *wire.Decoder) error {
	id := d.U32("sub id")
	records := d.U32("records")
	bytes := d.U32("bytes")
	if err := d.End(); err != nil {
		return err
	}
	if s := c.lookup(h.Corr, id); s != nil {
		s.heartbeat()
		s.bs.Grant(int(records), int64(bytes))
	}
	return nil
}

func (c *conn) ack(h wire.Header, d *wire.Decoder) error {
	id := d.U32("sub id")
	partition := d.I32("partition")
	n := int(d.U32("count"))
	if n < 1 || n > wire.MaxOffsets || n*8 != d.Len() {
		d.Fail("%d offsets in %d bytes (1 to %d)", n, d.Len(), wire.MaxOffsets)
	}
	var offsets []int64
	if d.Err() == nil {
		offsets = make([]int64, n)
		for i := range offsets {
			offsets[i] = d.I64("offset")
		}
	}
	if err := d.End(); err != nil {
		return err
	}
	s := c.lookup(h.Corr, id)
	if s == nil {
		return nil
	}
	s.heartbeat()
	fn := s.bs.Ack
	if h.Type == wire.FrameNack {
		fn = s.bs.Nack
	}
	if err := fn(partition, offsets); err != nil {
		c.answerError(h.Corr, err)
	}
	return nil
}

func (c *conn) commit(h wire.Header, d *wire.Decoder) error {
	id := d.U32("sub id")
	n := int(d.U32("count"))
	if n < 1 || n > wire.MaxOffsets || n*12 != d.Len() {
		d.Fail("%d offsets in %d bytes (1 to %d)", n, d.Len(), wire.MaxOffsets)
	}
	var offsets []broker.Offset
	if d.Err() == nil {
		offsets = make([]broker.Offset, n)
		for i := range offsets {
			offsets[i] = broker.Offset{Partition: d.I32("partition"), Offset: d.I64("offset")}
		}
	}
	if err := d.End(); err != nil {
		return err
	}
	s := c.lookup(h.Corr, id)
	if s == nil {
		return nil
	}
	s.heartbeat()
	for i := range offsets {
		offsets[i].Topic = s.topic
	}
	corr := h.Corr
	if err := c.acquire(c.commits); err != nil { // at most maxCommits at once
		return err
	}
	c.subsWG.Add(1)
	go func() { // a commit waits for replication: not on the reader
		defer c.subsWG.Done()
		defer func() { <-c.commits }()
		if err := s.bs.Commit(offsets); err != nil {
			c.queueError(corr, c.s.toWire(err, false))
		} else {
			c.queueOK(corr)
		}
		c.kick()
	}()
	return nil
}

func (c *conn) unsubscribe(h wire.Header, d *wire.Decoder) error {
	id := d.U32("sub id")
	if err := d.End(); err != nil {
		return err
	}
	s := c.lookup(h.Corr, id)
	if s == nil {
		return nil
	}
	c.subsMu.Lock()
	delete(c.subs, id)
	c.subsMu.Unlock()
	s.stop()
	c.queueOK(h.Corr)
	c.markDirty(c)
	return nil
}

// stop ends the subscription and waits for its goroutine: no DELIVER of
// it follows.
func (s *sub) stop() {
	s.cancel()
	s.bs.Close()
	<-s.done
}

func (c *conn) queueOK(corr uint64) {
	var tmp [wire.HeaderSize]byte
	b, at := wire.BeginFrame(tmp[:0], wire.FrameOK, 0, corr)
	c.queue(wire.FinishFrame(b, at))
}

// closeSubs ends every subscription of the connection, when it closes.
func (c *conn) closeSubs() {
	c.subsMu.Lock()
	subs := make([]*sub, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	clear(c.subs)
	c.subsMu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	c.subsWG.Wait()
}

var _ broker.LiveSink = (*sub)(nil)
