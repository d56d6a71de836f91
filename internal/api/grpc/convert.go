package grpcapi

import (
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// errorf makes an error of a broker kind (see broker.Errorf).
var errorf = broker.Errorf

func modeFromPB(m pb.DeliveryMode) (broker.Mode, error) {
	switch m {
	case pb.DeliveryMode_DELIVERY_MODE_UNSPECIFIED:
		return broker.ModeDefault, nil
	case pb.DeliveryMode_DELIVERY_MODE_CONSISTENT:
		return broker.ModeConsistent, nil
	case pb.DeliveryMode_DELIVERY_MODE_EVENTUAL:
		return broker.ModeEventual, nil
	case pb.DeliveryMode_DELIVERY_MODE_PERFORMANCE:
		return broker.ModePerformance, nil
	}
	return 0, invalid("unknown delivery mode %d", m)
}

func modeToPB(m broker.Mode) pb.DeliveryMode {
	switch m {
	case broker.ModeConsistent:
		return pb.DeliveryMode_DELIVERY_MODE_CONSISTENT
	case broker.ModeEventual:
		return pb.DeliveryMode_DELIVERY_MODE_EVENTUAL
	case broker.ModePerformance:
		return pb.DeliveryMode_DELIVERY_MODE_PERFORMANCE
	}
	return pb.DeliveryMode_DELIVERY_MODE_UNSPECIFIED
}

func topicConfigFromPB(c *pb.TopicConfig) (broker.TopicConfig, error) {
	if c == nil {
		return broker.TopicConfig{}, nil
	}
	mode, err := modeFromPB(c.DefaultMode)
	if err != nil {
		return broker.TopicConfig{}, err
	}
	if c.RetentionMs < 0 || c.RetentionBytes < 0 || c.SegmentBytes < 0 || c.MaxMessageBytes < 0 || c.Partitions < 0 {
		return broker.TopicConfig{}, invalid("topic config values must not be negative")
	}
	return broker.TopicConfig{
		Partitions:        c.Partitions,
		RetentionAge:      time.Duration(c.RetentionMs) * time.Millisecond,
		RetentionBytes:    c.RetentionBytes,
		MaxMessageBytes:   c.MaxMessageBytes,
		DefaultMode:       mode,
		SegmentBytes:      c.SegmentBytes,
		ReplicationFactor: c.ReplicationFactor,
	}, nil
}

func topicInfoToPB(ti broker.TopicInfo) *pb.TopicInfo {
	out := &pb.TopicInfo{
		Name: ti.Name,
		Config: &pb.TopicConfig{
			Partitions:        ti.Config.Partitions,
			RetentionMs:       ti.Config.RetentionAge.Milliseconds(),
			RetentionBytes:    ti.Config.RetentionBytes,
			MaxMessageBytes:   ti.Config.MaxMessageBytes,
			DefaultMode:       modeToPB(ti.Config.DefaultMode),
			SegmentBytes:      ti.Config.SegmentBytes,
			ReplicationFactor: ti.Config.ReplicationFactor,
		},
	}
	for _, p := range ti.Partitions {
		out.Partitions = append(out.Partitions, &pb.PartitionInfo{
			Partition: p.Partition, StartOffset: p.StartOffset, EndOffset: p.EndOffset,
			SizeBytes: p.SizeBytes, RingEndOffset: p.RingEnd, RingEvicted: p.RingEvicted,
		})
	}
	return out
}

// recordsFromPB converts published records. An empty message_id is left
// zero for the broker to fill; any other length than 16 is refused.
func recordsFromPB(in []*pb.Record) ([]record.Record, error) {
	out := make([]record.Record, len(in))
	for i, r := range in {
		switch len(r.MessageId) {
		case 0:
		case 16:
			copy(out[i].MessageID[:], r.MessageId)
		default:
			return nil, invalid("record %d: message_id must be 16 bytes, got %d", i, len(r.MessageId))
		}
		if r.TimestampUnixNano < 0 {
			return nil, invalid("record %d: negative timestamp", i)
		}
		out[i].Timestamp = r.TimestampUnixNano
		out[i].Key = r.Key
		if r.Key != nil && len(r.Key) == 0 {
			out[i].Key = []byte{}
		}
		out[i].Payload = r.Payload
		if len(r.Headers) > 0 {
			out[i].Headers = make([]record.Header, len(r.Headers))
			for j, h := range r.Headers {
				out[i].Headers[j] = record.Header{Key: h.Key, Value: h.Value}
			}
		}
	}
	return out, nil
}

func recordToPB(r *record.Record, partition int32, mode broker.Mode, deliveries int) *pb.Record {
	out := &pb.Record{
		Offset:            r.Offset,
		MessageId:         r.MessageID[:],
		Key:               r.Key,
		Payload:           r.Payload,
		TimestampUnixNano: r.Timestamp,
		Partition:         partition,
		Mode:              modeToPB(mode),
		DeliveryCount:     uint32(deliveries),
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]*pb.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = &pb.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}
