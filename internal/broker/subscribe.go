package broker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/pkg/record"
)

// AckMode is how a group subscription's progress is recorded.
type AckMode uint8

const (
	// AckManual: the client commits offsets. Without a group: nothing is tracked.
	AckManual AckMode = iota
	// AckAuto: an offset counts as committed once its record is sent
	// (at-most-once on a crash between send and processing).
	AckAuto
	// AckPerMessage: each record is acked; unacked ones are sent again after
	// AckWait, and after MaxDeliveries go to the dead-letter topic.
	AckPerMessage
)

// StartKind selects where a subscription starts reading.
type StartKind uint8

const (
	StartLatest StartKind = iota
	StartEarliest
	StartOffset
	StartTimestamp
)

// StartPosition is where a subscription starts; for a group, only on
// partitions where the group has committed nothing.
type StartPosition struct {
	Kind  StartKind
	Value int64 // the offset, or Unix nanoseconds
}

// SubscribeOptions configure a subscription.
type SubscribeOptions struct {
	Topic string
	// Group is empty for a plain subscriber of Partitions (all when empty).
	Group      string
	Partitions []int32
	Start      StartPosition
	AckMode    AckMode
	ClientID   string
	// Per-message ack bounds (group.TrackerConfig defaults when zero).
	AckWait         time.Duration
	MaxDeliveries   int
	MaxAckPending   int
	DeadLetterTopic string // default "<topic>.dlq"
	SessionTimeout  time.Duration
	// IncludePerformance delivers performance-mode records too, live from
	// the ring of each partition read.
	IncludePerformance bool
	// Packed delivers durable records as whole batches where possible.
	Packed bool
	// Live, with IncludePerformance, receives the performance records
	// as they are published, on the publisher's goroutine, instead of
	// through Next (live.go). Only a subscription this node serves uses
	// it; one relayed to another node's coordinator delivers them
	// through Next.
	Live LiveSink
}

// DeliveredRecord is a record as delivered, with where it comes from.
type DeliveredRecord struct {
	record.Record
	Partition int32
	// Mode is ModePerformance for ring records (ring offsets), else
	// ModeConsistent (durable log offsets).
	Mode Mode
	// DeliveryCount is 1 on first delivery; more on redelivery.
	DeliveryCount int
}

// Delivery is what one Next returns: an assignment change, or records of
// one partition.
type Delivery struct {
	// Assignment is set when the member's partitions changed.
	Assignment *Assignment
	Partition  int32
	// Batches are packed durable records (read-only, shared with caches),
	// trimmed to the offsets delivered.
	Batches [][]byte
	Records []DeliveredRecord
	// Missed counts performance records evicted before this reader got them.
	Missed int64
}

// Size is the byte credit d spends: the length of each batch, and
// record.CreditBytes of each record.
func (d *Delivery) Size() int64 {
	var n int64
	for _, bt := range d.Batches {
		n += int64(len(bt))
	}
	for i := range d.Records {
		n += record.CreditBytes(&d.Records[i].Record)
	}
	return n
}

// Count is the number of records in d.
func (d *Delivery) Count() int {
	n := len(d.Records)
	for _, bt := range d.Batches {
		if h, err := record.ParseHeader(bt); err == nil { // checked when read
			n += int(h.RecordCount)
		}
	}
	return n
}

// Assignment is a group member's current partitions.
type Assignment struct {
	Topic      string
	Partitions []int32
	Generation int64
}

