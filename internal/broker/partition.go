package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/memring"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/pkg/record"
)

// partition is one partition of a topic on this node: its durable log, its
// in-memory ring of performance records, and the single writer goroutine
// that appends to the log with group commit.
//
// Lock order: partition.sendMu before partition.mu; neither is held while
// calling into another partition or the group manager.
type partition struct {
	b     *Broker
	t     *topic
	id    int32
	log   *partlog.Log
	ring  *memring.Ring
	label string // topic name, for metrics

	// sendMu guards sends on reqs against its close.
	sendMu sync.RWMutex
	closed bool
	reqs   chan *writeReq
	queued atomic.Int64  // bytes in reqs, bounded by Config.MaxQueueBytes
	done   chan struct{} // closed when the writer goroutine exits

	// On a cluster: the partition's Raft replica on this node (nil on a
	// single node), or, for a partition this node does not hold, only its
	// replicas (log and rep are nil then).
	rep      *replication.Replica
	replicas []uint64
	remote   bool

	mu sync.RWMutex
	// hw is the high watermark: every offset below it is durable and
	// readable. Invariant: hw == log.SyncedOffset() between commits on a
	// single node; on a cluster, the offset after the committed entries.
	hw     int64
	start  int64 // log start offset, refreshed after retention
	failed error // sticky storage failure; the partition refuses I/O
	tail   tailCache

	// dedup remembers recent batches to answer retried publishes with
	// their first copy's offsets. Owned by the writer goroutine on a single
	// node, by the Raft replica's goroutine on a cluster.
	dedup *dedup.Window
}

// writeReq is one unit of work for the writer: a validated batch to append,
// or a control function to run on the writer goroutine.
type writeReq struct {
	batch   []byte
	records int
	mode    Mode
	enq     time.Time
	control func()
	done    func(base int64, err error)
}

const writeQueueLen = 8192

func openPartition(b *Broker, t *topic, id int32, dir string) (*partition, error) {
	log, err := partlog.Open(dir, partlog.Options{
		SegmentBytes:   t.cfg.SegmentBytes,
		RetentionAge:   t.cfg.RetentionAge,
		RetentionBytes: t.cfg.RetentionBytes,
		Logger:         b.log.With("topic", t.name, "partition", id),
	})
	if err != nil {
		return nil, fmt.Errorf("open partition %s/%d: %w", t.name, id, err)
	}
	p := &partition{
		b: b, t: t, id: id, log: log, label: t.name,
		ring: memring.New(memring.Options{MaxRecords: b.cfg.RingRecords, MaxBytes: b.cfg.RingBytes}),
		reqs: make(chan *writeReq, writeQueueLen),
		done: make(chan struct{}),
		hw:   log.NextOffset(),
	}
	p.start = log.StartOffset()
	p.tail.max = b.cfg.TailCacheBytes
	p.dedup = dedup.New(dedup.Options{MaxAge: b.cfg.DedupWindow, MaxBatches: b.cfg.DedupMaxBatches})
	if err := p.rebuildDedup(); err != nil {
		log.Close()
		return nil, err
	}
	go p.run()
	return p, nil
}

// dedupRebuildRecords bounds how far back from the end of its log a
// partition looks, at open, for the batches of its duplicate window.
const dedupRebuildRecords = 100_000

