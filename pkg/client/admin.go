package client

import (
	"context"
	"time"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TopicConfig is a topic's configuration. Zero fields mean the broker's
// default on creation.
type TopicConfig struct {
	// Partitions is the number of partitions (default 1, at most 1024).
	Partitions int32
	// Retention deletes whole segments older than this; 0 keeps them.
	Retention time.Duration
	// RetentionBytes deletes the oldest segments while a partition is
	// larger; 0 means unlimited.
	RetentionBytes int64
	// MaxMessageBytes is the largest accepted record (key + headers +
	// payload); default 1 MiB.
	MaxMessageBytes int32
	// DefaultMode is used by publishes with ModeDefault (default
	// ModeConsistent).
	DefaultMode Mode
	// SegmentBytes is the log segment size (default 64 MiB).
	SegmentBytes int64
	// ReplicationFactor is the number of replicas of each partition on a
	// cluster (0 on a single node or for the cluster's default).
	ReplicationFactor int32
}

// PartitionInfo describes one partition of a topic.
type PartitionInfo struct {
	Partition int32
	// StartOffset is the oldest offset still retained.
	StartOffset int64
	// EndOffset is the next offset to be written (the high watermark).
	EndOffset int64
	SizeBytes int64
	// RingEndOffset is the next offset of the in-memory ring of
	// ModePerformance records; RingEvicted counts records it evicted.
	RingEndOffset int64
	RingEvicted   int64
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	Config     TopicConfig
	Partitions []PartitionInfo
}

// TopicOption configures CreateTopic.
type TopicOption func(*hermesv1.CreateTopicRequest)

// WithPartitionCount sets the number of partitions of a new topic.
func WithPartitionCount(n int32) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.Partitions = n }
}

// WithRetention sets the time retention of a new topic (ms resolution).
func WithRetention(d time.Duration) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.RetentionMs = d.Milliseconds() }
}

// WithRetentionBytes sets the per-partition size retention of a new topic.
func WithRetentionBytes(n int64) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.RetentionBytes = n }
}

// WithMaxMessageBytes sets the largest record a new topic accepts.
func WithMaxMessageBytes(n int32) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.MaxMessageBytes = n }
}

// WithDefaultMode sets the delivery mode of publishes that name none.
func WithDefaultMode(m Mode) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.DefaultMode = m.proto() }
}

// WithSegmentBytes sets the log segment size of a new topic.
func WithSegmentBytes(n int64) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.SegmentBytes = n }
}

// WithReplicationFactor sets how many nodes hold each partition of a new
// topic on a cluster (default min(3, nodes)); a single node ignores it.
func WithReplicationFactor(n int32) TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.Config.ReplicationFactor = n }
}

// IfNotExists makes CreateTopic succeed, without changing anything, when
// the topic exists already.
func IfNotExists() TopicOption {
	return func(r *hermesv1.CreateTopicRequest) { r.IfNotExists = true }
}

// CreateTopic creates a topic and returns its description.
//
// Errors: ErrTopicExists (unless IfNotExists), ErrInvalidTopicName,
// ErrInvalidArgument. A retried creation whose first try succeeded
// unseen reports ErrTopicExists; use IfNotExists to make it idempotent.
func (c *Client) CreateTopic(ctx context.Context, name string, opts ...TopicOption) (*TopicInfo, error) {
	req := &hermesv1.CreateTopicRequest{Name: name, Config: &hermesv1.TopicConfig{}}
	for _, o := range opts {
		o(req)
	}
	var resp *hermesv1.CreateTopicResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.CreateTopic(ctx, req)
		return e
	})
	if err != nil {
		return nil, err
	}
	return topicFromProto(resp.GetTopic()), nil
}

// DeleteTopic deletes a topic and its data. Errors: ErrTopicNotFound.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.call(ctx, func(ctx context.Context) error {
		_, e := c.api.DeleteTopic(ctx, &hermesv1.DeleteTopicRequest{Name: name})
		return e
	})
}

// AlterOption is a change AlterTopic makes.
type AlterOption func(*hermesv1.AlterTopicRequest)

// SetPartitions grows a topic to n partitions (never fewer than it has).
// Keyed records map to a partition by the key's hash modulo the count:
// after the change a key may map to another partition.
func SetPartitions(n int32) AlterOption {
	return func(r *hermesv1.AlterTopicRequest) { r.Partitions = &n }
}

// SetRetention sets the age after which whole segments are deleted (0:
// keep them).
func SetRetention(d time.Duration) AlterOption {
	return func(r *hermesv1.AlterTopicRequest) { ms := d.Milliseconds(); r.RetentionMs = &ms }
}

// SetRetentionBytes sets the size above which a partition's oldest
// segments are deleted (0: unlimited).
func SetRetentionBytes(n int64) AlterOption {
	return func(r *hermesv1.AlterTopicRequest) { r.RetentionBytes = &n }
}

// SetMaxMessageBytes sets the largest record accepted.
func SetMaxMessageBytes(n int32) AlterOption {
	return func(r *hermesv1.AlterTopicRequest) { r.MaxMessageBytes = &n }
}

