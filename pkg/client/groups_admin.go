package client

import (
	"context"
	"time"

	"google.golang.org/grpc/status"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// DeleteGroup forgets a consumer group's committed offsets.
//
// Errors: ErrGroupNotEmpty while the group has live members,
// ErrGroupNotFound when it has no committed offsets.
//
// Only the group coordinator deletes a group: on a cluster the call goes
// to the node the dialled one names.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	req := &hermesv1.DeleteGroupRequest{Group: group}
	return c.call(ctx, func(ctx context.Context) error {
		_, e := c.api.DeleteGroup(ctx, req)
		if addr := leaderAddressOf(e); addr != "" && c.cfg.direct {
			api, err := c.leaderAPI(ctx, addr)
			if err != nil {
				return e
			}
			_, e = api.DeleteGroup(ctx, req)
		}
		return e
	})
}

// leaderAddressOf is the node a gRPC error's ErrorInfo names ("": none).
func leaderAddressOf(err error) string {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*hermesv1.ErrorInfo); ok {
			return info.GetLeaderAddress()
		}
	}
	return ""
}

// TimeOffset is where a timestamp falls in one partition.
type TimeOffset struct {
	Partition int32
	// Offset is the first offset whose record timestamp is at or after
	// the time asked, or HighWatermark when no record is that recent.
	Offset        int64
	StartOffset   int64
	HighWatermark int64
}

// OffsetsForTime returns, for each of partitions (every partition of
// the topic when none are given), the first offset at or after t.
//
// Errors: ErrTopicNotFound, ErrPartitionNotFound.
func (c *Client) OffsetsForTime(ctx context.Context, topic string, t time.Time, partitions ...int32) ([]TimeOffset, error) {
	req := &hermesv1.OffsetsForTimeRequest{Topic: topic, Partitions: partitions, TimestampUnixNano: t.UnixNano()}
	var resp *hermesv1.OffsetsForTimeResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.OffsetsForTime(ctx, req)
		return e
	})
	if err != nil {
		return nil, err
	}
	out := make([]TimeOffset, 0, len(resp.GetPartitions()))
	for _, p := range resp.GetPartitions() {
		out = append(out, TimeOffset{Partition: p.GetPartition(), Offset: p.GetOffset(),
			StartOffset: p.GetStartOffset(), HighWatermark: p.GetHighWatermark()})
	}
	return out, nil
}
