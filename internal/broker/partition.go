package broker

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermes-mq/hermes/internal/cluster"
	"github.com/hermes-mq/hermes/internal/memring"
	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/pkg/record"
)

// partition is one partition of a topic on this node: its Raft replica
// (which owns the durable log; nil when the partition lives on other
// nodes only), its in-memory ring of performance records, and the tail
// cache and high watermark that live readers use.
//
// Lock order: partition.mu is a leaf; it is not held while calling into
// the replica, another partition or the group manager.
type partition struct {
	b     *Broker
	t     *topic
	id    int32
	ring  *memring.Ring
	label string // topic name, for metrics
	// The performance records and bytes published here, and those the
	// ring evicted (the labelled series, looked up once).
	perfRecords, perfBytes, ringEvicted prometheus.Counter

	// rep is the partition's Raft replica on this node, or nil for a
	// partition this node does not hold (remote): then replicas says
	// where it is, for relays, and mirror serves its readers here.
	rep      *replication.Replica
	replicas []uint64
	remote   bool
	mirror   *mirror

	mu sync.RWMutex
	// hw is the high watermark: every offset below it is committed and
	// readable. Invariant: hw == the offset after the last entry handed
	// to committed().
	hw     int64
	start  int64 // log start offset, refreshed after retention; at least floor
	floor  int64 // records below it were deleted (DeleteRecords)
	failed error // sticky storage failure; the partition refuses I/O
	tail   tailCache
	// corruptSeen: corrupt batches reported already (reportCorrupt), by
	// their error text, which names the file and position.
	corruptSeen map[string]bool
	// repairing: a repair of a damaged batch runs (repair.go).
	repairing atomic.Bool
}

// openPartition opens partition id of t on this node: its data log and
// Raft replica (replication.Open). peers are the voters to bootstrap a
// new group with (nil: a replica joining its group, which gets
// everything from the leader).
func (b *Broker) openPartition(t *topic, id int32, replicas, peers []uint64) (*partition, error) {
	p := &partition{b: b, t: t, id: id, label: t.name, replicas: replicas,
		ring: memring.New(memring.Options{MaxRecords: b.cfg.RingRecords, MaxBytes: b.cfg.RingBytes})}
	p.tail.max = b.cfg.TailCacheBytes
	p.lookupMetrics()
	group := cluster.GroupName(t.name, t.id, id)
	rep, err := replication.Open(replication.Config{
		Group: group, NodeID: b.cfg.Cluster.NodeID, Peers: peers, TickInterval: b.cfg.Cluster.TickInterval,
		MaxQueueBytes: b.cfg.MaxQueueBytes,
		Logger:        b.log.With("group", group), OnCommit: p.committed, OnSnapshot: p.installed, OnFail: p.fail,
		Synced: func(d time.Duration, records int) {
			b.m.fsyncLatency.Observe(d.Seconds())
			b.m.commitRecords.Observe(float64(records))
		},
		Stages: func(s replication.Stages) {
			b.m.stages[0].Observe(s.Queue.Seconds())
			b.m.stages[1].Observe(s.Persist.Seconds())
			b.m.stages[2].Observe(s.Commit.Seconds())
			b.m.stages[3].Observe(s.Apply.Seconds())
		},
		Duplicate: func() { b.m.duplicates.WithLabelValues(p.label).Inc() },
	}, b.partitionDir(t.dirName(), id), replication.LogOptions{
		SegmentBytes: t.config().SegmentBytes, RetentionAge: t.config().RetentionAge, RetentionBytes: t.config().RetentionBytes,
		DedupWindow: b.cfg.DedupWindow, DedupMaxBatches: b.cfg.DedupMaxBatches, CacheBytes: b.cfg.PageCacheBytes,
		PreallocateBytes: b.cfg.PreallocateBytes, PreallocateWrite: b.cfg.PreallocateZeros,
	}, b.meta, b.cl.Transport())
	if err != nil {
		return nil, fmt.Errorf("open partition %s/%d: %w", t.name, id, err)
	}
	p.rep = rep
	p.mu.Lock()
	p.hw = rep.Committed() // only what is known committed
	p.start = rep.Log().StartOffset()
	p.mu.Unlock()
	return p, nil
}

// remotePartition is the placeholder of a partition this node does not
// hold: it knows the replicas, for relays.
func remotePartition(b *Broker, t *topic, id int32, replicas []uint64) *partition {
	p := &partition{b: b, t: t, id: id, label: t.name, replicas: replicas, remote: true}
	p.lookupMetrics()
	p.ring = memring.New(memring.Options{MaxRecords: 1, MaxBytes: 1})
	p.mirror = &mirror{p: p, stop: make(chan struct{})}
	p.mirror.tail.max = b.cfg.TailCacheBytes
	return p
}

