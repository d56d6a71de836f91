package grpcapi

import (
	"context"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// DeleteGroup forgets a group's committed offsets, through the same
// broker operation as the Kafka adapter's DeleteGroups.
func (s *Service) DeleteGroup(ctx context.Context, req *pb.DeleteGroupRequest) (*pb.DeleteGroupResponse, error) {
	if err := s.b.DeleteGroup(ctx, req.Group); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteGroupResponse{}, nil
}

// OffsetsForTime answers, per partition, the first offset at or after a
// timestamp (the high watermark when none is), with the partition's
// start offset and high watermark, as the Kafka adapter's ListOffsets
// does.
func (s *Service) OffsetsForTime(ctx context.Context, req *pb.OffsetsForTimeRequest) (*pb.OffsetsForTimeResponse, error) {
	parts := req.Partitions
	if len(parts) == 0 {
		ti, err := s.b.Topic(ctx, req.Topic)
		if err != nil {
			return nil, toStatus(err)
		}
		for _, p := range ti.Partitions {
			parts = append(parts, p.Partition)
		}
	}
	resp := &pb.OffsetsForTimeResponse{}
	for _, p := range parts {
		start, hw, err := s.b.PartitionOffsets(ctx, req.Topic, p)
		if err != nil {
			return nil, toStatus(err)
		}
		off, err := s.b.OffsetForTime(ctx, req.Topic, p, req.TimestampUnixNano)
		if err != nil {
			return nil, toStatus(err)
		}
		off = max(start, min(off, hw))
		resp.Partitions = append(resp.Partitions, &pb.PartitionTimeOffset{Partition: p, Offset: off, StartOffset: start, HighWatermark: hw})
	}
	return resp, nil
}
