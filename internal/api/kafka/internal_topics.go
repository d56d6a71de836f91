package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's internal topics. Kafka keeps group offsets in
// __consumer_offsets; Hermes keeps them in its metadata group. Kafka
// clients and tools look for that topic (a regex consumer skips it, some
// tools list it), so Metadata shows it as an internal topic of one
// partition, led by the group coordinator, that holds no records: a fetch
// of it answers an empty partition, a produce to it
// INVALID_TOPIC_EXCEPTION. The broker refuses the name for new topics
// (broker.ValidateTopicName).
const offsetsTopic = "__consumer_offsets"

// describeOffsetsTopic is the Metadata entry of __consumer_offsets.
func (s *Server) describeOffsetsTopic(serving map[uint64]bool) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	name := offsetsTopic
	t.Topic, t.IsInternal = &name, true
	p := kmsg.NewMetadataResponseTopicPartition()
	coord, err := s.api.GroupCoordinator()
	if err != nil || !serving[coord] {
		p.Leader, p.ErrorCode = -1, kerr.LeaderNotAvailable.Code
	} else {
		p.Leader = int32(coord)
		p.Replicas, p.ISR = []int32{p.Leader}, []int32{p.Leader}
	}
	t.Partitions = append(t.Partitions, p)
	return t
}

// internalPartition answers a read of an internal topic's partition: the
// error code, or 0 for its only partition, which is empty.
func internalPartition(partition int32) int16 {
	if partition != 0 {
		return kerr.UnknownTopicOrPartition.Code
	}
	return 0
}
