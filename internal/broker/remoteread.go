package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Reads of a partition this node holds no replica of are served by a node
// that holds one: the partition's replicas in order (the first is its
// preferred leader), over the public Fetch RPC marked ForwardedHeader
// (that node serves it or refuses, never relays). Any replica serves
// committed records. Subscriptions poll such partitions every
// remotePollInterval, since no local commit wakes them.

// remotePollInterval is how often a subscription looks for new records of
// a partition without a local replica.
const remotePollInterval = 100 * time.Millisecond

// remoteReadTimeout bounds one relayed read (beyond its wait).
const remoteReadTimeout = 5 * time.Second

// replicaAddrs lists the gRPC addresses of the nodes holding p, its
// preferred leader first, as the metadata says now.
func (b *Broker) replicaAddrs(p *partition) []string {
	replicas := p.replicas
	if ct, ok := b.cl.meta.Topic(p.t.name); ok && int(p.id) < len(ct.Replicas) {
		replicas = ct.Replicas[p.id]
	}
	var out []string
	for _, n := range replicas {
		if n == b.cl.cfg.NodeID {
			continue
		}
		if addr := b.leaderAddr(n); addr != "" {
			out = append(out, addr)
		}
	}
	return out
}

// remoteRead reads p from a node holding it, for a subscription: whole
// batches from offset, without waiting.
func (b *Broker) remoteRead(p *partition, offset int64, maxBytes int) ([][]byte, int64, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	res, err := b.remoteFetch(ctx, p, offset, maxBytes, 0, false)
	if err != nil {
		return nil, 0, 0, err
	}
	return res.Batches, res.StartOffset, res.HighWatermark, nil
}

// remoteFetch reads p from a node holding it: whole batches from offset,
// waiting up to wait for some. forwarded: the request was itself relayed
// here, so it fails instead of going further.
func (b *Broker) remoteFetch(ctx context.Context, p *partition, offset int64, maxBytes int, wait time.Duration, forwarded bool) (*FetchResult, error) {
	notHere := p.notHere()
	if forwarded {
		return nil, notHere
	}
	var lastErr error = notHere
	for _, addr := range b.replicaAddrs(p) {
		c, err := b.fw.api(addr)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(relayed(ctx), remoteReadTimeout+wait)
		resp, err := c.Fetch(cctx, &pb.FetchRequest{Topic: p.t.name, Partition: p.id, Offset: offset,
			MaxBytes: int32(maxBytes), MaxWaitMs: wait.Milliseconds(), Packed: true})
		cancel()
		if err != nil {
			lastErr = fromStatus(err, notHere)
			if errors.Is(lastErr, ErrOffsetOutOfRange) || errors.Is(lastErr, ErrTopicNotFound) || errors.Is(lastErr, ErrInvalidArgument) {
				return nil, lastErr // the answer, not a node's trouble
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		res := &FetchResult{StartOffset: resp.GetStartOffset(), HighWatermark: resp.GetHighWatermark()}
		for _, bt := range resp.GetBatches() {
			res.Batches = append(res.Batches, bt.GetData())
		}
		return res, nil
	}
	return nil, lastErr
}

// remoteOffsets asks a node holding p for p's start offset and high
// watermark.
func (b *Broker) remoteOffsets(p *partition) (start, hw int64, err error) {
	err = p.notHere()
	for _, addr := range b.replicaAddrs(p) {
		c, cerr := b.fw.api(addr)
		if cerr != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(relayed(context.Background()), remoteReadTimeout)
		resp, derr := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: p.t.name})
		cancel()
		if derr != nil {
			err = fromStatus(derr, p.notHere())
			continue
		}
		for _, pi := range resp.GetTopic().GetPartitions() {
			if pi.GetPartition() == p.id {
				return pi.GetStartOffset(), pi.GetEndOffset(), nil
			}
		}
		err = errorf(ErrUnavailable, "node at %s describes no partition %s/%d", addr, p.t.name, p.id)
	}
	return 0, 0, fmt.Errorf("offsets of %s/%d: %w", p.t.name, p.id, err)
}
