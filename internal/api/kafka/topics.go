package kafka

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// CreateTopics (v0–v7) and DeleteTopics (v0–v5, by name) on the broker's
// topic administration. The topic configs honoured are retention.ms,
// retention.bytes, max.message.bytes and segment.bytes; others are
// refused with INVALID_CONFIG, as are explicit replica assignments.
func init() {
	register(kmsg.CreateTopics, 0, 7, now(createTopics))
	register(kmsg.DeleteTopics, 0, 5, now(deleteTopics))
	register(kmsg.InitProducerID, 0, 4, now(initProducerID))
}

// topicConfig applies Kafka topic configs to cfg.
func topicConfig(cfg *broker.TopicConfig, name string, value *string) error {
	if value == nil {
		return nil // the default
	}
	n, err := strconv.ParseInt(*value, 10, 64)
	if err != nil {
		return fmt.Errorf("config %s: %q is not a number", name, *value)
	}
	switch name {
	case "retention.ms":
		if n < 0 {
			n = 0 // -1: unlimited
		}
		cfg.RetentionAge = time.Duration(n) * time.Millisecond
	case "retention.bytes":
		if n < 0 {
			n = 0
		}
		cfg.RetentionBytes = n
	case "max.message.bytes":
		if n <= 0 || n > 1<<31-1 {
			return fmt.Errorf("config max.message.bytes: %d is out of range", n)
		}
		cfg.MaxMessageBytes = int32(n)
	case "segment.bytes":
		cfg.SegmentBytes = n
	default:
		return fmt.Errorf("config %s is not supported", name)
	}
	return nil
}

func createTopics(c *conn, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		cfg := broker.TopicConfig{}
		if t.NumPartitions > 0 {
			cfg.Partitions = t.NumPartitions
		} else if t.NumPartitions == 0 || t.NumPartitions < -1 {
			rt.ErrorCode = kerr.InvalidPartitions.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if t.ReplicationFactor > 0 {
			cfg.ReplicationFactor = int32(t.ReplicationFactor)
		} else if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
			rt.ErrorCode = kerr.InvalidReplicationFactor.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		// Kafka's own codes for what Hermes would refuse as an invalid
		// argument: too many partitions, more replicas than nodes.
		if cfg.Partitions > broker.MaxPartitions {
			rt.ErrorCode = kerr.InvalidPartitions.Code
			msg := fmt.Sprintf("a topic has at most %d partitions, not %d", broker.MaxPartitions, cfg.Partitions)
			rt.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if n := len(c.s.api.Nodes()); n > 0 && int(cfg.ReplicationFactor) > n {
			rt.ErrorCode = kerr.InvalidReplicationFactor.Code
			msg := fmt.Sprintf("replication factor %d needs %d nodes; the cluster has %d", cfg.ReplicationFactor, cfg.ReplicationFactor, n)
			rt.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if len(t.ReplicaAssignment) > 0 {
			rt.ErrorCode = kerr.InvalidReplicaAssignment.Code
			msg := "explicit replica assignments are not supported: Hermes places replicas"
			rt.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		var cerr error
		for _, kv := range t.Configs {
			if cerr = topicConfig(&cfg, kv.Name, kv.Value); cerr != nil {
				break
			}
		}
		if cerr != nil {
			rt.ErrorCode, rt.ErrorMessage = kerr.InvalidConfig.Code, message(cerr)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if req.ValidateOnly {
			if err := c.s.api.Authorize(c.context(), broker.ActionCreate, broker.Resource{Kind: broker.ResourceTopic, Name: t.Topic}); err != nil {
				rt.ErrorCode = code(err, scopeTopic)
			} else if _, err := c.s.api.Topic(c.context(), t.Topic); err == nil {
				rt.ErrorCode = kerr.TopicAlreadyExists.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		info, err := c.s.api.CreateTopic(c.context(), t.Topic, cfg, false)
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = code(err, scopeTopic), message(err)
			if rt.ErrorCode == kerr.InvalidRequest.Code {
				rt.ErrorCode = kerr.InvalidConfig.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.NumPartitions = info.Config.Partitions
		rt.ReplicationFactor = int16(info.Config.ReplicationFactor)
		rt.Configs = describedConfigs(info.Config)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// describedConfigs are a topic's configs as CreateTopics reports them.
func describedConfigs(cfg broker.TopicConfig) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, kv := range kafkaConfigs(cfg) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		v := kv[1]
		c.Name, c.Value, c.Source = kv[0], &v, 5 // DEFAULT_CONFIG
		out = append(out, c)
	}
	return out
}

// kafkaConfigs are a topic's configs under Kafka's names.
func kafkaConfigs(cfg broker.TopicConfig) [][2]string {
	retention := int64(-1)
	if cfg.RetentionAge > 0 {
		retention = cfg.RetentionAge.Milliseconds()
	}
	rbytes := int64(-1)
	if cfg.RetentionBytes > 0 {
		rbytes = cfg.RetentionBytes
	}
	return [][2]string{
		{"cleanup.policy", "delete"},
		{"max.message.bytes", strconv.Itoa(int(cfg.MaxMessageBytes))},
		{"retention.bytes", strconv.FormatInt(rbytes, 10)},
		{"retention.ms", strconv.FormatInt(retention, 10)},
		{"segment.bytes", strconv.FormatInt(cfg.SegmentBytes, 10)},
	}
}

func deleteTopics(c *conn, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, name := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		rt.Topic = &n
		if err := c.s.api.DeleteTopic(c.context(), name); err != nil {
			rt.ErrorCode, rt.ErrorMessage = code(err, scopeTopic), message(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// initProducerID gives an idempotent producer its id (epoch 0), or, when
// it names its current id and epoch (KIP-360), the next epoch of that
// id, which restarts its sequences. Transactional ids are refused:
// transactions are not served.
func initProducerID(c *conn, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		initTransactional(c, req, resp)
		return resp
	}
	if req.Version >= 3 && req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < 1<<15-1 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = c.s.pids.newID(c.s.api.NodeID()), 0
	return resp
}