// notHere is the error for a request this node cannot serve for p: the
// partition lives on other nodes, or this replica does not lead it.
func (p *partition) notHere() error {
	leader := uint64(0)
	if p.rep != nil {
		leader = p.rep.Leader()
	} else if others := p.b.replicaNodes(p); len(others) > 0 {
		// A replica relays publishes it does not lead; one that is
		// offline here (unopenedPartition) goes through another.
		leader = others[0]
	}
	return &kindError{kind: ErrUnavailable, retryAfter: notLeaderRetry, leaderNode: leader, leader: p.b.leaderAddr(leader),
		msg: fmt.Sprintf("partition %s/%d is led by node %d (replicas %v), not node %d", p.t.name, p.id, leader, p.replicas, p.b.cfg.Cluster.NodeID)}
}

// close stops the partition's replica (which finishes what it was writing
// and closes the log), or a placeholder's mirror.
func (p *partition) close() error {
	if p.mirror != nil {
		p.mirror.once.Do(func() { close(p.mirror.stop) })
	}
	if p.rep == nil {
		return nil
	}
	p.b.cl.Host().Remove(p.group())
	p.rep.Stop()
	return nil
}

// delete removes the closed partition's files and Raft state from this
// node.
func (p *partition) delete() {
	if p.rep == nil {
		return
	}
	if err := p.rep.Delete(p.b.meta); err != nil {
		p.b.log.Warn("cannot delete a partition's files", "topic", p.t.name, "partition", p.id, "err", err)
	}
}

func (p *partition) group() string { return cluster.GroupName(p.t.name, p.t.id, p.id) }

// fail marks the partition failed after a storage error (the replica's
// OnFail): the log's state past the last fsync is unknown (a failed fsync
// may have dropped dirty pages), so the partition refuses all I/O until
// the broker restarts and recovery truncates the log to its last valid
// batch.
//
// Then recoverLater opens the replica again from disk once the disk has
// room: the recovery of a restart, without one.
func (p *partition) fail(err error) {
	p.mu.Lock()
	if p.failed != nil {
		p.mu.Unlock()
		return
	}
	p.failed = p.storageFailure(err)
	p.tail.reset()
	p.mu.Unlock()
	p.b.log.Error("partition replica offline after a storage failure; it is opened again from disk once the disk has room",
		"topic", p.t.name, "partition", p.id, "err", err)
	p.b.m.storageFailures.Inc()
	p.b.m.offline.Inc()
	p.b.goBackground(func() { p.b.recoverLater(p) })
}

// offline reports whether a storage failure took the replica offline.
func (p *partition) offline() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.failed != nil
}

// offlineError answers a request for an offline replica: retriable, as it
// comes back by itself, pointing at another replica of the partition,
// which relays to the group's leader.
func (p *partition) offlineError() error {
	p.mu.RLock()
	failed := p.failed
	p.mu.RUnlock()
	other := uint64(0)
	for _, r := range p.replicas {
		if r != p.b.cfg.Cluster.NodeID {
			other = r
			break
		}
	}
	ke := &kindError{kind: ErrUnavailable, retryAfter: notLeaderRetry, msg: failed.Error()}
	if other != 0 {
		ke.leaderNode, ke.leader = other, p.b.leaderAddr(other)
	}
	return ke
}

// installed is the replica's snapshot callback: this replica was behind
// its leader's retention, and its log now starts at offset.
func (p *partition) installed(_ []byte, offset int64) {
	p.mu.Lock()
	p.start = max(offset, p.floor)
	if p.hw < offset {
		p.hw = offset
	}
	p.tail.reset()
	p.mu.Unlock()
	p.t.broadcast()
	p.b.log.Info("partition replica restarted from its leader's retention point", "topic", p.t.name, "partition", p.id, "offset", offset)
}

// committed is the replica's commit callback: committed batches feed the
// tail cache and the high watermark moves.
func (p *partition) committed(batches [][]byte, hw int64) {
	p.mu.Lock()
	for _, bt := range batches {
		h, err := record.ParseHeader(bt)
		if err != nil {
			continue
		}
		if len(p.tail.entries) > 0 && p.tail.entries[len(p.tail.entries)-1].next != h.BaseOffset {
			p.tail.reset() // a restart left a gap: the cache starts over
		}
		p.tail.add(h.BaseOffset, h.NextOffset(), bt)
	}
	if hw > p.hw {
		p.hw = hw
	}
	p.mu.Unlock()
	p.t.broadcast()
}

// readBatches returns committed batches from offset: from the tail cache
// when it covers offset, else from the log. The first batch may start
// below offset. A read from the log stops before the first batch past
// maxRecords records from offset (0: no bound), so that a reader with
// little record credit does not read maxBytes to return a few records
// (the tail cache copies nothing, and is not bounded so). The slices
// must not be modified.
func (p *partition) readBatches(offset int64, maxBytes, maxRecords int) (batches [][]byte, start, hw int64, err error) {
	batches, _, start, hw, err = p.readBatchesInto(nil, offset, maxBytes, maxRecords)
	return batches, start, hw, err
}

