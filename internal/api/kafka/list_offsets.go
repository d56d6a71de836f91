package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// ListOffsets (v1–v6): the earliest offset (-2), the latest (-1, the high
// watermark: without transactions it is also the last stable offset), or
// the first offset whose record's timestamp is at or after a time (-1
// and no timestamp when there is none). Served by the partition's leader.
func init() {
	register(kmsg.ListOffsets, 1, 6, now(listOffsets))
}

func listOffsets(c *conn, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	lead := c.leaders(c.context())
	var txns []broker.TxnState // read_committed: the transactions, read once
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		info, ierr := c.s.api.Topic(c.context(), t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp, rp.Offset = -1, -1
			pp, ec := lead.lead(t.Topic, p.Partition, p.CurrentLeaderEpoch)
			switch {
			case t.Topic == offsetsTopic:
				if rp.ErrorCode = internalPartition(p.Partition); rp.ErrorCode == 0 && p.Timestamp < 0 {
					rp.Offset = 0
				}
			case ec != 0:
				rp.ErrorCode = ec
			case ierr != nil:
				rp.ErrorCode = code(ierr, scopeTopic)
			case int(p.Partition) >= len(info.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rp.LeaderEpoch = int32(pp.LeaderTerm)
				pi := info.Partitions[p.Partition]
				switch p.Timestamp {
				case -1:
					rp.Offset = pi.EndOffset
					if req.IsolationLevel == 1 {
						if ec := c.s.syncedForTerm(c.context(), t.Topic, p.Partition, pp.LeaderTerm); ec != 0 {
							rp.ErrorCode, rp.Offset = ec, -1
							break
						}
						if txns == nil {
							txns = c.s.api.Transactions()
						}
						rp.Offset = c.s.lastStable(t.Topic, p.Partition, pi.EndOffset, txns)
					}
				case -2:
					rp.Offset = pi.StartOffset
				default:
					if p.Timestamp < 0 {
						rp.ErrorCode = kerr.InvalidRequest.Code
						break
					}
					off, err := c.s.api.OffsetForTime(c.context(), t.Topic, p.Partition, p.Timestamp*1e6)
					if err != nil {
						rp.ErrorCode = code(err, scopeTopic)
						break
					}
					if ts, ok := c.timestampAt(t.Topic, p.Partition, off); ok {
						rp.Offset, rp.Timestamp = off, ts
					}
				}
			}
			if req.Version == 0 && rp.Offset >= 0 {
				rp.OldStyleOffsets = []int64{rp.Offset}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// timestampAt returns the timestamp (ms) of the record at off, if there
// is one.
func (c *conn) timestampAt(topic string, partition int32, off int64) (int64, bool) {
	res, err := c.s.api.Fetch(c.context(), broker.FetchRequest{Topic: topic, Partition: partition, Offset: off, MaxBytes: 1})
	if err != nil {
		return 0, false
	}
	for _, b := range res.Batches {
		var ts int64
		found := false
		record.ForEachRecord(b, func(r record.Record) bool {
			if r.Offset == off {
				ts, found = r.Timestamp/1e6, true
				return false
			}
			return true
		})
		if found {
			return ts, true
		}
	}
	return 0, false
}
