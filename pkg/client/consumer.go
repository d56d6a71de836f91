package client

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Consumer receives the records of one topic over a Subscribe stream, as a
// member of a consumer group or on its own. It is safe for concurrent use.
//
// Delivery is at-least-once: when the stream breaks, the consumer
// reconnects with backoff (the Client's RetryPolicy bounds consecutive
// failed attempts) and subscribes again; a group member then receives the
// records after its group's committed offset again, including ones it had
// already returned from Next but not committed. A consumer without group
// resumes after the last record Next returned (exactly with one
// partition; with several it re-reads from its start position or the
// oldest last-seen timestamp and drops what it already returned).
//
// ModePerformance records (WithPerformanceRecords) carry offsets of the
// partition's in-memory ring, a sequence separate from the durable log's:
// they never count towards the consumer's progress (commits, resume,
// duplicate dropping), and Ack, Nack and Commit(msgs...) refuse them with
// ErrNotDurable.
type Consumer struct {
	c      *Client
	topic  string
	cfg    subscribeConfig
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the run goroutine exits
	dec    decoder       // owned by the reader (open, then the run goroutine)

	mu sync.Mutex
	// Lock: mu guards every field below.
	sess       *session
	queue      []queued // received, not returned by Next. Invariant: len <= 2*creditRecords.
	notify     chan struct{}
	assignment []int32
	memberID   string
	oweRecs    int32 // credit to grant back
	oweBytes   int64
	// The fields below track durable log offsets only: ModePerformance
	// records (ring offsets) never enter them.
	returned  []partOffset    // per partition, the offset after the durable records the last Next or Poll returned, not yet counted as finished
	consumed  map[int32]int64 // next offset after the finished records, per partition
	committed map[int32]int64 // next offset the broker confirmed committed
	next      map[int32]int64 // offset after the last durable record Next returned (dedup, resume)
	lastTS    map[int32]int64 // timestamp of that record
	missed    int64
	err       error // the subscription failed for good
	closed    bool
}

// partOffset is an offset of one partition.
type partOffset struct {
	partition int32
	next      int64
}

type queued struct {
	m    *Message
	cost int64 // credit bytes the record took
}

// Subscribe subscribes to topic and waits (bounded by ctx) until the broker
// accepted the subscription. The Consumer must be closed.
//
// Errors: ErrTopicNotFound, ErrPartitionNotFound, ErrInvalidArgument,
// ErrOffsetOutOfRange, ErrUnavailable.
func (c *Client) Subscribe(ctx context.Context, topic string, opts ...SubscribeOption) (*Consumer, error) {
	cfg := defaultSubscribeConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	cs := &Consumer{
		c: c, topic: topic, cfg: cfg, done: make(chan struct{}), notify: make(chan struct{}),
		consumed: map[int32]int64{}, committed: map[int32]int64{}, next: map[int32]int64{}, lastTS: map[int32]int64{},
	}
	cs.ctx, cs.cancel = context.WithCancel(context.Background())
	s, err := cs.open(ctx, cfg.start)
	if err != nil {
		cs.cancel()
		return nil, err
	}
	go cs.run(s)
	return cs, nil
}

// Next returns the next record, waiting until one arrives or ctx ends.
// The Message is the caller's. With AckAutoCommit, calling Next counts
// the record the previous Next returned as finished.
//
// Errors: ctx.Err(); ErrClosed after Close; the subscription's error once
// it failed for good (e.g. ErrTopicNotFound when the topic was deleted,
// or the last error after reconnects were used up).
func (c *Consumer) Next(ctx context.Context) (*Message, error) {
	var one [1]*Message
	ms, err := c.poll(ctx, one[:0], 1)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// Poll returns the records received and not yet returned, at most max of
// them (all of them when max <= 0), waiting until there is at least one
// or ctx ends. It is Next for many records at once (one lock per call),
// for consumers that handle records in batches. The slice and the Messages are the caller's, in
// the order Next would have returned them. With AckAutoCommit, calling
// Poll (or Next) counts every record the previous call returned as
// finished; with AckManual, Commit without messages covers every record
// Poll returned.
//
// Errors: as Next's.
func (c *Consumer) Poll(ctx context.Context, max int) ([]*Message, error) {
	return c.poll(ctx, nil, max)
}

// poll appends up to max queued records (every one when max <= 0) to
// out, waiting for at least one.
func (c *Consumer) poll(ctx context.Context, out []*Message, max int) ([]*Message, error) {
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if c.cfg.ackMode == AckAutoCommit {
			c.finishLast()
		}
		if n := len(c.queue); n > 0 {
			if max > 0 && n > max {
				n = max
			}
			qs := c.queue[:n]
			c.queue = c.queue[n:]
			out = c.handOut(qs, out)
			clear(qs)
			c.mu.Unlock()
			return out, nil
		}
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return nil, err
		}
		ch := c.notify
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
	}
}

