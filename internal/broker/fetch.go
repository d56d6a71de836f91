package broker

import (
	"context"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Fetch limits.
const (
	DefaultFetchBytes = 1 << 20
	MaxFetchBytes     = 64 << 20
	MaxFetchWait      = 30 * time.Second
)

// FetchRequest pulls committed records of one partition.
type FetchRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	// MaxBytes bounds the answer (default 1 MiB); at least one batch is
	// returned when one is available, however large.
	MaxBytes int
	// MaxWait is how long to wait for records when there are none.
	MaxWait time.Duration
	// Into, when not nil, is a buffer (length 0) that batches read from
	// this node's disk are read into instead of fresh memory; the
	// result's Read is then that buffer as grown, for the caller to use
	// again once done with the batches.
	Into []byte
}

// FetchResult holds whole batches. The first may start below the requested
// offset; callers skip those records. The batches are shared with the
// broker's cache and must not be modified.
type FetchResult struct {
	Batches       [][]byte
	StartOffset   int64
	HighWatermark int64
	// Read is the request's Into buffer holding the batches read into
	// it (Batches alias it), or nil when nothing was read into it (the
	// batches came from the cache or from another node).
	Read []byte
}

// Fetch returns committed records from req.Offset, waiting up to MaxWait
// when there are none yet. An offset below the start, or past the high
// watermark of the partition's leader, is ErrOffsetOutOfRange. A node
// without a replica of the partition reads it from one that has.
func (b *Broker) Fetch(ctx context.Context, req FetchRequest) (*FetchResult, error) {
	if err := b.authorize(ctx, ActionRead, topicResource(req.Topic)); err != nil {
		return nil, err
	}
	if err := b.admit(ctx, 0, 0); err != nil {
		return nil, err
	}
	principal := PrincipalFrom(ctx).Name
	if err := b.readDebt(ctx, principal); err != nil {
		return nil, err
	}
	t, p, err := b.fetchTarget(&req)
	if err != nil {
		return nil, err
	}
	var res *FetchResult
	if p.remote {
		res, err = b.remoteFetch(ctx, p, req, b.replicaNodes(p))
	} else {
		res, err = b.fetchLocal(ctx, t, p, req, false)
	}
	if err == nil {
		b.countConsumed(p, res.Batches)
		b.chargeRead(principal, res.Batches)
	}
	return res, err
}

// fetchHere serves a fetch another node relayed here: from a replica on
// this node, or refused.
func (b *Broker) fetchHere(ctx context.Context, req FetchRequest) (*FetchResult, error) {
	t, p, err := b.fetchTarget(&req)
	if err != nil {
		return nil, err
	}
	if p.remote {
		return nil, p.notHere()
	}
	return b.fetchLocal(ctx, t, p, req, true)
}

// fetchTarget validates req (filling its defaults) and finds its
// partition.
func (b *Broker) fetchTarget(req *FetchRequest) (*topic, *partition, error) {
	if req.Offset < 0 {
		return nil, nil, errorf(ErrInvalidArgument, "offset must not be negative, got %d", req.Offset)
	}
	if req.MaxBytes < 0 || req.MaxBytes > MaxFetchBytes {
		return nil, nil, errorf(ErrInvalidArgument, "max bytes must be 0 to %d, got %d", MaxFetchBytes, req.MaxBytes)
	}
	if req.MaxBytes == 0 {
		req.MaxBytes = DefaultFetchBytes
	}
	if req.MaxWait < 0 || req.MaxWait > MaxFetchWait {
		return nil, nil, errorf(ErrInvalidArgument, "max wait must be 0 to %s, got %s", MaxFetchWait, req.MaxWait)
	}
	t, err := b.topic(req.Topic)
	if err != nil {
		return nil, nil, err
	}
	p, err := t.partition(req.Partition)
	if err != nil {
		return nil, nil, err
	}
	return t, p, nil
}