// rebuildDedup fills the duplicate window from the newest batches of the
// log (those a restart should still recognise). Their age counts from now.
func (p *partition) rebuildDedup() error {
	if p.dedup == nil {
		return nil
	}
	end := p.log.NextOffset()
	now := time.Now()
	for off := max(p.log.StartOffset(), end-dedupRebuildRecords); off < end; {
		raw, err := p.log.Read(off, 4<<20, end)
		if err != nil {
			return fmt.Errorf("partition %s/%d: read for the duplicate window: %w", p.t.name, p.id, err)
		}
		if len(raw) == 0 {
			break
		}
		for len(raw) > 0 {
			h, err := record.ParseHeader(raw)
			if err != nil {
				return fmt.Errorf("partition %s/%d: read for the duplicate window: %w", p.t.name, p.id, err)
			}
			if k, ok := dedup.KeyOfHeader(h, raw); ok {
				p.dedup.Add(k, h.BaseOffset, now)
			}
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	return nil
}

// remotePartition is the placeholder of a partition this node does not
// hold: it knows the replicas, for redirects.
func remotePartition(b *Broker, t *topic, id int32, replicas []uint64) *partition {
	p := &partition{b: b, t: t, id: id, label: t.name, replicas: replicas, remote: true, done: make(chan struct{})}
	p.ring = memring.New(memring.Options{MaxRecords: 1, MaxBytes: 1})
	close(p.done)
	p.closed = true
	return p
}

// notHere is the error for a request this node cannot serve for p: the
// partition lives on other nodes, or this replica does not lead it.
func (p *partition) notHere() error {
	leader := uint64(0)
	if p.rep != nil {
		leader = p.rep.Leader()
	} else if len(p.replicas) > 0 {
		leader = p.replicas[0]
	}
	return &kindError{kind: ErrUnavailable, retryAfter: 50 * time.Millisecond, leader: p.b.leaderAddr(leader),
		msg: fmt.Sprintf("partition %s/%d is led by node %d (replicas %v), not node %d", p.t.name, p.id, leader, p.replicas, p.b.cl.cfg.NodeID)}
}

// enqueue hands r to the writer, or fails at once when the partition is
// closed or its queue bound is reached (never blocks: backpressure is an
// explicit, retriable error).
func (p *partition) enqueue(r *writeReq) error {
	p.sendMu.RLock()
	defer p.sendMu.RUnlock()
	if p.closed {
		return errorf(ErrUnavailable, "partition %s/%d is closing", p.t.name, p.id)
	}
	n := int64(len(r.batch))
	if q := p.queued.Add(n); q > p.b.cfg.MaxQueueBytes && q != n {
		p.queued.Add(-n)
		p.b.m.rejected.WithLabelValues("queue_full").Inc()
		return exhausted(50*time.Millisecond, "partition %s/%d has %d bytes queued (limit %d)", p.t.name, p.id, q-n, p.b.cfg.MaxQueueBytes)
	}
	select {
	case p.reqs <- r:
		return nil
	default:
		p.queued.Add(-n)
		p.b.m.rejected.WithLabelValues("queue_full").Inc()
		return exhausted(50*time.Millisecond, "partition %s/%d has %d requests queued", p.t.name, p.id, writeQueueLen)
	}
}

// close stops the writer after it has finished what is queued, then closes
// the log.
func (p *partition) close() error {
	if p.remote {
		return nil
	}
	if p.rep != nil {
		p.b.cl.host.Remove(fmt.Sprintf("%s/%d", p.t.name, p.id))
		p.rep.Stop()
	}
	p.sendMu.Lock()
	if !p.closed {
		p.closed = true
		close(p.reqs)
	}
	p.sendMu.Unlock()
	<-p.done
	return p.log.Close()
}

// run is the writer goroutine: it takes every queued request (up to
// MaxCommitBytes), appends them, fsyncs once and then acknowledges them all.
func (p *partition) run() {
	defer close(p.done)
	var pending []*writeReq
	lastSync := time.Now()
	for {
		r, ok := <-p.reqs
		if !ok {
			return
		}
		pending = p.collect(append(pending[:0], r), lastSync)
		p.commit(pending)
		lastSync = time.Now()
		clear(pending)
	}
}

// collect adds whatever else is queued, without waiting, up to the commit
// bound; with a fsync interval it waits until the interval has passed.
func (p *partition) collect(pending []*writeReq, lastSync time.Time) []*writeReq {
	size := len(pending[0].batch)
	var timer <-chan time.Time
	if iv := p.b.cfg.FsyncInterval; iv > 0 {
		if wait := iv - time.Since(lastSync); wait > 0 {
			timer = time.After(wait)
		}
	}
	for size < p.b.cfg.MaxCommitBytes {
		var r *writeReq
		var ok bool
		if timer != nil {
			select {
			case r, ok = <-p.reqs:
			case <-timer:
				timer = nil
				continue
			}
		} else {
			select {
			case r, ok = <-p.reqs:
			default:
				return pending
			}
		}
		if !ok {
			return pending
		}
		pending = append(pending, r)
		size += len(r.batch)
	}
	return pending
}
