package kafka

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// DescribeCluster (v0–v1): the nodes serving Kafka and the cluster id.
// DescribeConfigs (v0–v4): a topic's configs under Kafka's names
// (kafkaConfigs), and a node's few Kafka-facing settings.
func init() {
	register(kmsg.DescribeCluster, 0, 1, now(describeCluster))
	register(kmsg.DescribeConfigs, 0, 4, now(describeConfigs))
}

var clusterResource = broker.Resource{Kind: broker.ResourceCluster}

func describeCluster(c *conn, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if err := c.s.api.Authorize(c.context(), broker.ActionDescribe, clusterResource); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err, scopeCluster), message(err)
		return resp
	}
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp
	}
	resp.EndpointType = 1
	resp.ClusterID = c.s.cfg.ClusterID
	resp.ControllerID = int32(c.s.api.NodeID())
	for _, n := range c.s.nodes() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID = int32(n.ID)
		b.Host, b.Port = splitHostPort(n.KafkaAddr)
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}

func describeConfigs(c *conn, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var kvs [][2]string
		source := kmsg.ConfigSourceDynamicTopicConfig
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			info, err := c.s.api.Topic(c.context(), r.ResourceName)
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = code(err, scopeTopic), message(err)
				resp.Resources = append(resp.Resources, rr)
				continue
			}
			kvs = kafkaConfigs(info.Config)
		case kmsg.ConfigResourceTypeBroker:
			if err := c.s.api.Authorize(c.context(), broker.ActionDescribe, clusterResource); err != nil {
				rr.ErrorCode, rr.ErrorMessage = code(err, scopeCluster), message(err)
				resp.Resources = append(resp.Resources, rr)
				continue
			}
			if r.ResourceName != "" && r.ResourceName != strconv.FormatUint(c.s.api.NodeID(), 10) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				resp.Resources = append(resp.Resources, rr)
				continue
			}
			source = kmsg.ConfigSourceStaticBrokerConfig
			kvs = [][2]string{
				{"auto.create.topics.enable", strconv.FormatBool(c.s.cfg.AutoCreateTopics)},
				{"broker.id", strconv.FormatUint(c.s.api.NodeID(), 10)},
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		for _, kv := range kvs {
			if len(r.ConfigNames) > 0 && !contains(r.ConfigNames, kv[0]) {
				continue
			}
			cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
			v := kv[1]
			cfg.Name, cfg.Value, cfg.Source = kv[0], &v, source
			// Alterable: a topic's retention and max message size.
			cfg.ReadOnly = source != kmsg.ConfigSourceDynamicTopicConfig || kv[0] == "segment.bytes" || kv[0] == "cleanup.policy"
			if kv[0] == "cleanup.policy" {
				cfg.Source, cfg.IsDefault = kmsg.ConfigSourceDefaultConfig, true
			}
			rr.Configs = append(rr.Configs, cfg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
