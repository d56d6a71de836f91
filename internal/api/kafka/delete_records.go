package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// DeleteRecords (v0–2) moves partitions' start offsets forward: the
// records below are no longer readable on any node, and retention removes
// the segments wholly below (delete on the topic). Served by each
// partition's leader; -1 deletes up to the high watermark; an offset past
// it is OFFSET_OUT_OF_RANGE. The answer's low watermark is the new start.
func init() {
	register(kmsg.DeleteRecords, 0, 2, now(deleteRecords))
}

func deleteRecords(c *conn, req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	lead := c.leaders(c.context())
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			if _, ec := lead.lead(t.Topic, p.Partition, -1); ec != 0 {
				rp.ErrorCode = ec
			} else if start, err := c.s.api.DeleteRecords(c.context(), t.Topic, p.Partition, p.Offset); err != nil {
				rp.ErrorCode = code(err, scopeTopic)
				if errors.Is(err, broker.ErrOffsetOutOfRange) {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
				}
			} else {
				rp.LowWatermark = start
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