// SetDefaultMode sets the mode of publishes that name none.
func SetDefaultMode(m Mode) AlterOption {
	return func(r *hermesv1.AlterTopicRequest) { pm := m.proto(); r.DefaultMode = &pm }
}

// AlterTopic changes a topic's configuration as opts say (the rest stays)
// and returns its description.
//
// Errors: ErrTopicNotFound, ErrInvalidTopicName, ErrInvalidArgument
// (fewer partitions, a value out of range).
func (c *Client) AlterTopic(ctx context.Context, name string, opts ...AlterOption) (*TopicInfo, error) {
	req := &hermesv1.AlterTopicRequest{Name: name}
	for _, o := range opts {
		o(req)
	}
	var resp *hermesv1.AlterTopicResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.AlterTopic(ctx, req)
		return e
	})
	if err != nil {
		return nil, err
	}
	return topicFromProto(resp.GetTopic()), nil
}

// ListTopics returns every topic. The result is the caller's.
func (c *Client) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	var resp *hermesv1.ListTopicsResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.ListTopics(ctx, &hermesv1.ListTopicsRequest{})
		return e
	})
	if err != nil {
		return nil, err
	}
	out := make([]TopicInfo, 0, len(resp.GetTopics()))
	for _, t := range resp.GetTopics() {
		out = append(out, *topicFromProto(t))
	}
	return out, nil
}

// DescribeTopic returns a topic's configuration and partitions, with their
// offsets and sizes. Errors: ErrTopicNotFound.
func (c *Client) DescribeTopic(ctx context.Context, name string) (*TopicInfo, error) {
	var resp *hermesv1.DescribeTopicResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.DescribeTopic(ctx, &hermesv1.DescribeTopicRequest{Name: name})
		return e
	})
	if err != nil {
		return nil, err
	}
	return topicFromProto(resp.GetTopic()), nil
}

func topicFromProto(t *hermesv1.TopicInfo) *TopicInfo {
	cfg := t.GetConfig()
	info := &TopicInfo{
		Name: t.GetName(),
		Config: TopicConfig{
			Partitions:        cfg.GetPartitions(),
			Retention:         time.Duration(cfg.GetRetentionMs()) * time.Millisecond,
			RetentionBytes:    cfg.GetRetentionBytes(),
			MaxMessageBytes:   cfg.GetMaxMessageBytes(),
			DefaultMode:       Mode(cfg.GetDefaultMode()),
			SegmentBytes:      cfg.GetSegmentBytes(),
			ReplicationFactor: cfg.GetReplicationFactor(),
		},
	}
	for _, p := range t.GetPartitions() {
		info.Partitions = append(info.Partitions, PartitionInfo{
			Partition:     p.GetPartition(),
			StartOffset:   p.GetStartOffset(),
			EndOffset:     p.GetEndOffset(),
			SizeBytes:     p.GetSizeBytes(),
			RingEndOffset: p.GetRingEndOffset(),
			RingEvicted:   p.GetRingEvicted(),
		})
	}
	return info
}

// ClusterInfo is what the answering node knows of its cluster.
type ClusterInfo struct {
	// NodeID is the answering node's id; 0 on a single node.
	NodeID uint64
	// MetadataLeader is the node leading the metadata group (0: none
	// known, an election).
	MetadataLeader uint64
	Nodes          []ClusterNode
	Partitions     []ClusterPartition
}

// ClusterNode is one node of a cluster and where it listens.
type ClusterNode struct {
	ID                       uint64
	GRPCAddress, HTTPAddress string
}

// ClusterPartition is one partition's place in the cluster.
type ClusterPartition struct {
	Topic     string
	Partition int32
	// Leader is the node leading the partition, 0 while the answering
	// node knows none (the partition was just created, or an election).
	Leader   uint64
	Replicas []uint64
	// HighWatermark is filled in only when the answering node leads.
	HighWatermark int64
}

// DescribeCluster returns what the node the Client is connected to knows
// of the cluster: its nodes, the metadata group's leader and every
// partition's leader and replicas (`hermes cluster status` merges what
// every node says). A partition created a moment ago may show no leader
// yet: its replicas elect one within about 100 ms. Errors:
// ErrPermissionDenied without the Describe permission on the cluster.
func (c *Client) DescribeCluster(ctx context.Context) (*ClusterInfo, error) {
	var resp *hermesv1.DescribeClusterResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.DescribeCluster(ctx, &hermesv1.DescribeClusterRequest{})
		return e
	})
	if err != nil {
		return nil, err
	}
	info := &ClusterInfo{NodeID: resp.GetNodeId(), MetadataLeader: resp.GetMetadataLeader()}
	for _, n := range resp.GetNodes() {
		info.Nodes = append(info.Nodes, ClusterNode{ID: n.GetId(), GRPCAddress: n.GetGrpcAddress(), HTTPAddress: n.GetHttpAddress()})
	}
	for _, p := range resp.GetPartitions() {
		info.Partitions = append(info.Partitions, ClusterPartition{
			Topic: p.GetTopic(), Partition: p.GetPartition(), Leader: p.GetLeader(),
			Replicas: p.GetReplicas(), HighWatermark: p.GetHighWatermark(),
		})
	}
	return info, nil
}
