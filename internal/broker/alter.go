package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// TopicChange is what AlterTopic changes: the fields set (non-nil); the
// others stay as they are.
type TopicChange struct {
	// Partitions is the new partition count, at least the current one.
	// Keyed records map to partitions by the key's hash modulo the count,
	// so a key may map to another partition once they grow.
	Partitions *int32
	// RetentionAge (0: forever) and RetentionBytes (0: unlimited).
	RetentionAge   *time.Duration
	RetentionBytes *int64
	// MaxMessageBytes bounds a record, as at creation.
	MaxMessageBytes *int32
	DefaultMode     *Mode
}

// Apply returns cfg changed by ch, validated.
func (ch TopicChange) Apply(cfg TopicConfig) (TopicConfig, error) {
	was := cfg.Partitions
	if ch.Partitions != nil {
		if *ch.Partitions < was {
			return cfg, errorf(ErrInvalidArgument, "the topic has %d partitions; partitions can be added, never removed (asked %d)", was, *ch.Partitions)
		}
		cfg.Partitions = *ch.Partitions
	}
	if ch.RetentionAge != nil {
		cfg.RetentionAge = *ch.RetentionAge
	}
	if ch.RetentionBytes != nil {
		cfg.RetentionBytes = *ch.RetentionBytes
	}
	if ch.MaxMessageBytes != nil {
		if *ch.MaxMessageBytes <= 0 {
			return cfg, errorf(ErrInvalidArgument, "max message bytes must be 1 to %d, got %d", MaxMaxMessageBytes, *ch.MaxMessageBytes)
		}
		cfg.MaxMessageBytes = *ch.MaxMessageBytes
	}
	if ch.DefaultMode != nil {
		if *ch.DefaultMode == ModeDefault {
			return cfg, errorf(ErrInvalidArgument, "a topic's default mode is consistent, eventual or performance")
		}
		cfg.DefaultMode = *ch.DefaultMode
	}
	return cfg.withDefaults()
}

// AlterTopic changes a topic's configuration through the metadata group,
// from any node, and returns the topic once this node has applied the
// change. New partitions are placed as a new topic's are and open empty;
// server-assigned groups of the topic rebalance over them.
//
// Errors: ErrTopicNotFound, ErrInvalidArgument, ErrPermissionDenied,
// ErrUnavailable (retriable: the metadata group is busy or electing).
func (b *Broker) AlterTopic(ctx context.Context, name string, ch TopicChange) (TopicInfo, error) {
	if err := ValidateName("topic", name); err != nil {
		return TopicInfo{}, err
	}
	if err := b.authorize(ctx, ActionAlter, topicResource(name)); err != nil {
		return TopicInfo{}, err
	}
	t, err := b.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	cfg, err := ch.Apply(*t.config())
	if err == nil && cfg.Partitions > MaxPartitions {
		err = errorf(ErrInvalidArgument, "partitions must be 1 to %d, got %d", MaxPartitions, cfg.Partitions)
	}
	if err != nil {
		return TopicInfo{}, err
	}
	cmd := &cpb.Command{Kind: &cpb.Command_AlterTopic{AlterTopic: &cpb.AlterTopic{Name: name, Id: t.id, Config: cfg.proto()}}}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = b.cl.Meta().Run(rctx, cmd)
	switch {
	case errors.Is(err, cluster.ErrTopicNotFound):
		err = errorf(ErrTopicNotFound, "topic %q does not exist", name)
	case errors.Is(err, cluster.ErrBadCommand):
		err = errorf(ErrInvalidArgument, "alter topic %q: %v", name, err)
	case errors.Is(err, cluster.ErrNoNodes):
		err = &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: metadataRetry}
	case err != nil:
		err = &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("alter topic %q: %v", name, err), retryAfter: topicBusyRetry}
	}
	b.auditChange(ctx, "topic altered", err, "topic", name, "partitions", cfg.Partitions, "retention", cfg.RetentionAge,
		"retention_bytes", cfg.RetentionBytes, "max_message_bytes", cfg.MaxMessageBytes, "default_mode", cfg.DefaultMode)
	if err != nil {
		return TopicInfo{}, err
	}
	return b.topicInfo(name)
}

