package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Reads of a partition this node holds no replica of are served by nodes
// that hold one, over the node-to-node service, the partition's replicas
// in order (the first is its preferred leader; any replica serves
// committed records):
//
//   - a fetch is relayed as it is (nodepb.Node.Fetch, waiting there);
//   - subscriptions read a mirror: a replica streams the partition's
//     committed batches here as they commit (nodepb.Node.Follow) into a
//     tail cache, and the topic's readers are woken as by a local commit.
//     A reader behind the mirror reads with a relayed fetch. The mirror
//     follows while someone reads it, and stops followIdle after the last
//     read.

// remoteReadTimeout bounds one relayed read (beyond its wait).
const remoteReadTimeout = 5 * time.Second

// followIdle is how long a mirror follows its partition after the last
// read.
const followIdle = 30 * time.Second

// followRetry is the pause before a broken follow starts again.
const followRetry = 200 * time.Millisecond

// replicaNodes lists the nodes holding p, its preferred leader first, as
// the metadata says now.
func (b *Broker) replicaNodes(p *partition) []uint64 {
	replicas := p.replicas
	if ct, ok := b.cl.Meta().Topic(p.t.name); ok && ct.ID == p.t.id && int(p.id) < len(ct.Replicas) {
		replicas = ct.Replicas[p.id]
	}
	var out []uint64
	for _, n := range replicas {
		if n != b.cfg.Cluster.NodeID {
			out = append(out, n)
		}
	}
	return out
}

// isAnswer reports whether a relayed read's error is the answer (the same
// on every replica), not one replica's trouble.
func isAnswer(err error) bool {
	return errors.Is(err, ErrOffsetOutOfRange) || errors.Is(err, ErrTopicNotFound) ||
		errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrPartitionNotFound)
}

// remoteFetch reads p from the first of nodes that answers: whole
// batches from req.Offset, waiting up to req.MaxWait there for some.
func (b *Broker) remoteFetch(ctx context.Context, p *partition, req FetchRequest, nodes []uint64) (*FetchResult, error) {
	var lastErr error = p.notHere()
	for _, node := range nodes {
		c, err := b.nodeClient(node)
		if err != nil {
			lastErr = err
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, remoteReadTimeout+req.MaxWait)
		resp, err := c.Fetch(cctx, &nodepb.FetchRequest{Topic: p.t.name, Partition: p.id, Offset: req.Offset,
			MaxBytes: int32(req.MaxBytes), MaxWaitMs: req.MaxWait.Milliseconds()})
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			lastErr = b.callError(node, err)
			continue
		case resp.GetError() != nil:
			lastErr = b.fromNodeError(resp.GetError())
			if isAnswer(lastErr) {
				return nil, lastErr
			}
			continue
		}
		return &FetchResult{Batches: resp.GetBatches(), StartOffset: resp.GetStartOffset(), HighWatermark: resp.GetHighWatermark()}, nil
	}
	return nil, lastErr
}

