package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Metadata: every node with a Kafka listener, and each topic's partitions
// with their leader (the Raft leader of the partition's group), replicas
// and leader epoch (the group's Raft term). Every replica of a Raft group
// is reported in sync: Raft has no ISR, and a quorum of them holds every
// acknowledged record.
func init() {
	register(kmsg.Metadata, 0, 12, now(metadata))
}

func metadata(c *conn, req *kmsg.MetadataRequest) kmsg.Response {
	resp := kmsg.NewPtrMetadataResponse()
	s := c.s
	nodes := s.nodes()
	serving := map[uint64]bool{}
	for _, n := range nodes {
		serving[n.ID] = true
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = int32(n.ID)
		b.Host, b.Port = splitHostPort(n.KafkaAddr)
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = int32(s.api.NodeID())

	var names []string
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		topics, err := s.api.Topics(c.context())
		if err == nil {
			for _, t := range topics {
				names = append(names, t.Name)
			}
			names = append(names, offsetsTopic)
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, name := range names {
		if name == offsetsTopic {
			resp.Topics = append(resp.Topics, s.describeOffsetsTopic(serving))
			continue
		}
		resp.Topics = append(resp.Topics, s.describeTopic(c, name, autoCreate, serving))
	}
	return resp
}

// nodes are the cluster's nodes that serve Kafka, this one with the
// address it advertises.
func (s *Server) nodes() []broker.ClusterNode {
	var out []broker.ClusterNode
	self := s.api.NodeID()
	for _, n := range s.api.Nodes() {
		if n.ID == self {
			n.KafkaAddr = s.cfg.Advertise
		}
		if n.KafkaAddr != "" {
			out = append(out, n)
		}
	}
	return out
}

// describeTopic describes a topic; serving are the nodes with a Kafka
// listener.
func (s *Server) describeTopic(c *conn, name string, autoCreate bool, serving map[uint64]bool) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = &name
	place, err := s.api.Placement(c.context(), name)
	if errors.Is(err, broker.ErrTopicNotFound) && autoCreate {
		if _, cerr := s.api.CreateTopic(c.context(), name, broker.TopicConfig{}, true); cerr == nil {
			place, err = s.api.Placement(c.context(), name)
		} else if !errors.Is(cerr, broker.ErrPermissionDenied) {
			err = cerr
		}
	}
	if err != nil {
		t.ErrorCode = code(err, scopeTopic)
		if errors.Is(err, broker.ErrTopicNotFound) {
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		return t
	}
	for _, pp := range place {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = pp.Partition
		leader, epoch := s.leaderOf(pp)
		p.Leader, p.LeaderEpoch = leader, epoch
		if leader < 0 || !serving[uint64(leader)] {
			p.Leader = -1
			p.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		for _, r := range pp.Replicas {
			p.Replicas = append(p.Replicas, int32(r))
			if serving[r] {
				p.ISR = append(p.ISR, int32(r))
			} else {
				p.OfflineReplicas = append(p.OfflineReplicas, int32(r))
			}
		}
		t.Partitions = append(t.Partitions, p)
	}
	return t
}

// leaderOf is the Kafka leader and epoch of a partition. A node without a
// replica of the partition does not follow its elections: it names the
// first replica with an unknown epoch, and that node, if it does not
// lead, answers NOT_LEADER_OR_FOLLOWER, which makes the client ask again.
func (s *Server) leaderOf(pp broker.PartitionPlacement) (int32, int32) {
	switch {
	case pp.Leader != 0:
		return int32(pp.Leader), int32(pp.LeaderTerm)
	case pp.Local:
		return -1, -1
	case len(pp.Replicas) > 0:
		return int32(pp.Replicas[0]), -1
	}
	return -1, -1
}
