package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// CreatePartitions (v0–3) adds partitions to topics; IncrementalAlterConfigs
// (v0–1) and AlterConfigs (v0–2) change a topic's retention.ms,
// retention.bytes and max.message.bytes. Each is one AlterTopic of the
// broker (alter on the topic), so every API sees the change at once.
// segment.bytes is set at creation; cleanup.policy is always delete;
// broker configs are `hermes serve` flags: changing any of them is
// refused with INVALID_CONFIG (INVALID_REQUEST for brokers) and a message.
func init() {
	register(kmsg.CreatePartitions, 0, 3, now(createPartitions))
	register(kmsg.IncrementalAlterConfigs, 0, 1, now(incrementalAlterConfigs))
	register(kmsg.AlterConfigs, 0, 2, now(alterConfigs))
}

func createPartitions(c *conn, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code int16, msg string) {
			rt.ErrorCode, rt.ErrorMessage = code, &msg
		}
		switch {
		case t.Assignment != nil:
			fail(kerr.InvalidReplicaAssignment.Code, "explicit replica assignments are not supported: Hermes places replicas")
		case t.Count <= 0:
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("a topic has at least 1 partition, not %d", t.Count))
		default:
			info, err := c.s.api.Topic(c.context(), t.Topic)
			switch {
			case err != nil:
				rt.ErrorCode, rt.ErrorMessage = code(err, scopeTopic), message(err)
			case int(t.Count) <= len(info.Partitions):
				fail(kerr.InvalidPartitions.Code, fmt.Sprintf("topic %s has %d partitions; the count can only grow", t.Topic, len(info.Partitions)))
			case req.ValidateOnly:
				if _, err := (broker.TopicChange{Partitions: &t.Count}).Apply(info.Config); err != nil {
					fail(kerr.InvalidPartitions.Code, err.Error())
				}
			default:
				count := t.Count
				if _, err := c.s.api.AlterTopic(c.context(), t.Topic, broker.TopicChange{Partitions: &count}); err != nil {
					rt.ErrorCode, rt.ErrorMessage = code(err, scopeTopic), message(err)
					if errors.Is(err, broker.ErrInvalidArgument) {
						rt.ErrorCode = kerr.InvalidPartitions.Code
					}
				}
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// configOp is one config change: set to value, or (value nil) back to
// its default.
type configOp struct {
	name  string
	value *string
}

// topicChange turns config changes into a TopicChange.
func topicChange(ops []configOp) (broker.TopicChange, error) {
	var ch broker.TopicChange
	for _, op := range ops {
		var n int64
		if op.value != nil {
			v, err := strconv.ParseInt(*op.value, 10, 64)
			if op.name != "cleanup.policy" && err != nil {
				return ch, fmt.Errorf("config %s: %q is not a number", op.name, *op.value)
			}
			n = v
		}
		switch op.name {
		case "retention.ms":
			d := time.Duration(max(n, 0)) * time.Millisecond // -1: forever
			ch.RetentionAge = &d
		case "retention.bytes":
			b := max(n, 0) // -1: unlimited
			ch.RetentionBytes = &b
		case "max.message.bytes":
			m := int32(broker.DefaultMaxMessageBytes)
			if op.value != nil {
				if n <= 0 || n > broker.MaxMaxMessageBytes {
					return ch, fmt.Errorf("config max.message.bytes: %d is out of range (1 to %d)", n, broker.MaxMaxMessageBytes)
				}
				m = int32(n)
			}
			ch.MaxMessageBytes = &m
		case "cleanup.policy":
			if op.value != nil && *op.value != "delete" {
				return ch, fmt.Errorf("config cleanup.policy: Hermes deletes old segments (delete); %q is not supported", *op.value)
			}
		case "segment.bytes":
			return ch, errors.New("config segment.bytes is set when the topic is created")
		default:
			return ch, fmt.Errorf("config %s is not supported (retention.ms, retention.bytes, max.message.bytes)", op.name)
		}
	}
	return ch, nil
}

// alterTopicConfigs applies ops to a topic (or, validateOnly, checks
// them) and returns the error code and message.
func (c *conn) alterTopicConfigs(topic string, ops []configOp, validateOnly bool) (int16, *string) {
	ch, err := topicChange(ops)
	if err != nil {
		return kerr.InvalidConfig.Code, kmsg.StringPtr(err.Error())
	}
	if validateOnly {
		info, err := c.s.api.Topic(c.context(), topic)
		if err == nil {
			_, err = ch.Apply(info.Config)
		}
		if err != nil {
			return configCode(err), message(err)
		}
		return 0, nil
	}
	if _, err := c.s.api.AlterTopic(c.context(), topic, ch); err != nil {
		return configCode(err), message(err)
	}
	return 0, nil
}

func configCode(err error) int16 {
	if errors.Is(err, broker.ErrInvalidArgument) {
		return kerr.InvalidConfig.Code
	}
	return code(err, scopeTopic)
}

func brokerConfigRefused() *string {
	return kmsg.StringPtr("broker configs are the flags of hermes serve; they cannot be changed at run time")
}

func incrementalAlterConfigs(c *conn, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			var ops []configOp
			for _, cfg := range r.Configs {
				switch cfg.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					if cfg.Value == nil {
						rr.ErrorCode, rr.ErrorMessage = kerr.InvalidConfig.Code, kmsg.StringPtr("config "+cfg.Name+": SET needs a value")
					}
					ops = append(ops, configOp{cfg.Name, cfg.Value})
				case kmsg.IncrementalAlterConfigOpDelete:
					ops = append(ops, configOp{cfg.Name, nil})
				default:
					rr.ErrorCode, rr.ErrorMessage = kerr.InvalidConfig.Code,
						kmsg.StringPtr(fmt.Sprintf("config %s: %s applies to list configs; Hermes' topic configs are single values", cfg.Name, cfg.Op))
				}
			}
			if rr.ErrorCode == 0 {
				rr.ErrorCode, rr.ErrorMessage = c.alterTopicConfigs(r.ResourceName, ops, req.ValidateOnly)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			rr.ErrorCode, rr.ErrorMessage = kerr.InvalidRequest.Code, brokerConfigRefused()
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// alterConfigs is the older, non-incremental AlterConfigs: the configs
// given are set, the others go back to their defaults.
func alterConfigs(c *conn, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			given := map[string]bool{}
			var ops []configOp
			for _, cfg := range r.Configs {
				given[cfg.Name] = true
				ops = append(ops, configOp{cfg.Name, cfg.Value})
			}
			for _, name := range []string{"retention.ms", "retention.bytes", "max.message.bytes"} {
				if !given[name] {
					ops = append(ops, configOp{name, nil})
				}
			}
			rr.ErrorCode, rr.ErrorMessage = c.alterTopicConfigs(r.ResourceName, ops, req.ValidateOnly)
		case kmsg.ConfigResourceTypeBroker:
			rr.ErrorCode, rr.ErrorMessage = kerr.InvalidRequest.Code, brokerConfigRefused()
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
