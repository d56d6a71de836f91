package client

import (
	"context"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// GroupSummary is one consumer group in ListGroups.
type GroupSummary struct {
	Name    string
	Members int
	Topics  []string
}

// GroupMember is one live member of a group and the partitions it owns.
type GroupMember struct {
	ID         string
	ClientID   string
	Topic      string
	Partitions []int32
}

// GroupPartition is a group's progress on one partition.
type GroupPartition struct {
	Topic     string
	Partition int32
	// Committed is the next offset to consume, -1 when nothing was
	// committed.
	Committed     int64
	HighWatermark int64
	Lag           int64
	// Owner is the member id owning the partition, "" when none.
	Owner       string
	PendingAcks int
}

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Name       string
	Generation int64
	Members    []GroupMember
	Partitions []GroupPartition
}

// PartitionOffset is an offset in one partition of a topic; for commits,
// the next offset to consume.
type PartitionOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// ListGroups returns every consumer group. The result is the caller's.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	var resp *hermesv1.ListGroupsResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.ListGroups(ctx, &hermesv1.ListGroupsRequest{})
		return e
	})
	if err != nil {
		return nil, err
	}
	out := make([]GroupSummary, 0, len(resp.GetGroups()))
	for _, g := range resp.GetGroups() {
		out = append(out, GroupSummary{Name: g.GetGroup(), Members: int(g.GetMembers()), Topics: g.GetTopics()})
	}
	return out, nil
}

// DescribeGroup returns a group's members, their assignments and the
// group's committed offsets and lag per partition. Errors: ErrGroupNotFound.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*GroupInfo, error) {
	var resp *hermesv1.DescribeGroupResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.DescribeGroup(ctx, &hermesv1.DescribeGroupRequest{Group: group})
		return e
	})
	if err != nil {
		return nil, err
	}
	info := &GroupInfo{Name: resp.GetGroup(), Generation: resp.GetGeneration()}
	for _, m := range resp.GetMembers() {
		info.Members = append(info.Members, GroupMember{
			ID: m.GetMemberId(), ClientID: m.GetClientId(), Topic: m.GetTopic(), Partitions: m.GetPartitions(),
		})
	}
	for _, p := range resp.GetPartitions() {
		info.Partitions = append(info.Partitions, GroupPartition{
			Topic: p.GetTopic(), Partition: p.GetPartition(), Committed: p.GetCommittedOffset(),
			HighWatermark: p.GetHighWatermark(), Lag: p.GetLag(), Owner: p.GetOwner(),
			PendingAcks: int(p.GetPendingAcks()),
		})
	}
	return info, nil
}

// CommitOffsets commits offsets for a group as an administrator (no
// member): each offset is the next one to consume. The broker allows it
// only while no live member owns those partitions.
//
// Errors: ErrNotAssigned or ErrGroupNotEmpty when a live member owns one,
// ErrTopicNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange.
func (c *Client) CommitOffsets(ctx context.Context, group string, offsets ...PartitionOffset) error {
	req := &hermesv1.CommitOffsetsRequest{Group: group, Offsets: offsetsToProto(offsets)}
	return c.call(ctx, func(ctx context.Context) error {
		_, e := c.api.CommitOffsets(ctx, req)
		return e
	})
}

func offsetsToProto(offs []PartitionOffset) []*hermesv1.PartitionOffset {
	out := make([]*hermesv1.PartitionOffset, len(offs))
	for i, o := range offs {
		out[i] = &hermesv1.PartitionOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset}
	}
	return out
}