// handOut appends the records of qs to out and records that they are
// returned: their credit is owed back, and the durable ones move each
// partition's progress (written once per run of one partition's records,
// which come in offset order). A performance record's ring offset is not
// a log offset: it changes no progress. Lock: mu must be held.
func (c *Consumer) handOut(qs []queued, out []*Message) []*Message {
	var recs int32
	var bytes int64
	for i, q := range qs {
		m := q.m
		out = append(out, m)
		recs++
		bytes += q.cost
		if !durable(m) {
			continue
		}
		if i+1 < len(qs) && qs[i+1].m.Partition == m.Partition && durable(qs[i+1].m) {
			continue // the next record of the run sets the partition's progress
		}
		c.next[m.Partition] = m.Offset + 1
		c.lastTS[m.Partition] = m.Timestamp.UnixNano()
		c.returned = append(c.returned, partOffset{m.Partition, m.Offset + 1})
	}
	c.oweCredit(recs, bytes)
	if c.cfg.ackMode != AckAutoCommit {
		c.finishLast() // manual Commit() covers every record returned
	}
	return out
}

// durable reports whether m is a record of the durable log, whose offset
// may be committed, acked or resumed from (not a ModePerformance record
// of the in-memory ring).
func durable(m *Message) bool { return m.Mode != ModePerformance }

// oweCredit grants recs/bytes back to the broker once half the credit was
// used, or at once when the buffer ran empty (so the stream never stalls
// on a small remainder). Lock: mu must be held.
func (c *Consumer) oweCredit(recs int32, bytes int64) {
	c.oweRecs += recs
	c.oweBytes += bytes
	if c.oweRecs >= c.cfg.creditRecords/2 || c.oweBytes >= c.cfg.creditBytes/2 || len(c.queue) == 0 {
		c.kick()
	}
}

// finishLast counts the records the last Next or Poll returned as
// finished. Lock: mu must be held.
func (c *Consumer) finishLast() {
	for _, r := range c.returned {
		if r.next > c.consumed[r.partition] {
			c.consumed[r.partition] = r.next
		}
	}
	c.returned = c.returned[:0]
}

// kick wakes the current session's writer. Lock: mu must be held.
func (c *Consumer) kick() {
	if c.sess != nil {
		c.sess.wake()
	}
}

// wakeWaiters wakes every Next waiting for records. Lock: mu must be held.
func (c *Consumer) wakeWaiters() {
	close(c.notify)
	c.notify = make(chan struct{})
}

// Ack acknowledges m (AckPerMessage only): the broker will not send it
// again. Acks are sent in batches by the consumer's stream writer; Ack
// does not wait for the broker. An ack made while the consumer reconnects
// is dropped (the broker redelivers the record).
//
// At most maxPendingAcks (64000) acks and nacks wait for the writer;
// beyond, Ack and Nack fail with a retriable ErrResourceExhausted.
// Errors: ErrNotDurable for a ModePerformance record (nothing to ack: the
// broker does not track it), ErrWrongAckMode, ErrClosed,
// ErrResourceExhausted.
func (c *Consumer) Ack(m *Message) error { return c.ackOrNack(m, false) }

// Nack rejects m (AckPerMessage only): the broker delivers it again (and
// to the dead-letter topic after max deliveries). Errors: as Ack.
func (c *Consumer) Nack(m *Message) error { return c.ackOrNack(m, true) }