// Subscription is one subscriber's session: a group member's, or a plain
// subscriber's of chosen partitions. It delivers within the credit its
// subscriber granted (credit-based flow control): Next never returns more
// records, or more bytes (Delivery.Size), than were granted and not yet
// spent, except that one delivery of at least one record is let through
// when some byte credit is left, however large the record.
//
// Next is called by one goroutine; Grant, Ack, Nack, Commit, Heartbeat
// and Close may be called from others. A group member's session may live
// on another node (the group's coordinator): the Subscription then relays
// to it and behaves the same.
type Subscription interface {
	// MemberID is the group member id ("" without a group).
	MemberID() string
	// SessionTimeout is the group session timeout in force (0 without a
	// group): the member must call Heartbeat (or Next) more often.
	SessionTimeout() time.Duration
	// Coordinator is, for a group member this node relays to the group's
	// coordinator, the coordinator's gRPC address; "" otherwise.
	Coordinator() string
	// Grant adds credit: records and bytes more may be delivered. Before
	// any byte credit is granted, deliveries are bounded by records only
	// (and MaxDeliveryBytes each).
	Grant(records int, bytes int64)
	// Next waits for the next delivery within credit: an assignment
	// change (which spends none), or records of one partition. It fails
	// when the session ends (ErrUnavailable when closed or the broker
	// stops, ErrUnknownMember when the group session expired,
	// ErrTopicNotFound when the topic was deleted; retriable ErrUnavailable
	// naming the new coordinator when coordination moved) or ctx ends.
	Next(ctx context.Context) (*Delivery, error)
	// Ack acknowledges records of a partition (per-message ack mode):
	// ErrInvalidArgument for offsets not awaiting an ack, ErrNotAssigned
	// for a partition the member does not own.
	Ack(partition int32, offsets []int64) error
	// Nack asks for records to be delivered again now.
	Nack(partition int32, offsets []int64) error
	// Commit commits offsets (the next offset to consume) for partitions
	// the member owns; durable (replicated) when it returns nil.
	Commit(offsets []Offset) error
	// Heartbeat keeps a group member's session alive.
	Heartbeat() error
	// Close ends the subscription; a group member leaves its group and its
	// partitions move to the other members.
	Close()
}

// MaxDeliveryBytes bounds one delivery, about: a delivery holds at least
// one record or batch, however large.
const MaxDeliveryBytes = 4 << 20

// maxDeliveryRecords bounds the records of one delivery.
const maxDeliveryRecords = 1 << 20

// credit is what a subscription may still deliver. Lock: its owner's mu.
type credit struct {
	records int64
	// bytes is the byte credit left once byteLimited (it may go negative:
	// one delivery of at least one record is always allowed).
	bytes       int64
	byteLimited bool
}

func (c *credit) grant(records int, bytes int64) {
	c.records += int64(max(records, 0))
	if bytes > 0 {
		c.byteLimited = true
		c.bytes += bytes
	}
}

// limits returns the bounds of the next delivery; ok false when there is
// no credit.
func (c *credit) limits() (records, bytes int, ok bool) {
	if c.records <= 0 || c.byteLimited && c.bytes <= 0 {
		return 0, 0, false
	}
	bytes = MaxDeliveryBytes
	if c.byteLimited && c.bytes < int64(bytes) {
		bytes = int(c.bytes)
	}
	return int(min(c.records, maxDeliveryRecords)), bytes, true
}

func (c *credit) spend(d *Delivery) {
	if d.Assignment != nil {
		return
	}
	c.records -= int64(d.Count())
	if c.byteLimited { // bytes spent before any byte grant count against none
		c.bytes -= d.Size()
	}
}

// localSub is a subscription served by this node: a plain subscriber, or
// a member of a group this node coordinates.
type localSub struct {
	b        *Broker
	t        *topic
	opts     SubscribeOptions
	memberID string
	gs       *groupState // nil without a group
	// principal opened the subscription; the broker acts as it on the
	// subscription's behalf (dead-lettering).
	principal Principal

	// mu guards the fields below. Lock order: groupManager.mu before mu.
	mu         sync.Mutex
	cursors    map[int32]int64 // next durable offset to deliver, per owned partition
	ring       map[int32]int64 // next ring offset, per owned partition
	owned      []int32         // sorted
	rr         int             // round-robin position in owned
	generation int64
	announce   bool  // an assignment change not yet returned by Next
	ended      error // why the session ended, once it has
	credit     credit
	// sent is, for an auto-committing member, the offset after its last
	// delivery of each partition: committed at its next Next.
	sent map[int32]int64
	wake chan struct{}
	// liveBuf is reused by liveCatchUp.
	liveBuf   []record.Record
	closeOnce sync.Once
}

// Subscribe opens a subscription. With a group, the caller becomes a
// member and gets partitions assigned (at the group's coordinator, which
// may be another node); close it to leave. Errors: ErrTopicNotFound,
// ErrPartitionNotFound, ErrInvalidArgument and ErrInvalidTopicName for
// bad options, ErrOffsetOutOfRange for a start offset outside the log,
// retriable ErrResourceExhausted when MaxSubscriptions are open and
// ErrUnavailable while there is no coordinator.
func (b *Broker) Subscribe(ctx context.Context, opts SubscribeOptions) (Subscription, error) {
	if err := b.authorize(ctx, ActionRead, topicResource(opts.Topic)); err != nil {
		return nil, err
	}
	if opts.Group != "" {
		if err := b.authorize(ctx, ActionRead, groupResource(opts.Group)); err != nil {
			return nil, err
		}
		local, node, err := b.coordinator()
		if err != nil {
			return nil, err
		}
		if !local {
			t, err := b.topic(opts.Topic)
			if err != nil {
				return nil, err
			}
			if err := validateSubscribe(t, &opts); err != nil {
				return nil, err
			}
			return b.subscribeRemote(ctx, opts, node)
		}
	}
	return b.subscribeHere(PrincipalFrom(ctx), opts)
}