// fetchLocal reads p's local replica. An offset past this replica's high
// watermark is the leader's to judge: past the end of its log it is out
// of range; below, the records are on their way (committed, or about to
// be). A follower asks the leader (unless the fetch was relayed here), so
// that a fetch answers the same on every node: a client reads what it was
// just acknowledged wherever it reads.
func (b *Broker) fetchLocal(ctx context.Context, t *topic, p *partition, req FetchRequest, relayed bool) (*FetchResult, error) {
	var deadline <-chan time.Time
	if req.MaxWait > 0 {
		timer := time.NewTimer(req.MaxWait)
		defer timer.Stop()
		deadline = timer.C
	}
	// At or past this replica's high watermark, a follower may not have
	// applied what the leader already acknowledged: a fetch that will
	// not wait asks the leader.
	if _, hw := p.offsets(); req.Offset > hw || (req.Offset == hw && deadline == nil) {
		lead := p.rep.Leader()
		if lead == 0 { // an election: the leader will judge
			lead = p.rep.WaitLeader(noLeaderWait)
		}
		switch {
		case lead == b.cfg.Cluster.NodeID && p.rep.WaitLeading(noLeaderWait):
			if end := p.rep.LogEnd(); req.Offset > end {
				start, _ := p.offsets()
				return nil, errorf(ErrOffsetOutOfRange, "offset %d is outside [%d, %d] of %s/%d", req.Offset, start, end, t.name, p.id)
			}
		case !relayed && lead != 0 && lead != b.cfg.Cluster.NodeID:
			return b.remoteFetch(ctx, p, req, []uint64{lead})
		}
	}
	for {
		changed := t.changed()
		batches, read, start, hw, err := p.readBatchesInto(req.Into, req.Offset, req.MaxBytes, 0)
		if err != nil || len(batches) > 0 || deadline == nil {
			if err != nil {
				return nil, err
			}
			return &FetchResult{Batches: batches, StartOffset: start, HighWatermark: hw, Read: read}, nil
		}
		select {
		case <-changed:
		case <-deadline:
			deadline = nil
		case <-t.deleted:
			return nil, errorf(ErrTopicNotFound, "topic %q was deleted", t.name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *Broker) countConsumed(p *partition, batches [][]byte) {
	var recs, size int
	for _, bt := range batches {
		h, err := record.ParseBatch(bt)
		if err == nil {
			recs += int(h.RecordCount)
		}
		size += len(bt)
	}
	if recs > 0 {
		b.m.consumedRecords.WithLabelValues(p.label).Add(float64(recs))
		b.m.consumedBytes.WithLabelValues(p.label).Add(float64(size))
	}
}

// OffsetForTime returns the first offset of a partition whose timestamp is
// at or after ts (Unix nanoseconds), or the high watermark if none is.
func (b *Broker) OffsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	if err := b.authorize(ctx, ActionDescribe, topicResource(topic)); err != nil {
		return 0, err
	}
	t, err := b.topic(topic)
	if err != nil {
		return 0, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return 0, err
	}
	return p.offsetForTime(ts)
}

// offsetForTime takes no broker or group lock (it may be called under
// them); it reads the log's time index and maybe a segment.
func (p *partition) offsetForTime(ts int64) (int64, error) {
	if p.remote {
		_, _, off, err := p.b.remoteOffsets(p, true, ts)
		return off, err
	}
	off, err := p.rep.Log().OffsetForTime(ts)
	if err != nil {
		return 0, errorf(ErrUnavailable, "offset for time on %s/%d: %v", p.t.name, p.id, err)
	}
	if _, hw := p.offsets(); off > hw {
		off = hw
	}
	return off, nil
}

// DecodeFrom decodes the records of batches with offsets in [from, ...),
// at most max of them (max <= 0: all), appending to dst. It returns the
// records and the offset after the last one returned (from if none), or
// after a control batch (a Kafka transaction marker: no records for
// Hermes' readers) reached before max records.
func DecodeFrom(dst []record.Record, batches [][]byte, from int64, max int) ([]record.Record, int64, error) {
	next := from
	for _, bt := range batches {
		if h, err := record.ParseHeader(bt); err == nil && h.Control() {
			if h.NextOffset() > next && (max <= 0 || len(dst) < max) {
				next = h.NextOffset()
			}
			continue
		}
		start := len(dst)
		var err error
		dst, err = record.DecodeRecords(dst, bt)
		if err != nil {
			clear(dst[start:]) // dst's array may be used again (trim's scratch)
			return dst[:start], next, err
		}
		keep := dst[:start]
		for _, r := range dst[start:] {
			if r.Offset < from || (max > 0 && len(keep) >= max) {
				continue
			}
			keep = append(keep, r)
			next = r.Offset + 1
		}
		clear(dst[len(keep):]) // the records left out
		dst = keep
		if max > 0 && len(dst) >= max {
			break
		}
	}
	return dst, next, nil
}

// EpochEnd answers Kafka's OffsetForLeaderEpoch for one partition: the
// largest leader epoch (Raft term) at or below epoch that its log holds
// and the offset where that epoch's records end; ok is false when the
// log no longer holds any entry of such an epoch. Only the partition's
// leader answers (elsewhere: a retriable ErrUnavailable naming it).
// Errors: ErrTopicNotFound, ErrPartitionNotFound.
func (b *Broker) EpochEnd(ctx context.Context, topic string, partition int32, epoch uint64) (uint64, int64, bool, error) {
	if err := b.authorize(ctx, ActionDescribe, topicResource(topic)); err != nil {
		return 0, 0, false, err
	}
	t, err := b.topic(topic)
	if err != nil {
		return 0, 0, false, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return 0, 0, false, err
	}
	if p.remote || !p.rep.Leading() {
		return 0, 0, false, p.notHere()
	}
	term, end, ok := p.rep.EpochEnd(epoch)
	return term, end, ok, nil
}
