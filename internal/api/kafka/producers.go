package kafka

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Idempotent producers. InitProducerId hands out producer ids that are
// never reused (time-based, with this node's id in their low bits), epoch
// 0. Each batch of an idempotent producer carries its producer id, epoch
// and the sequence of its first record; per (producer id, topic,
// partition) this node, as the partition's leader, expects the sequences
// to follow each other:
//   - the next sequence: the batch is published;
//   - one of the last dedupWindow batches again (a retry): answered with
//     the offset it got, or, while that batch is still being stored,
//     published again, which the broker's duplicate window answers;
//   - an older sequence: DUPLICATE_SEQUENCE_NUMBER;
//   - a gap: OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch:
//     INVALID_PRODUCER_EPOCH.
//
// Record message ids derive from (producer id, epoch, sequence), so the
// broker's duplicate window also catches a retry the leader before a
// leader change stored. A new leader has no sequence state for a producer
// and accepts its next batch whatever its sequence, as Kafka does for a
// producer whose state expired.

const (
	// dedupWindow is how many recent batches per producer and partition
	// are remembered (Kafka's 5: the most a producer may have in flight).
	dedupWindow = 5
	// producerIdle is how long the state of a producer that sends
	// nothing is kept.
	producerIdle = 15 * time.Minute
	// maxProducerStates bounds the states kept.
	maxProducerStates = 100000
)

type producerKey struct {
	pid       int64
	topic     string
	partition int32
}

type sentBatch struct {
	firstSeq, count int32
	offset          int64 // -1 while being stored
}

type seqState struct {
	epoch    int16
	next     int32 // the sequence expected next
	recent   [dedupWindow]sentBatch
	n        int // batches in recent (ring, newest at (head-1))
	head     int
	lastUsed time.Time
}

type producers struct {
	mu     sync.Mutex
	states map[producerKey]*seqState
	lastID int64
	node   int64
	swept  time.Time
}

func newProducers() *producers {
	return &producers{states: map[producerKey]*seqState{}}
}

// pidEpoch is 2025-01-01 in Unix milliseconds; producer ids count
// milliseconds from it.
const pidEpoch = 1735689600000

// newID returns a producer id no node of the cluster gave before: the
// milliseconds since pidEpoch (increasing, at least one per id) above
// the low 8 bits of the node id. It fits 48 bits (the message ids built
// from it keep 48) for 34 years.
func (p *producers) newID(node uint64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ms := time.Now().UnixMilli() - pidEpoch
	if ms <= p.lastID {
		ms = p.lastID + 1
	}
	p.lastID = ms
	return ms<<8 | int64(node&0xff)
}

// verdict is what to do with a batch of an idempotent producer.
type verdict struct {
	code int16 // an error to answer with, or 0
	// offset >= 0: a retry of a batch stored at offset; answer with it.
	offset int64
}

// check decides about a batch and, when it is to be published, records
// it as sent.
func (p *producers) check(k producerKey, epoch int16, firstSeq, count int32) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.sweep(now)
	st := p.states[k]
	if st == nil {
		st = &seqState{epoch: epoch, next: firstSeq}
		p.states[k] = st
	}
	st.lastUsed = now
	switch {
	case epoch < st.epoch:
		return verdict{code: kerr.InvalidProducerEpoch.Code, offset: -1}
	case epoch > st.epoch:
		if firstSeq != 0 {
			return verdict{code: kerr.OutOfOrderSequenceNumber.Code, offset: -1}
		}
		*st = seqState{epoch: epoch, next: 0, lastUsed: now}
	}
	if firstSeq == st.next {
		st.next = firstSeq + count
		st.recent[st.head] = sentBatch{firstSeq: firstSeq, count: count, offset: -1}
		st.head = (st.head + 1) % dedupWindow
		st.n = min(st.n+1, dedupWindow)
		return verdict{offset: -1}
	}
	if firstSeq > st.next {
		return verdict{code: kerr.OutOfOrderSequenceNumber.Code, offset: -1}
	}
	for i := 0; i < st.n; i++ {
		b := st.recent[(st.head-1-i+dedupWindow)%dedupWindow]
		if b.firstSeq == firstSeq && b.count == count {
			// A retry: answer with its offset, or publish it again
			// for the broker to recognise while it is being stored.
			return verdict{offset: b.offset}
		}
	}
	return verdict{code: kerr.DuplicateSequenceNumber.Code, offset: -1}
}

// stored records where a sent batch went, or, on failure, that it was not
// stored: the producer must send it again, so it is expected next.
func (p *producers) stored(k producerKey, epoch int16, firstSeq int32, offset int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.states[k]
	if st == nil || st.epoch != epoch {
		return
	}
	for i := 0; i < st.n; i++ {
		j := (st.head - 1 - i + dedupWindow) % dedupWindow
		if st.recent[j].firstSeq == firstSeq {
			if ok {
				st.recent[j].offset = offset
			} else {
				st.recent[j] = sentBatch{firstSeq: -1}
			}
			break
		}
	}
	if !ok && firstSeq < st.next {
		st.next = firstSeq
	}
}

// sweep forgets idle producers, at most once a minute, and a tenth of
// all when there are maxProducerStates.
func (p *producers) sweep(now time.Time) {
	if now.Sub(p.swept) < time.Minute && len(p.states) < maxProducerStates {
		return
	}
	p.swept = now
	for k, st := range p.states {
		if now.Sub(st.lastUsed) > producerIdle {
			delete(p.states, k)
		}
	}
	if len(p.states) >= maxProducerStates {
		// Forget a tenth, in map order (random).
		n := maxProducerStates / 10
		for k := range p.states {
			delete(p.states, k)
			if n--; n == 0 {
				break
			}
		}
	}
}
