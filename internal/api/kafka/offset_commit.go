package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// OffsetCommit (v0–v8): a group member's commit (checked against its
// generation), or, with generation -1 and no member, a commit from
// outside the group while it has no Kafka members. The offsets are the
// broker's committed offsets of the group, replicated before the answer
// and read alike by every API. Commit metadata strings are not kept.
func init() {
	register(kmsg.OffsetCommit, 0, 8, now(offsetCommit))
}

func offsetCommit(c *conn, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	all := func(code int16) kmsg.Response {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if code := c.allowGroup(broker.ActionRead, req.Group); code != 0 {
		return all(code)
	}
	if code := c.s.checkCoordinator(); code != 0 {
		return all(code)
	}
	if code := c.s.groups.commitCheck(req); code != 0 {
		return all(code)
	}
	var offsets []broker.Offset
	var pending []*kmsg.OffsetCommitResponseTopicPartition
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
		rps := resp.Topics[len(resp.Topics)-1].Partitions
		var terr error
		if err := c.s.api.Authorize(c.context(), broker.ActionRead, broker.Resource{Kind: broker.ResourceTopic, Name: t.Topic}); err != nil {
			terr = err
		}
		var info broker.TopicInfo
		if terr == nil {
			info, terr = c.s.api.Topic(c.context(), t.Topic)
		}
		for i, p := range t.Partitions {
			rp := &rps[i]
			*rp = kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case terr != nil:
				rp.ErrorCode = code(terr, scopeTopic)
			case p.Partition < 0 || int(p.Partition) >= len(info.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.Offset < 0:
				rp.ErrorCode = kerr.InvalidCommitOffsetSize.Code
			default:
				offsets = append(offsets, broker.Offset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset})
				pending = append(pending, rp)
			}
		}
	}
	if len(offsets) == 0 {
		return resp
	}
	if err := c.s.api.CommitOffsets(c.context(), req.Group, "", offsets); err != nil {
		code := commitCode(err)
		for _, rp := range pending {
			rp.ErrorCode = code
		}
	}
	return resp
}

// commitCode maps a failed commit: a partition a Hermes group member
// owns cannot take a Kafka member's commit (UNKNOWN_MEMBER_ID: the
// committer is not the partition's member).
func commitCode(err error) int16 {
	switch code(err, scopeGroup) {
	case kerr.NonEmptyGroup.Code:
		return kerr.UnknownMemberID.Code
	case kerr.LeaderNotAvailable.Code, kerr.NotLeaderForPartition.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.InvalidRequest.Code:
		return kerr.InvalidCommitOffsetSize.Code
	default:
		return code(err, scopeGroup)
	}
}