// remoteOffsets asks a node holding p for p's start offset and high
// watermark, and with forTime the first offset at or after ts.
func (b *Broker) remoteOffsets(p *partition, forTime bool, ts int64) (start, hw, offset int64, err error) {
	err = p.notHere()
	for _, node := range b.replicaNodes(p) {
		c, cerr := b.nodeClient(node)
		if cerr != nil {
			err = cerr
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
		resp, rerr := c.Offsets(ctx, &nodepb.OffsetsRequest{Topic: p.t.name, Partition: p.id, ForTime: forTime, TimestampUnixNano: ts})
		cancel()
		switch {
		case rerr != nil:
			err = b.callError(node, rerr)
			continue
		case resp.GetError() != nil:
			if err = b.fromNodeError(resp.GetError()); isAnswer(err) {
				return 0, 0, 0, err
			}
			continue
		}
		return resp.GetStartOffset(), resp.GetHighWatermark(), resp.GetOffsetForTime(), nil
	}
	return 0, 0, 0, fmt.Errorf("offsets of %s/%d: %w", p.t.name, p.id, err)
}

// mirror follows a partition this node holds no replica of, for the
// subscriptions reading it here.
type mirror struct {
	p    *partition
	stop chan struct{} // closed when the placeholder goes
	once sync.Once

	mu       sync.Mutex
	tail     tailCache // guarded by mu
	from     int64     // where the follow began; guarded by mu
	start    int64     // the partition's start and high watermark as
	hw       int64     // the replica last said; guarded by mu
	lastRead time.Time // guarded by mu
	running  bool      // a follower goroutine runs; guarded by mu
}

// remoteRead reads p, a partition without a local replica, for a
// subscription: from the mirror when it holds offset, else with a relayed
// fetch when offset is behind it; nothing when offset is ahead of it (the
// mirror wakes the topic's readers when records arrive).
func (b *Broker) remoteRead(p *partition, offset int64, maxBytes int) ([][]byte, int64, int64, error) {
	m := p.mirror
	m.mu.Lock()
	m.lastRead = time.Now()
	if !m.running {
		m.running = true
		m.from = offset
		m.tail.reset()
		go m.follow(offset)
	}
	if cached, ok := m.tail.read(offset, maxBytes); ok {
		start, hw := m.start, m.hw
		m.mu.Unlock()
		return cached, start, hw, nil
	}
	behind := offset < m.from || len(m.tail.entries) > 0 && offset < m.tail.entries[0].base
	start, hw := m.start, m.hw
	m.mu.Unlock()
	if !behind {
		return nil, start, hw, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	res, err := b.remoteFetch(ctx, p, FetchRequest{Topic: p.t.name, Partition: p.id, Offset: offset, MaxBytes: maxBytes}, b.replicaNodes(p))
	if err != nil {
		return nil, start, hw, err
	}
	return res.Batches, res.StartOffset, res.HighWatermark, nil
}

// follow streams the partition from a replica into the mirror, from
// offset on, until nobody read it for followIdle or the placeholder goes.
func (m *mirror) follow(offset int64) {
	b, p := m.p.b, m.p
	defer func() {
		m.mu.Lock()
		m.running = false
		m.tail.reset()
		m.mu.Unlock()
	}()
	for attempt := 0; ; attempt++ {
		nodes := b.replicaNodes(p)
		if len(nodes) > 0 {
			offset = m.followFrom(nodes[attempt%len(nodes)], offset)
		}
		if m.idle() {
			return
		}
		select {
		case <-m.stop:
			return
		case <-p.t.deleted:
			return
		case <-time.After(followRetry):
		}
	}
}

// idle reports whether nobody read the mirror for followIdle.
func (m *mirror) idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Since(m.lastRead) > followIdle
}

// followFrom follows from node until the stream ends, and returns the
// offset to go on from.
func (m *mirror) followFrom(node uint64, offset int64) int64 {
	b, p := m.p.b, m.p
	c, err := b.nodeClient(node)
	if err != nil {
		return offset
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // end the stream when the mirror is not needed any more
		t := time.NewTicker(followIdle / 4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.stop:
			case <-p.t.deleted:
			case <-t.C:
				if !m.idle() {
					continue
				}
			}
			cancel()
			return
		}
	}()
	stream, err := c.Follow(ctx, &nodepb.FollowRequest{Topic: p.t.name, Partition: p.id, Offset: offset, MaxBytes: followBytes})
	if err != nil {
		return offset
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return offset
		}
		if e := resp.GetError(); e != nil {
			if errors.Is(b.fromNodeError(e), ErrOffsetOutOfRange) && offset < resp.GetStartOffset() {
				offset = resp.GetStartOffset() // retention passed the readers: they skip ahead too
			}
			return offset
		}
		offset = m.add(resp, offset)
		p.t.broadcast()
	}
}

// add puts a follow response's batches into the mirror and returns the
// offset after them.
func (m *mirror) add(resp *nodepb.FollowResponse, offset int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start, m.hw = resp.GetStartOffset(), resp.GetHighWatermark()
	for _, bt := range resp.GetBatches() {
		base, next := batchBase(bt), batchNext(bt)
		if next <= offset {
			continue
		}
		if n := len(m.tail.entries); n > 0 && m.tail.entries[n-1].next != base || n == 0 && base > m.from {
			m.tail.reset() // a gap (the follow started over elsewhere): the cache starts here
			m.from = base
		}
		m.tail.add(base, next, bt)
		offset = next
	}
	return offset
}

// batchBase is the offset of a stored batch's first record.
func batchBase(bt []byte) int64 {
	h, err := record.ParseHeader(bt)
	if err != nil {
		return 0
	}
	return h.BaseOffset
}