// alterTopic applies an altered topic on this node: its configuration,
// the retention of its local replicas, and its new partitions. Lock:
// metaMu held (on the metadata goroutine).
func (b *Broker) alterTopic(ct *cluster.Topic) {
	b.mu.RLock()
	t := b.topics[ct.Name]
	b.mu.RUnlock()
	if t == nil || t.id != ct.ID || t.state != topicActive {
		return
	}
	cfg := topicConfigFromCluster(ct.Config)
	t.cfg.Store(&cfg)
	parts := t.partitions()
	for i, p := range parts {
		if p.rep != nil {
			p.rep.SetRetention(cfg.RetentionAge, cfg.RetentionBytes)
			p.setFloor(ct.Floor(i))
		}
	}
	if len(ct.Replicas) <= len(parts) {
		return
	}
	grown := append([]*partition(nil), parts...)
	for i := len(parts); i < len(ct.Replicas); i++ {
		p, err := b.openClusterPartition(t, int32(i), ct.Replicas[i], ct.Target(i))
		if err != nil {
			// As a topic that cannot be opened: this node serves the
			// partitions it has; the log says why not the others.
			b.log.Error("cannot open a new partition", "topic", t.name, "partition", i, "err", err)
			break
		}
		p.setFloor(ct.Floor(i))
		grown = append(grown, p)
	}
	t.setPartitions(grown)
	t.broadcast()
	b.groups.grow(t.name, int32(len(grown)))
	b.log.Info("topic partitions added", "topic", t.name, "partitions", len(grown), "were", len(parts))
}

// DeleteRecords deletes a partition's records below before (-1: all
// records up to the high watermark) on every node, through the metadata
// group: they are no longer readable, and retention removes the segments
// wholly below the new start. It returns the partition's start offset
// once this node has applied it. A start already at or past before is
// left as it is.
//
// Errors: ErrTopicNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange
// (before past the high watermark), ErrInvalidArgument, ErrPermissionDenied
// (it needs delete on the topic), ErrUnavailable.
func (b *Broker) DeleteRecords(ctx context.Context, topicName string, partition int32, before int64) (int64, error) {
	if err := ValidateName("topic", topicName); err != nil {
		return 0, err
	}
	if err := b.authorize(ctx, ActionDelete, topicResource(topicName)); err != nil {
		return 0, err
	}
	t, err := b.topic(topicName)
	if err != nil {
		return 0, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return 0, err
	}
	var start, hw int64
	if p.remote {
		if start, hw, _, err = b.remoteOffsets(p, false, 0); err != nil {
			return 0, err
		}
	} else {
		start, hw = p.offsets()
	}
	switch {
	case before == -1:
		before = hw
	case before < 0:
		return 0, errorf(ErrInvalidArgument, "delete records below %d: the offset is -1 (the high watermark) or at least 0", before)
	case before > hw:
		return 0, errorf(ErrOffsetOutOfRange, "delete records below %d: %s/%d holds offsets [%d, %d]", before, topicName, partition, start, hw)
	}
	if before <= start {
		return start, nil
	}
	cmd := &cpb.Command{Kind: &cpb.Command_DeleteRecords{DeleteRecords: &cpb.DeleteRecords{Name: topicName, Id: t.id, Partition: partition, Before: before}}}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = b.cl.Meta().Run(rctx, cmd)
	switch {
	case errors.Is(err, cluster.ErrTopicNotFound):
		err = errorf(ErrTopicNotFound, "topic %q does not exist", topicName)
	case err != nil:
		err = &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("delete records of %s/%d: %v", topicName, partition, err), retryAfter: topicBusyRetry}
	}
	b.auditChange(ctx, "records deleted", err, "topic", topicName, "partition", partition, "before", before)
	if err != nil {
		return 0, err
	}
	return max(before, start), nil
}
