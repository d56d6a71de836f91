package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/hermes-mq/hermes/internal/broker"
)

// leaders answers, for the partitions one request names, whether this
// node leads them: only a partition's leader serves its produce, fetch
// and offset requests. Each topic's placement is asked of the broker
// once per request.
type leaders struct {
	ctx  context.Context
	api  broker.API
	self uint64
	m    map[string]placed
}

type placed struct {
	place []broker.PartitionPlacement
	err   error
}

func (c *conn) leaders(ctx context.Context) *leaders {
	return &leaders{ctx: ctx, api: c.s.api, self: c.s.api.NodeID(), m: map[string]placed{}}
}

// lead returns a partition's placement when this node leads it and the
// leader epoch the client believes current (-1: none given) is its Raft
// term; else the Kafka error code to answer with.
func (l *leaders) lead(topic string, partition, epoch int32) (broker.PartitionPlacement, int16) {
	p, ok := l.m[topic]
	if !ok {
		p.place, p.err = l.api.Placement(l.ctx, topic)
		l.m[topic] = p
	}
	switch {
	case p.err != nil:
		return broker.PartitionPlacement{}, code(p.err, scopeTopic)
	case partition < 0 || int(partition) >= len(p.place):
		return broker.PartitionPlacement{}, kerr.UnknownTopicOrPartition.Code
	case p.place[partition].Leader != l.self:
		return broker.PartitionPlacement{}, kerr.NotLeaderForPartition.Code
	}
	pp := p.place[partition]
	return pp, checkEpoch(epoch, pp.LeaderTerm)
}

// checkEpoch compares the leader epoch a client believes current with
// the partition's Raft term: a client behind must refresh its metadata
// (FENCED_LEADER_EPOCH), one ahead knows of a leader this node has not
// heard of yet (UNKNOWN_LEADER_EPOCH).
func checkEpoch(client int32, term uint64) int16 {
	switch {
	case client < 0:
		return 0
	case int64(client) < int64(term):
		return kerr.FencedLeaderEpoch.Code
	case int64(client) > int64(term):
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