func (c *Consumer) ackOrNack(m *Message, nack bool) error {
	if !durable(m) {
		return ErrNotDurable
	}
	if c.cfg.ackMode != AckPerMessage {
		return ErrWrongAckMode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.sess == nil {
		return nil // the new session redelivers the record
	}
	if len(c.sess.acks)+len(c.sess.nacks) >= maxPendingAcks {
		return &Error{Code: CodeResourceExhausted, Retriable: true, RetryAfter: time.Millisecond,
			Message: "too many acks waiting to be sent"}
	}
	po := &hermesv1.PartitionOffset{Topic: c.topic, Partition: m.Partition, Offset: m.Offset}
	if nack {
		c.sess.nacks = append(c.sess.nacks, po)
	} else {
		c.sess.acks = append(c.sess.acks, po)
	}
	c.kick()
	return nil
}

// Commit commits progress for the consumer's group and waits for the
// broker's answer. With msgs, it commits offset+1 of the newest given
// message of each partition; without, every durable record Next has
// returned (ModePerformance records are never committed).
//
// Errors: ErrNoGroup, ErrNotDurable when msgs holds a ModePerformance
// record (nothing is committed then), ErrNotAssigned (the partition moved
// to another member: its records will be redelivered there),
// ErrUnavailable when the stream broke before the answer (the commit may
// or may not have been applied), ctx.Err(), ErrClosed.
func (c *Consumer) Commit(ctx context.Context, msgs ...*Message) error {
	if c.cfg.group == "" {
		return ErrNoGroup
	}
	for _, m := range msgs {
		if !durable(m) {
			return ErrNotDurable
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	var offs map[int32]int64
	if len(msgs) == 0 {
		c.finishLast()
		offs = maps.Clone(c.consumed)
	} else {
		offs = map[int32]int64{}
		for _, m := range msgs {
			offs[m.Partition] = max(offs[m.Partition], m.Offset+1)
		}
	}
	c.mu.Unlock()
	return c.commit(ctx, offs)
}

// Assignment returns the partitions the consumer reads now: a group's
// current assignment, or the partitions given to WithPartitions (nil:
// all) without a group. The slice is the caller's.
func (c *Consumer) Assignment() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.group == "" {
		return slices.Clone(c.cfg.partitions)
	}
	return slices.Clone(c.assignment)
}

// MemberID returns the consumer's id in its group ("" without a group or
// between sessions).
func (c *Consumer) MemberID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.memberID
}

// Missed returns how many ModePerformance records the broker's ring
// evicted before this consumer read them.
func (c *Consumer) Missed() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.missed
}

// Close ends the subscription. With AckAutoCommit (and a group) it first
// commits the records Next returned and returns that commit's error;
// closed while the consumer is reconnecting, it cannot commit and returns
// a retriable ErrUnavailable: records returned since the last commit
// will be delivered again to the group. Acks and nacks
// queued before Close are sent before the stream is half-closed; the
// whole of Close is bounded by about 2*DefaultCloseTimeout. Close is
// idempotent; Next then returns ErrClosed.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.wakeWaiters()
	c.finishLast()
	offs := maps.Clone(c.consumed)
	auto := c.cfg.group != "" && c.cfg.ackMode == AckAutoCommit && c.err == nil
	reconnecting := c.sess == nil
	c.mu.Unlock()
	var err error
	if auto && reconnecting {
		err = &Error{Code: CodeUnavailable, Retriable: true,
			Message: "closed while reconnecting: no final commit; records returned since the last commit will be delivered again"}
	} else if auto {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
		err = c.commit(ctx, offs)
		cancel()
	}
	c.mu.Lock()
	if s := c.sess; s != nil {
		s.halfClose = true // the writer sends what is queued, then CloseSend
		s.wake()
	}
	c.mu.Unlock()
	t := time.NewTimer(DefaultCloseTimeout)
	defer t.Stop()
	select {
	case <-c.done: // the broker ended the stream after our half-close
	case <-t.C:
	}
	c.cancel()
	<-c.done
	return err
}

// isClosed reports whether Close was called.
func (c *Consumer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// commit sends offs (those above what is known committed) on the current
// stream and waits for the answer.
func (c *Consumer) commit(ctx context.Context, offs map[int32]int64) error {
	c.mu.Lock()
	s := c.sess
	var req []*hermesv1.PartitionOffset
	for p, o := range offs {
		if o > c.committed[p] {
			req = append(req, &hermesv1.PartitionOffset{Topic: c.topic, Partition: p, Offset: o})
		}
	}
	c.mu.Unlock()
	if len(req) == 0 {
		return nil
	}
	if s == nil {
		return &Error{Code: CodeUnavailable, Retriable: true, Message: "not subscribed (reconnecting)"}
	}
	return c.commitOn(ctx, s, req)
}

// resumeStart is where a consumer without group starts again after a
// broken stream: exactly after the last returned record when it reads one
// partition; else from the oldest last-seen timestamp (less a margin for
// clock skew between producers) when it started at the tail or at a time;
// else from its original start. Records already returned are dropped by
// offset (Consumer.next), so each choice may re-read but never skips.
func resumeStart(orig *hermesv1.StartPosition, partitions []int32, next, lastTS map[int32]int64) *hermesv1.StartPosition {
	if len(next) == 0 {
		return orig
	}
	if len(partitions) == 1 {
		if o, ok := next[partitions[0]]; ok {
			return &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Offset{Offset: o}}
		}
	}
	switch orig.GetPosition().(type) {
	case *hermesv1.StartPosition_Latest, *hermesv1.StartPosition_TimestampUnixNano:
		oldest := int64(0)
		for _, ts := range lastTS {
			if oldest == 0 || ts < oldest {
				oldest = ts
			}
		}
		const skew = int64(time.Minute)
		return &hermesv1.StartPosition{Position: &hermesv1.StartPosition_TimestampUnixNano{TimestampUnixNano: oldest - skew}}
	}
	return orig
}
