package broker

import (
	"context"
	"errors"
	"time"

	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

// commit appends the data requests of pending, fsyncs once, publishes the
// new high watermark and acknowledges them. Control requests run in queue
// order, after the data before them is durable.
//
// Only the writer goroutine calls it.
func (p *partition) commit(pending []*writeReq) {
	from := 0
	for i, r := range pending {
		if r.control == nil {
			continue
		}
		p.commitData(pending[from:i])
		r.control()
		from = i + 1
	}
	p.commitData(pending[from:])
}

func (p *partition) commitData(reqs []*writeReq) {
	if len(reqs) == 0 {
		return
	}
	bases := make([]int64, len(reqs))
	var dups []bool // a retry of a batch already stored: answered with its offsets
	err := p.storageErr()
	records := 0
	now := time.Now()
	for i, r := range reqs {
		p.queued.Add(-int64(len(r.batch)))
		if err != nil {
			break
		}
		k, keyed := dedup.KeyOf(r.batch)
		if keyed {
			if base, ok := p.dedup.Lookup(k, now); ok {
				if dups == nil {
					dups = make([]bool, len(reqs))
				}
				bases[i], dups[i] = base, true
				continue
			}
		}
		// Rebase the caller's batch itself and hand it to the log without a
		// copy: the tail cache keeps the same bytes, and nobody modifies
		// them again. One CRC computation and no memmove per batch.
		bases[i] = p.log.NextOffset()
		record.SetBaseOffset(r.batch, bases[i])
		err = p.log.AppendShared(r.batch)
		records += r.records
		if keyed {
			p.dedup.Add(k, bases[i], now)
		}
	}
	if err == nil {
		start := time.Now()
		err = p.log.Sync()
		p.b.m.fsyncLatency.Observe(time.Since(start).Seconds())
		p.b.m.commitRecords.Observe(float64(records))
	}
	if err != nil {
		p.fail(err)
		for _, r := range reqs {
			r.done(0, errorf(ErrUnavailable, "partition %s/%d storage failed: %v", p.t.name, p.id, p.storageErr()))
		}
		return
	}
	p.mu.Lock()
	for i, r := range reqs {
		if dups == nil || !dups[i] {
			p.tail.add(bases[i], bases[i]+int64(r.records), r.batch)
		}
	}
	p.hw = p.log.NextOffset()
	p.mu.Unlock()
	p.t.broadcast()
	now = time.Now()
	for i, r := range reqs {
		if dups != nil && dups[i] {
			p.b.m.duplicates.WithLabelValues(p.label).Inc()
		}
		p.b.m.publishLatency.WithLabelValues(r.mode.String()).Observe(now.Sub(r.enq).Seconds())
		r.done(bases[i], nil)
	}
}

// fail marks the partition failed after a storage error. The log's state
// past the last fsync is unknown (an fsync that failed may have dropped
// dirty pages), so the partition refuses all I/O until the broker restarts
// and recovery truncates the log to its last valid batch.
func (p *partition) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		p.failed = err
		p.tail.reset()
		p.b.log.Error("partition storage failed; refusing I/O until restart",
			"topic", p.t.name, "partition", p.id, "err", err)
	}
}

func (p *partition) storageErr() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.failed
}

// enforceRetention runs on the writer goroutine (as a control request).
func (p *partition) enforceRetention(now time.Time) {
	if p.storageErr() != nil {
		return
	}
	n, err := p.log.EnforceRetention(now)
	p.refreshStart() // even after an error: some segments may be gone
	if err != nil {
		p.b.log.Error("retention failed", "topic", p.t.name, "partition", p.id, "err", err)
		return
	}
	if n > 0 {
		p.b.log.Info("retention deleted segments", "topic", p.t.name, "partition", p.id,
			"segments", n, "start_offset", p.log.StartOffset())
	}
}

// readBatches returns committed batches from offset: from the tail cache
// when it covers offset, else from the segment files. The first batch may
// start below offset. The slices must not be modified.
func (p *partition) readBatches(offset int64, maxBytes int) (batches [][]byte, start, hw int64, err error) {
	if p.remote {
		ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
		defer cancel()
		res, err := p.b.remoteFetch(ctx, p, offset, maxBytes, 0, false)
		if err != nil {
			return nil, 0, 0, err
		}
		return res.Batches, res.StartOffset, res.HighWatermark, nil
	}
	p.mu.RLock()
	start, hw, failed := p.start, p.hw, p.failed
	if failed != nil {
		p.mu.RUnlock()
		return nil, start, hw, errorf(ErrUnavailable, "partition %s/%d storage failed: %v", p.t.name, p.id, failed)
	}
	if offset > hw && p.rep != nil {
		p.mu.RUnlock()
		return nil, start, hw, nil // committed elsewhere; this replica learns it soon
	}
	if offset < start || offset > hw {
		p.mu.RUnlock()
		return nil, start, hw, errorf(ErrOffsetOutOfRange, "offset %d is outside [%d, %d] of %s/%d", offset, start, hw, p.t.name, p.id)
	}
	if offset == hw {
		p.mu.RUnlock()
		return nil, start, hw, nil
	}
	if cached, ok := p.tail.read(offset, maxBytes); ok {
		p.mu.RUnlock()
		return cached, start, hw, nil
	}
	p.mu.RUnlock()
	raw, err := p.log.Read(offset, maxBytes, hw)
	if errors.Is(err, partlog.ErrOffsetOutOfRange) { // retention ran meanwhile
		start = p.refreshStart()
		return nil, start, hw, errorf(ErrOffsetOutOfRange, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
	}
	if err != nil {
		return nil, start, hw, errorf(ErrUnavailable, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
	}
	for len(raw) > 0 {
		h, err := record.ParseBatch(raw)
		if err != nil {
			return nil, start, hw, errorf(ErrUnavailable, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
		}
		batches = append(batches, raw[:h.Size()])
		raw = raw[h.Size():]
	}
	return batches, start, hw, nil
}

// refreshStart takes the log's start offset after segments were deleted.
func (p *partition) refreshStart() int64 {
	start := p.log.StartOffset()
	p.mu.Lock()
	p.start = start
	p.mu.Unlock()
	return start
}

// offsets returns the partition's start offset and high watermark.
func (p *partition) offsets() (start, hw int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.start, p.hw
}
