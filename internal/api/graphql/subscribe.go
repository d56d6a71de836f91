package graphql

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Subscription bounds.
const (
	// eventBuffer is how many events wait for one subscriber. The broker is
	// polled only for as many records as there is room for, so a slow
	// websocket slows its subscription down and nothing else.
	eventBuffer = 256
	// maxSubscriptionsPerConn bounds the open subscriptions of one
	// websocket (the broker bounds them all: broker.Config.MaxSubscriptions).
	maxSubscriptionsPerConn = 100
)

// wsConn is the state of one websocket connection, put in its context by
// the connection_init handler. Only subscriptions over a websocket have it.
type wsConn struct {
	subs atomic.Int32 // open subscriptions
}

type wsConnKey struct{}

func connFrom(ctx context.Context) *wsConn {
	c, _ := ctx.Value(wsConnKey{}).(*wsConn)
	return c
}

func subscribeOptions(topic string, group *string, from *StartPosition, ackMode AckMode, partitions []int32, o *SubscribeOptions) (broker.SubscribeOptions, error) {
	out := broker.SubscribeOptions{Topic: topic, Partitions: partitions}
	if group != nil {
		out.Group = *group
	}
	switch ackMode {
	case AckModeAuto:
		out.AckMode = broker.AckAuto
	case AckModePerMessage:
		out.AckMode = broker.AckPerMessage
	default:
		out.AckMode = broker.AckManual
	}
	var err error
	if out.Start, err = startIn(from); err != nil {
		return out, err
	}
	if o == nil {
		return out, nil
	}
	for _, v := range []*int32{o.AckWaitMs, o.MaxDeliveries, o.MaxAckPending, o.SessionTimeoutMs} {
		if v != nil && *v < 0 {
			return out, invalid("subscribe options must not be negative")
		}
	}
	out.ClientID = deref(o.ClientID)
	out.AckWait = time.Duration(deref(o.AckWaitMs)) * time.Millisecond
	out.MaxDeliveries = int(deref(o.MaxDeliveries))
	out.MaxAckPending = int(deref(o.MaxAckPending))
	out.DeadLetterTopic = deref(o.DeadLetterTopic)
	out.SessionTimeout = time.Duration(deref(o.SessionTimeoutMs)) * time.Millisecond
	out.IncludePerformance = deref(o.IncludePerformance)
	return out, nil
}

