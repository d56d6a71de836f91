package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch (v2–v4): for a leader epoch (a Raft term) a
// consumer last fetched in, the largest epoch at or below it that the
// partition's log holds and the offset where that epoch's records end —
// how a consumer detects that the log it read was truncated after a
// leader change. Served by the partition's leader. An epoch older than
// everything the log retains gets epoch -1 and offset -1 (undefined), as
// in Kafka.
func init() {
	register(kmsg.OffsetForLeaderEpoch, 2, 4, now(offsetForLeaderEpoch))
}

func offsetForLeaderEpoch(c *conn, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	lead := c.leaders(c.context())
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			_, ec := lead.lead(t.Topic, p.Partition, p.CurrentLeaderEpoch)
			switch {
			case ec != 0:
				rp.ErrorCode = ec
			case p.LeaderEpoch < 0:
			default:
				term, end, ok, err := c.s.api.EpochEnd(c.context(), t.Topic, p.Partition, uint64(p.LeaderEpoch))
				switch {
				case err != nil:
					rp.ErrorCode = code(err, scopeTopic)
				case ok:
					rp.LeaderEpoch, rp.EndOffset = int32(term), end
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
