package kafka

import (
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// OffsetFetch (v0–v7): a group's committed offsets (-1 where none is),
// of the partitions asked for or, without topics, of every partition
// with one. Without transactions every committed offset is stable.
func init() {
	register(kmsg.OffsetFetch, 0, 7, now(offsetFetch))
}

func offsetFetch(c *conn, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	fail := func(code int16) kmsg.Response {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if code := c.allowGroup(broker.ActionDescribe, req.Group); code != 0 {
		return fail(code)
	}
	if code := c.s.checkCoordinator(); code != 0 {
		return fail(code)
	}
	committed := map[tp]int64{}
	d, err := c.s.api.DescribeGroup(c.context(), req.Group)
	switch {
	case errors.Is(err, broker.ErrGroupNotFound):
	case err != nil:
		return fail(code(err, scopeGroup))
	default:
		for _, p := range d.Partitions {
			if p.Committed >= 0 {
				committed[tp{p.Topic, p.Partition}] = p.Committed
			}
		}
	}
	entry := func(topic string, partition int32) kmsg.OffsetFetchResponseTopicPartition {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset = partition, -1
		if off, ok := committed[tp{topic, partition}]; ok {
			rp.Offset = off
		}
		empty := ""
		rp.Metadata = &empty
		return rp
	}
	if req.Topics == nil && req.Version >= 2 {
		byTopic := map[string][]int32{}
		for k := range committed {
			if c.s.api.Authorize(c.context(), broker.ActionDescribe, broker.Resource{Kind: broker.ResourceTopic, Name: k.topic}) == nil {
				byTopic[k.topic] = append(byTopic[k.topic], k.partition)
			}
		}
		names := make([]string, 0, len(byTopic))
		for n := range byTopic {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = n
			parts := byTopic[n]
			sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
			for _, p := range parts {
				rt.Partitions = append(rt.Partitions, entry(n, p))
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		denied := c.s.api.Authorize(c.context(), broker.ActionDescribe, broker.Resource{Kind: broker.ResourceTopic, Name: t.Topic}) != nil
		for _, p := range t.Partitions {
			rp := entry(t.Topic, p)
			if denied {
				rp.Offset, rp.ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