// readBatchesInto is readBatches reading what comes from the local log
// into dst (a buffer of length 0; nil: fresh memory); read is dst as
// grown when batches alias it, else nil.
func (p *partition) readBatchesInto(dst []byte, offset int64, maxBytes, maxRecords int) (batches [][]byte, read []byte, start, hw int64, err error) {
	if p.remote && p.offline() && p.onlyHere() {
		return nil, nil, 0, 0, p.offlineError()
	}
	if p.remote {
		batches, start, hw, err = p.b.remoteRead(p, offset, maxBytes)
		return batches, nil, start, hw, err
	}
	p.mu.RLock()
	start, hw, failed := p.start, p.hw, p.failed
	if failed != nil {
		p.mu.RUnlock()
		return nil, nil, start, hw, p.offlineError()
	}
	if offset > hw {
		p.mu.RUnlock()
		return nil, nil, start, hw, nil // committed elsewhere; this replica learns it soon
	}
	if offset < start {
		p.mu.RUnlock()
		return nil, nil, start, hw, errorf(ErrOffsetOutOfRange, "offset %d is outside [%d, %d] of %s/%d", offset, start, hw, p.t.name, p.id)
	}
	if offset == hw {
		p.mu.RUnlock()
		return nil, nil, start, hw, nil
	}
	if cached, ok := p.tail.read(offset, maxBytes); ok {
		p.mu.RUnlock()
		return cached, nil, start, hw, nil
	}
	p.mu.RUnlock()
	limit := hw
	if maxRecords > 0 {
		limit = min(hw, offset+int64(maxRecords))
	}
	var raw []byte
	if dst != nil {
		raw, err = p.rep.Log().ReadAppend(dst[:0], offset, maxBytes, limit)
		read = raw
	} else {
		raw, err = p.rep.Log().Read(offset, maxBytes, limit)
	}
	if errors.Is(err, replication.ErrOffsetOutOfRange) { // retention ran meanwhile
		start = p.refreshStart()
		return nil, nil, start, hw, errorf(ErrOffsetOutOfRange, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
	}
	if errors.Is(err, record.ErrCorrupt) {
		p.reportCorrupt(err)
		p.scheduleRepair(offset)
		return nil, nil, start, hw, errorf(ErrCorruptData, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
	}
	if err != nil {
		return nil, nil, start, hw, errorf(ErrUnavailable, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
	}
	for len(raw) > 0 {
		// The log checked every batch it returned (ParseBatch): only
		// split them here.
		h, err := record.ParseHeader(raw)
		if err == nil && h.Size() > len(raw) {
			err = record.ErrShortBatch
		}
		if err != nil {
			return nil, nil, start, hw, errorf(ErrUnavailable, "read %s/%d at %d: %v", p.t.name, p.id, offset, err)
		}
		batches = append(batches, raw[:h.Size()])
		raw = raw[h.Size():]
	}
	if len(batches) == 0 {
		read = nil
	}
	return batches, read, start, hw, nil
}

// reportCorrupt logs and counts a corrupt batch the first time a read
// finds it (the error names its file and position).
func (p *partition) reportCorrupt(err error) {
	msg := err.Error()
	p.mu.Lock()
	if p.corruptSeen == nil {
		p.corruptSeen = make(map[string]bool)
	}
	seen := p.corruptSeen[msg]
	if !seen && len(p.corruptSeen) < maxCorruptReports {
		p.corruptSeen[msg] = true
	}
	p.mu.Unlock()
	if seen {
		return
	}
	p.b.log.Error("corrupt data in a partition's log: reads stop before it; restore the replica (or delete the records with DeleteRecords)",
		"topic", p.t.name, "partition", p.id, "err", err)
	p.b.m.corrupt.WithLabelValues(p.label, strconv.Itoa(int(p.id))).Inc()
}

// maxCorruptReports bounds the corrupt batches a partition remembers
// having reported.
const maxCorruptReports = 64

// refreshStart takes the log's start offset after segments were deleted.
func (p *partition) refreshStart() int64 {
	start := p.rep.Log().StartOffset()
	p.mu.Lock()
	start = max(start, p.floor)
	p.start = start
	p.mu.Unlock()
	return start
}

// setFloor applies DeleteRecords: the records below offset are no longer
// readable here, and retention deletes the segments wholly below it.
func (p *partition) setFloor(offset int64) {
	if p.rep == nil || offset <= 0 {
		return
	}
	p.rep.SetFloor(offset)
	p.mu.Lock()
	if offset > p.floor {
		p.floor = offset
		p.start = max(p.start, offset)
	}
	p.mu.Unlock()
}

// offsets returns the partition's start offset and high watermark.
func (p *partition) offsets() (start, hw int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.start, p.hw
}

// lookupMetrics looks up p's labelled metric series.
func (p *partition) lookupMetrics() {
	p.perfRecords = p.b.m.publishedRecords.WithLabelValues(p.label, ModePerformance.String())
	p.perfBytes = p.b.m.publishedBytes.WithLabelValues(p.label, ModePerformance.String())
	p.ringEvicted = p.b.m.ringEvicted.WithLabelValues(p.label)
}