// subscribeHere opens a subscription served by this node (for a group:
// this node coordinates groups).
func (b *Broker) subscribeHere(principal Principal, opts SubscribeOptions) (*localSub, error) {
	t, err := b.topic(opts.Topic)
	if err != nil {
		return nil, err
	}
	if err := validateSubscribe(t, &opts); err != nil {
		return nil, err
	}
	s := &localSub{
		b: b, t: t, opts: opts, principal: principal, wake: make(chan struct{}, 1),
		cursors: make(map[int32]int64), ring: make(map[int32]int64),
	}
	if err := b.register(s); err != nil {
		return nil, err
	}
	if err := b.openSubscription(s); err != nil {
		b.unregister(s)
		return nil, err
	}
	t.addLive(s)
	return s, nil
}

func (b *Broker) openSubscription(s *localSub) error {
	opts, t := s.opts, s.t
	if opts.Group == "" {
		parts := opts.Partitions
		if len(parts) == 0 {
			for i := range t.partitions() {
				parts = append(parts, int32(i))
			}
		}
		for _, pid := range parts {
			start, err := b.resolveStart(t.partitions()[pid], opts.Start)
			if err != nil {
				return err
			}
			s.addPartition(pid, start)
		}
		return nil
	}
	s.memberID = uuid.Must(uuid.NewV7()).String()
	return b.groups.join(s)
}

func validateSubscribe(t *topic, o *SubscribeOptions) error {
	if o.Group != "" {
		if err := ValidateName("group", o.Group); err != nil {
			return err
		}
		if len(o.Partitions) > 0 {
			return errorf(ErrInvalidArgument, "a group member gets partitions assigned; do not name partitions")
		}
	} else if o.AckMode != AckManual {
		return errorf(ErrInvalidArgument, "ack modes other than manual need a group")
	}
	if o.Live != nil && !o.IncludePerformance {
		return errorf(ErrInvalidArgument, "a live sink receives performance records: it needs IncludePerformance")
	}
	seen := make(map[int32]bool)
	for _, p := range o.Partitions {
		if _, err := t.partition(p); err != nil {
			return err
		}
		if seen[p] {
			return errorf(ErrInvalidArgument, "partition %d named twice", p)
		}
		seen[p] = true
	}
	if o.Start.Kind == StartOffset && o.Start.Value < 0 {
		return errorf(ErrInvalidArgument, "start offset must not be negative, got %d", o.Start.Value)
	}
	if o.AckWait < 0 || o.SessionTimeout < 0 || o.MaxAckPending < 0 || o.MaxAckPending > 100000 {
		return errorf(ErrInvalidArgument, "ack wait, session timeout and max ack pending (at most 100000) must not be negative")
	}
	if o.DeadLetterTopic == "" {
		o.DeadLetterTopic = t.name + ".dlq"
	}
	if o.DeadLetterTopic == t.name {
		return errorf(ErrInvalidArgument, "the dead-letter topic must differ from the topic")
	}
	return ValidateName("dead-letter topic", o.DeadLetterTopic)
}

// resolveStart turns a start position into an offset of p.
func (b *Broker) resolveStart(p *partition, sp StartPosition) (int64, error) {
	start, hw := p.offsets()
	if p.remote {
		var err error
		if start, hw, _, err = b.remoteOffsets(p, false, 0); err != nil {
			return 0, err
		}
	}
	switch sp.Kind {
	case StartEarliest:
		return start, nil
	case StartOffset:
		if sp.Value < start || sp.Value > hw {
			return 0, errorf(ErrOffsetOutOfRange, "start offset %d is outside [%d, %d] of %s/%d", sp.Value, start, hw, p.t.name, p.id)
		}
		return sp.Value, nil
	case StartTimestamp:
		return p.offsetForTime(sp.Value)
	}
	return hw, nil
}

// addPartition starts delivering pid from offset. Lock: s.mu held or s
// not yet shared.
func (s *localSub) addPartition(pid int32, offset int64) {
	s.cursors[pid] = offset
	s.ring[pid] = s.t.partitions()[pid].ring.End()
	if i, found := slices.BinarySearch(s.owned, pid); !found {
		s.owned = slices.Insert(s.owned, i, pid)
	}
}

