package brokertest

import (
	"context"
	"slices"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Subscribe opens a subscription over the in-memory log: a plain
// subscriber of the partitions named (all by default), or a group member
// that gets every partition (announced first) and starts at the group's
// committed offsets. It delivers within the credit granted, like the real
// broker: at most the records, and about the bytes, not yet spent.
func (f *Fake) Subscribe(ctx context.Context, opts broker.SubscribeOptions) (broker.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Subscribe"); err != nil {
		return nil, err
	}
	t, err := f.topicLocked(opts.Topic)
	if err != nil {
		return nil, err
	}
	f.subOpts = append(f.subOpts, opts)
	s := &sub{f: f, opts: opts, cursors: map[int32]int64{}, principal: broker.PrincipalFrom(ctx).Name, done: make(chan struct{})}
	parts := opts.Partitions
	if len(parts) == 0 {
		for i := range t.logs {
			parts = append(parts, int32(i))
		}
	}
	for _, p := range parts {
		if p < 0 || int(p) >= len(t.logs) {
			return nil, broker.Errorf(broker.ErrPartitionNotFound, "topic %q has no partition %d", opts.Topic, p)
		}
		switch opts.Start.Kind {
		case broker.StartEarliest:
			s.cursors[p] = 0
		case broker.StartOffset:
			s.cursors[p] = opts.Start.Value
		default:
			s.cursors[p] = int64(len(t.logs[p]))
		}
		if off, ok := f.offsets[opts.Group][tp{opts.Topic, p}]; ok && opts.Group != "" {
			s.cursors[p] = off
		}
		s.owned = append(s.owned, p)
	}
	if opts.Group != "" {
		s.member = "member-1"
		s.announce = true
	}
	return s, nil
}

// Subscriptions returns the options of every Subscribe so far, in order.
func (f *Fake) Subscriptions() []broker.SubscribeOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.subOpts)
}

// sub is a Fake subscription. Its fields are guarded by f.mu.
type sub struct {
	f         *Fake
	opts      broker.SubscribeOptions
	principal string
	member    string
	owned     []int32
	cursors   map[int32]int64
	announce  bool
	records   int64
	bytes     int64
	limited   bool
	closed    bool
	done      chan struct{}
}

func (s *sub) MemberID() string { return s.member }
func (s *sub) SessionTimeout() time.Duration {
	if s.member == "" {
		return 0
	}
	return 10 * time.Second
}
func (s *sub) Coordinator() string { return "" }

func (s *sub) Grant(records int, bytes int64) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.calls = append(s.f.calls, Call{Method: "Grant", Principal: s.principal, Records: records, Bytes: bytes})
	s.records += int64(records)
	if bytes > 0 {
		s.limited = true
		s.bytes += bytes
	}
	s.f.broadcast()
}

func (s *sub) Next(ctx context.Context) (*broker.Delivery, error) {
	for {
		s.f.mu.Lock()
		if s.closed {
			s.f.mu.Unlock()
			return nil, broker.Errorf(broker.ErrUnavailable, "subscription closed")
		}
		if _, ok := s.f.topics[s.opts.Topic]; !ok {
			s.f.mu.Unlock()
			return nil, broker.Errorf(broker.ErrTopicNotFound, "topic %q was deleted", s.opts.Topic)
		}
		if d := s.nextLocked(); d != nil {
			s.f.mu.Unlock()
			return d, nil
		}
		changed := s.f.changed
		s.f.mu.Unlock()
		select {
		case <-changed:
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// nextLocked returns what may be delivered now, or nil.
func (s *sub) nextLocked() *broker.Delivery {
	if s.announce {
		s.announce = false
		return &broker.Delivery{Assignment: &broker.Assignment{Topic: s.opts.Topic, Partitions: slices.Clone(s.owned), Generation: 1}}
	}
	if s.records <= 0 || s.limited && s.bytes <= 0 {
		return nil
	}
	t := s.f.topics[s.opts.Topic]
	for _, p := range s.owned {
		l := t.logs[p]
		from := s.cursors[p]
		if from >= int64(len(l)) {
			continue
		}
		d := &broker.Delivery{Partition: p}
		var size int64
		for off := from; off < int64(len(l)) && int64(len(d.Records)) < s.records; off++ {
			r := l[off]
			cost := record.CreditBytes(&r)
			if len(d.Records) > 0 && s.limited && size+cost > s.bytes {
				break
			}
			d.Records = append(d.Records, broker.DeliveredRecord{Record: r, Partition: p, Mode: broker.ModeConsistent, DeliveryCount: 1})
			size += cost
		}
		s.cursors[p] = from + int64(len(d.Records))
		if s.opts.Packed {
			recs := make([]record.Record, len(d.Records))
			for i := range d.Records {
				recs[i] = d.Records[i].Record
			}
			d.Batches, d.Records = [][]byte{record.AppendBatch(nil, from, recs)}, nil
		}
		s.records -= int64(d.Count())
		s.bytes -= d.Size()
		return d
	}
	return nil
}

func (s *sub) Ack(partition int32, offsets []int64) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.record(context.Background(), "Ack")
}

func (s *sub) Nack(partition int32, offsets []int64) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.record(context.Background(), "Nack")
}

func (s *sub) Commit(offsets []broker.Offset) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if err := s.f.record(context.Background(), "Commit"); err != nil {
		return err
	}
	if s.opts.Group == "" {
		return broker.Errorf(broker.ErrInvalidArgument, "commit needs a group subscription")
	}
	return s.f.commitLocked(s.opts.Group, offsets)
}

func (s *sub) Heartbeat() error { return nil }

func (s *sub) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}