func startIn(from *StartPosition) (broker.StartPosition, error) {
	out := broker.StartPosition{Kind: broker.StartLatest}
	if from == nil {
		return out, nil
	}
	set := 0
	if deref(from.Earliest) {
		out.Kind, set = broker.StartEarliest, set+1
	}
	if deref(from.Latest) {
		out.Kind, set = broker.StartLatest, set+1
	}
	if from.Offset != nil {
		out, set = broker.StartPosition{Kind: broker.StartOffset, Value: *from.Offset}, set+1
	}
	if from.Timestamp != nil {
		out, set = broker.StartPosition{Kind: broker.StartTimestamp, Value: from.Timestamp.UnixNano()}, set+1
	}
	if set > 1 {
		return out, invalid("from names one start position, got %d", set)
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// subscribe opens a broker subscription and streams its events until the
// client completes the operation or the websocket closes (ctx ends), or the
// broker ends the subscription (then the client gets an error message).
func (r *Resolver) subscribe(ctx context.Context, opts broker.SubscribeOptions) (<-chan *SubscriptionEvent, error) {
	conn := connFrom(ctx)
	if conn == nil {
		return nil, invalid("subscriptions are served over websockets only (graphql-transport-ws at /graphql)")
	}
	if n := conn.subs.Add(1); n > maxSubscriptionsPerConn {
		conn.subs.Add(-1)
		return nil, errorf(broker.ErrResourceExhausted, "%d subscriptions are open on this websocket (limit %d)", n-1, maxSubscriptionsPerConn)
	}
	sub, err := r.b.Subscribe(ctx, opts)
	if err != nil {
		conn.subs.Add(-1)
		return nil, err
	}
	if opts.Group != "" {
		r.members.add(opts.Group, sub)
	}
	s := &stream{
		r: r, sub: sub, conn: conn,
		auto:  opts.Group != "" && opts.AckMode == broker.AckAuto,
		queue: make(chan *SubscriptionEvent, eventBuffer+1),
		out:   make(chan *SubscriptionEvent),
		room:  make(chan struct{}, 1),
	}
	s.push(ctx, s.subscribed())
	go s.run(ctx)
	return s.out, nil
}

// stream is one subscription's delivery: a poller fills queue from the
// broker as far as there is room; a forwarder hands queued events to gqlgen
// (out, unbuffered: gqlgen takes one when the websocket has sent the one
// before) and heartbeats the group member meanwhile. With AckAuto the
// broker counts a delivery as consumed at the next poll of its partition,
// so the poller waits until every event polled before was handed over.
type stream struct {
	r    *Resolver
	sub  broker.Subscription
	conn *wsConn
	auto bool // AckAuto: poll only when nothing is in flight

	queue chan *SubscriptionEvent // poller → forwarder; closed by the poller
	out   chan *SubscriptionEvent // forwarder → gqlgen; closed by run
	room  chan struct{}           // signalled when the forwarder handed an event to gqlgen
	// inflight counts the events queued or held by the forwarder, not yet
	// handed to gqlgen. The subscription's record credit starts at
	// eventBuffer and one record is granted back as each record event is
	// handed on, so inflight <= eventBuffer+1 (the records, plus one
	// "missed" event).
	inflight atomic.Int32

	sent int // events handed to gqlgen; used by the forwarder only

	mu     sync.Mutex
	ending error // why the stream ends, when the broker or a heartbeat ended it
}

func (s *stream) subscribed() *SubscriptionEvent {
	ev := &Subscribed{SessionTimeoutMs: s.sub.SessionTimeout().Milliseconds()}
	if id := s.sub.MemberID(); id != "" {
		ev.MemberID = &id
	}
	return &SubscriptionEvent{Subscribed: ev}
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ending == nil {
		s.ending = err
	}
}

// run forwards events until the stream ends, then closes everything it
// opened: the poller, the broker subscription, its member entry, and out.
// If the broker ended the stream, the client gets the error (streamEnd).
func (s *stream) run(ctx context.Context) {
	pollCtx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		s.poll(pollCtx)
	}()
	s.forward(ctx)
	cancel()
	<-polled
	s.r.members.remove(s.sub)
	s.sub.Close()
	s.conn.subs.Add(-1)
	s.mu.Lock()
	err := s.ending
	s.mu.Unlock()
	if end := endFrom(ctx); err != nil && end != nil {
		end.set(err, s.sent)
		select {
		case s.out <- &SubscriptionEvent{}: // replaced by the error
		case <-ctx.Done():
		}
	}
	close(s.out)
}

// forward hands queued events to gqlgen, heartbeating the member every
// third of its session timeout, until the queue is closed and drained or
// ctx ends.
func (s *stream) forward(ctx context.Context) {
	var beat <-chan time.Time
	if st := s.sub.SessionTimeout(); st > 0 {
		t := time.NewTicker(max(st/3, 10*time.Millisecond))
		defer t.Stop()
		beat = t.C
	}
	for {
		var ev *SubscriptionEvent
		select {
		case ev = <-s.queue:
			if ev == nil {
				return // closed: the poller ended
			}
		case <-beat:
			if !s.heartbeat() {
				return
			}
			continue
		case <-ctx.Done():
			return
		}
		for sent := false; !sent; {
			select {
			case s.out <- ev:
				sent = true
				s.sent++
				s.inflight.Add(-1)
				if ev.Record != nil {
					s.sub.Grant(1, 0) // room for one more
				}
				select {
				case s.room <- struct{}{}:
				default:
				}
			case <-beat:
				if !s.heartbeat() {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

func (s *stream) heartbeat() bool {
	if err := s.sub.Heartbeat(); err != nil {
		s.fail(err)
		return false
	}
	return true
}

// poll reads from the broker as many records as there is room for, and
// queues them, until ctx ends or the subscription fails.
func (s *stream) poll(ctx context.Context) {
	defer close(s.queue)
	s.sub.Grant(eventBuffer, 0)
	for {
		if s.auto && s.inflight.Load() > 0 {
			select {
			case <-s.room:
				continue
			case <-ctx.Done():
				return
			}
		}
		d, err := s.sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				s.fail(err)
			}
			return
		}
		for _, ev := range deliveryEvents(d) {
			if !s.push(ctx, ev) {
				return
			}
		}
	}
}

// push queues an event for the forwarder; false if ctx ended first.
func (s *stream) push(ctx context.Context, ev *SubscriptionEvent) bool {
	s.inflight.Add(1)
	select {
	case s.queue <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// deliveryEvents turns one poll's delivery into events: an assignment, or
// a count of missed performance records and records.
func deliveryEvents(d *broker.Delivery) []*SubscriptionEvent {
	if a := d.Assignment; a != nil {
		return []*SubscriptionEvent{{Assignment: &Assignment{
			Topic: a.Topic, Partitions: nonNil(a.Partitions), Generation: a.Generation,
		}}}
	}
	out := make([]*SubscriptionEvent, 0, len(d.Records)+1)
	if d.Missed > 0 {
		missed := d.Missed
		out = append(out, &SubscriptionEvent{Missed: &missed})
	}
	for i := range d.Records {
		r := &d.Records[i]
		out = append(out, &SubscriptionEvent{Record: newRecord(r.Record, r.Partition, r.Mode, r.DeliveryCount)})
	}
	return out
}