// removePartition stops delivering pid. Lock: s.mu held.
func (s *localSub) removePartition(pid int32) {
	delete(s.cursors, pid)
	delete(s.ring, pid)
	if i, found := slices.BinarySearch(s.owned, pid); found {
		s.owned = slices.Delete(s.owned, i, i+1)
	}
}

func (s *localSub) MemberID() string    { return s.memberID }
func (s *localSub) Coordinator() string { return "" }

func (s *localSub) SessionTimeout() time.Duration {
	if s.gs == nil {
		return 0
	}
	return s.b.groups.sessionTimeout(s)
}

func (s *localSub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end finishes the session with err (first reason wins) and wakes Next.
// Lock: s.mu held.
func (s *localSub) end(err error) {
	if s.ended == nil {
		s.ended = err
	}
	s.signal()
}

// terminate ends the session with err from outside (the broker stops).
func (s *localSub) terminate(err error) {
	s.mu.Lock()
	s.end(err)
	s.mu.Unlock()
}

func (s *localSub) Close() {
	s.terminate(errorf(ErrUnavailable, "subscription closed"))
	if s.gs != nil {
		s.b.groups.leave(s)
	}
	s.b.unregister(s)
	s.closeOnce.Do(func() { s.t.removeLive(s) })
}

func (s *localSub) Heartbeat() error {
	if s.gs == nil {
		return nil
	}
	return s.b.groups.heartbeat(s)
}

func (s *localSub) Grant(records int, bytes int64) {
	s.mu.Lock()
	s.credit.grant(records, bytes)
	s.mu.Unlock()
	s.signal()
}

func (s *localSub) Next(ctx context.Context) (*Delivery, error) {
	if s.gs != nil && s.opts.AckMode == AckAuto {
		s.b.groups.commitSent(s)
	}
	for {
		s.mu.Lock()
		ended := s.ended
		records, bytes, ok := s.credit.limits()
		s.mu.Unlock()
		if ended != nil {
			return nil, ended
		}
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := s.b.readDebt(ctx, s.principal.Name); err != nil {
			return nil, err
		}
		d, err := s.poll(ctx, records, bytes)
		if err != nil {
			return nil, err
		}
		if tr := s.b.cfg.Tracer; tr != nil && d.Assignment == nil {
			s.traceDelivery(tr, d)
		}
		s.mu.Lock()
		s.credit.spend(d)
		s.mu.Unlock()
		s.b.chargeRead(s.principal.Name, d.Batches)
		return d, nil
	}
}

// poll waits for the next delivery: an assignment change, or records of
// one partition (at most maxRecords records and about maxBytes bytes; at
// least one record when one is ready). It returns the reason when the
// session ends (closed, expired, topic deleted) or ctx is done.
func (s *localSub) poll(ctx context.Context, maxRecords int, maxBytes int) (*Delivery, error) {
	for {
		changed := s.t.changed()
		d, wait, err := s.pollOnce(maxRecords, maxBytes)
		if err != nil || d != nil {
			return d, err
		}
		var timer <-chan time.Time
		var tm *time.Timer
		if wait > 0 {
			tm = time.NewTimer(wait)
			timer = tm.C
		}
		select {
		case <-changed:
		case <-s.wake:
		case <-timer:
		case <-s.t.deleted:
			s.mu.Lock()
			s.end(errorf(ErrTopicNotFound, "topic %q was deleted", s.t.name))
			s.mu.Unlock()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if tm != nil {
			tm.Stop()
		}
	}
}

// pollOnce returns a delivery if one is ready, else how long to wait at
// most (0: until woken).
func (s *localSub) pollOnce(maxRecords, maxBytes int) (*Delivery, time.Duration, error) {
	s.mu.Lock()
	if s.ended != nil {
		err := s.ended
		s.mu.Unlock()
		return nil, 0, err
	}
	if s.announce {
		s.announce = false
		a := &Assignment{Topic: s.t.name, Partitions: slices.Clone(s.owned), Generation: s.generation}
		s.mu.Unlock()
		return &Delivery{Assignment: a}, 0, nil
	}
	s.mu.Unlock()
	var wait time.Duration
	if s.gs != nil && s.opts.AckMode == AckPerMessage {
		d, w, err := s.b.groups.redeliver(s, maxRecords)
		if d != nil || err != nil {
			return d, 0, err
		}
		wait = w
	}
	d, err := s.pollNew(maxRecords, maxBytes)
	return d, wait, err
}
