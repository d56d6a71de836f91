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
	// Forwarded marks a group subscription another node relayed here to
	// its coordinator: served here or refused, never relayed again.
	Forwarded bool
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

// Delivery is what one Poll returns: an assignment change, or records of
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

// Count is the number of records in d.
func (d *Delivery) Count() int {
	n := len(d.Records)
	for _, bt := range d.Batches {
		if h, err := record.ParseBatch(bt); err == nil {
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

// Subscription is one subscriber's session. Poll is called by one
// goroutine; Ack, Nack, Commit, Heartbeat and Close may be called from
// others.
type Subscription struct {
	b        *Broker
	t        *topic
	opts     SubscribeOptions
	memberID string
	gs       *groupState // nil without a group
	// remote is set when the group's coordinator is another node, which
	// then serves this subscription (coordinator.go).
	remote *remoteSub

	// mu guards the fields below. Lock order: groupManager.mu before mu.
	mu         sync.Mutex
	cursors    map[int32]int64 // next durable offset to deliver, per owned partition
	ring       map[int32]int64 // next ring offset, per owned partition
	owned      []int32         // sorted
	rr         int             // round-robin position in owned
	generation int64
	announce   bool  // an assignment change not yet returned by Poll
	ended      error // why the session ended, once it has
	wake       chan struct{}
}

// Subscribe opens a subscription. With a group, the caller becomes a member
// and gets partitions assigned; close it to leave.
func (b *Broker) Subscribe(opts SubscribeOptions) (*Subscription, error) {
	t, err := b.topic(opts.Topic)
	if err != nil {
		return nil, err
	}
	if err := validateSubscribe(t, &opts); err != nil {
		return nil, err
	}
	s := &Subscription{
		b: b, t: t, opts: opts, wake: make(chan struct{}, 1),
		cursors: make(map[int32]int64), ring: make(map[int32]int64),
	}
	if err := b.register(s); err != nil {
		return nil, err
	}
	if opts.Group != "" {
		local, addr, err := b.coordinator()
		switch {
		case err == nil && !local && opts.Forwarded:
			err = b.notCoordinator()
		case err == nil && !local:
			err = b.subscribeRemote(s, addr)
		}
		if err != nil || !local {
			if err != nil {
				b.unregister(s)
				return nil, err
			}
			return s, nil
		}
	}
	if err := b.openSubscription(s); err != nil {
		b.unregister(s)
		return nil, err
	}
	return s, nil
}

func (b *Broker) openSubscription(s *Subscription) error {
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
		if start, hw, err = b.remoteOffsets(p); err != nil {
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
func (s *Subscription) addPartition(pid int32, offset int64) {
	s.cursors[pid] = offset
	s.ring[pid] = s.t.partitions()[pid].ring.End()
	if i, found := slices.BinarySearch(s.owned, pid); !found {
		s.owned = slices.Insert(s.owned, i, pid)
	}
}

// removePartition stops delivering pid. Lock: s.mu held.
func (s *Subscription) removePartition(pid int32) {
	delete(s.cursors, pid)
	delete(s.ring, pid)
	if i, found := slices.BinarySearch(s.owned, pid); found {
		s.owned = slices.Delete(s.owned, i, i+1)
	}
}

// MemberID is the group member id ("" without a group).
func (s *Subscription) MemberID() string { return s.memberID }

// Coordinator is, for a group member this node relays to the group's
// coordinator, the coordinator's gRPC address; "" otherwise.
func (s *Subscription) Coordinator() string {
	if s.remote != nil {
		return s.remote.addr
	}
	return ""
}

// SessionTimeout is the group session timeout in force.
func (s *Subscription) SessionTimeout() time.Duration {
	if s.remote != nil {
		return s.remote.timeout
	}
	if s.gs == nil {
		return 0
	}
	return s.b.groups.sessionTimeout(s)
}

func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end finishes the session with err (first reason wins) and wakes Poll.
// Lock: s.mu held.
func (s *Subscription) end(err error) {
	if s.ended == nil {
		s.ended = err
	}
	s.signal()
}

// Close ends the subscription; a group member leaves its group and its
// partitions move to the other members.
func (s *Subscription) Close() {
	s.mu.Lock()
	s.end(errorf(ErrUnavailable, "subscription closed"))
	s.mu.Unlock()
	if s.remote != nil {
		s.remote.close()
	}
	if s.gs != nil {
		s.b.groups.leave(s)
	}
	s.b.unregister(s)
}

// Heartbeat keeps a group member's session alive.
func (s *Subscription) Heartbeat() error {
	if s.remote != nil {
		return s.remote.heartbeat()
	}
	if s.gs == nil {
		return nil
	}
	return s.b.groups.heartbeat(s)
}

// Poll waits for the next delivery: an assignment change, or records of
// one partition (at most maxRecords records and about maxBytes bytes; at
// least one record when one is ready). It returns the reason when the
// session ends (closed, expired, topic deleted) or ctx is done.
func (s *Subscription) Poll(ctx context.Context, maxRecords int, maxBytes int) (*Delivery, error) {
	if maxRecords <= 0 {
		return nil, errorf(ErrInvalidArgument, "poll needs credit for at least one record")
	}
	if s.remote != nil {
		return s.remote.poll(ctx, s, maxRecords)
	}
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
func (s *Subscription) pollOnce(maxRecords, maxBytes int) (*Delivery, time.Duration, error) {
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
	if d == nil && err == nil && s.readsRemote() && (wait == 0 || wait > remotePollInterval) {
		wait = remotePollInterval // no local commit wakes it for those
	}
	return d, wait, err
}

// readsRemote reports whether s owns a partition without a local replica.
func (s *Subscription) readsRemote() bool {
	parts := s.t.partitions()
	s.mu.Lock() // owned changes in place (removePartition)
	defer s.mu.Unlock()
	for _, pid := range s.owned {
		if parts[pid].remote {
			return true
		}
	}
	return false
}
