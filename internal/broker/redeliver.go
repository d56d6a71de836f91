package broker

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/hermes-mq/hermes/internal/group"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Dead-letter headers name where a dead-lettered record came from.
const (
	HeaderDLQTopic      = "hermes-dlq-topic"
	HeaderDLQPartition  = "hermes-dlq-partition"
	HeaderDLQOffset     = "hermes-dlq-offset"
	HeaderDLQGroup      = "hermes-dlq-group"
	HeaderDLQDeliveries = "hermes-dlq-deliveries"
)

// redeliver returns records of s whose ack deadline passed (sending those
// past MaxDeliveries to the dead-letter topic first), or how long until the
// next deadline (0: none pending).
func (m *groupManager) redeliver(s *localSub, limit int) (*Delivery, time.Duration, error) {
	now := time.Now()
	var wait time.Duration
	m.mu.Lock()
	s.mu.Lock()
	owned := slices.Clone(s.owned)
	s.mu.Unlock()
	for _, pid := range owned {
		os := s.gs.offsets[topicPartition{s.t.name, pid}]
		if os == nil || os.tracker == nil {
			continue
		}
		again, dead := os.tracker.Due(now, limit)
		if len(again)+len(dead) > 0 {
			tr := os.tracker
			m.mu.Unlock()
			return m.resend(s, pid, tr, again, dead)
		}
		if at, ok := os.tracker.NextDeadline(); ok {
			if w := max(at.Sub(now), time.Millisecond); wait == 0 || w < wait {
				wait = w
			}
		}
	}
	m.mu.Unlock()
	return nil, wait, nil
}

// resend dead-letters `dead` and delivers `again` once more. The tracker
// parked both sets in Due; each offset leaves that state here through
// Delivered or Ack. tr guards against a rebalance meanwhile: a revoked
// partition's tracker is dropped and nothing is done to it.
func (m *groupManager) resend(s *localSub, pid int32, tr *group.Tracker, again, dead []int64) (*Delivery, time.Duration, error) {
	p := s.t.partitions()[pid]
	for _, off := range dead {
		rec, err := readOne(p, off)
		gone := errors.Is(err, errRetained)
		if err == nil {
			err = m.deadLetter(s, pid, rec)
		}
		m.settle(s, pid, tr, func(now time.Time) {
			if gone { // retention removed it: nothing left to dead-letter
				tr.Ack(off)
				return
			}
			if err != nil {
				m.b.log.Error("dead-letter publish failed; will retry after the ack wait",
					"group", s.gs.name, "topic", s.t.name, "partition", pid, "offset", off, "err", err)
				tr.Delivered(off, now)
				return
			}
			tr.Ack(off)
			m.b.m.deadLettered.WithLabelValues(s.gs.name, s.t.name).Inc()
		})
	}
	d := &Delivery{Partition: pid}
	for _, off := range again {
		rec, err := readOne(p, off)
		m.settle(s, pid, tr, func(now time.Time) {
			if errors.Is(err, errRetained) { // retention removed it: nothing left to deliver
				tr.Ack(off)
				return
			}
			if err != nil { // unreadable now (storage failure): try again after the ack wait
				m.b.log.Error("cannot read a record to redeliver", "topic", s.t.name, "partition", pid, "offset", off, "err", err)
				tr.Delivered(off, now)
				return
			}
			n := tr.Delivered(off, now)
			d.Records = append(d.Records, DeliveredRecord{Record: rec, Partition: pid, Mode: ModeConsistent, DeliveryCount: n})
			m.b.m.redelivered.WithLabelValues(s.gs.name, s.t.name).Inc()
		})
	}
	if len(d.Records) == 0 {
		return nil, time.Millisecond, nil
	}
	return d, 0, nil
}

// settle runs fn under the group lock if pid still has the tracker tr (a
// revoke always drops the tracker, so the same tracker means s still owns
// pid), and updates the committed offset after it.
func (m *groupManager) settle(s *localSub, pid int32, tr *group.Tracker, fn func(time.Time)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	os := s.gs.offsets[topicPartition{s.t.name, pid}]
	if os == nil || os.tracker != tr {
		return
	}
	fn(time.Now())
	os.committed = tr.Committed()
}

// errRetained: the record was deleted by retention.
var errRetained = errors.New("record no longer retained")

// readOne reads the record at off. errRetained when retention deleted it;
// any other error means it could not be read now.
func readOne(p *partition, off int64) (record.Record, error) {
	batches, start, _, err := p.readBatches(off, 1, 1)
	if off < start {
		return record.Record{}, errRetained
	}
	if err != nil {
		return record.Record{}, err
	}
	recs, _, err := DecodeFrom(nil, batches, off, 1)
	if err != nil {
		return record.Record{}, err
	}
	if len(recs) == 0 || recs[0].Offset != off {
		return record.Record{}, errorf(ErrUnavailable, "record %d of %s/%d not found in its batch", off, p.t.name, p.id)
	}
	return recs[0], nil
}

// deadLetterTimeout bounds moving one record to its dead-letter topic.
const deadLetterTimeout = 10 * time.Second

// deadLetter publishes rec to the subscription's dead-letter topic
// (created with one partition if missing), with headers naming its origin.
func (m *groupManager) deadLetter(s *localSub, pid int32, rec record.Record) error {
	dlq := s.opts.DeadLetterTopic
	// The member's principal creates and writes the dead-letter topic.
	ctx, cancel := context.WithTimeout(WithPrincipal(context.Background(), s.principal), deadLetterTimeout)
	defer cancel()
	if _, err := m.b.CreateTopic(ctx, dlq, TopicConfig{}, true); err != nil {
		return err
	}
	out := rec
	out.Headers = append(slices.Clone(rec.Headers),
		record.Header{Key: HeaderDLQTopic, Value: []byte(s.t.name)},
		record.Header{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(pid)))},
		record.Header{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		record.Header{Key: HeaderDLQGroup, Value: []byte(s.gs.name)},
	)
	_, err := m.b.Publish(ctx, &PublishRequest{
		Topic: dlq, Partition: AnyPartition, Mode: ModeConsistent, Records: []record.Record{out},
	})
	return err
}
