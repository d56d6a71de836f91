package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/replication"
)

// Before a single node was a cluster of one, it kept its topics as JSON
// definitions and its groups' committed offsets in Pebble, and its
// partition logs had no Raft fields. Such a data directory is migrated
// on its first start, as a cluster of one, keeping every record (at its
// offset) and every committed offset:
//
//  1. importLegacy, before the metadata group opens: each partition's log
//     becomes the log of a one-voter Raft group that has committed all of
//     it (replication.ImportLegacyLog, crash-safe and idempotent);
//  2. migrateLegacy, once the node leads its metadata group: each topic is
//     created there with its configuration (its partitions then open over
//     the imported logs), the offsets are committed there, and the old
//     keys are deleted last.
//
// A crash anywhere repeats the unfinished steps at the next start. A
// directory in the old format is refused on a node that is not a cluster
// of one: migrate it as a single node first, then grow the cluster.

// migrateTimeout bounds putting a migrated directory's topics and offsets
// into the metadata group (a cluster of one: a few fsyncs).
const migrateTimeout = 30 * time.Second

// legacyData is what an old-format directory holds.
type legacyData struct {
	topics  map[string]TopicConfig
	offsets []meta.LegacyOffset
}

// importLegacy reads the old-format topics and imports their partition
// logs; nil when the directory is not in the old format.
func (b *Broker) importLegacy() (*legacyData, error) {
	defs, err := b.meta.LegacyTopics()
	if err != nil {
		return nil, fmt.Errorf("broker: read the topics of an older data directory: %w", err)
	}
	offsets, err := b.meta.LegacyOffsets()
	if err != nil {
		return nil, fmt.Errorf("broker: read the offsets of an older data directory: %w", err)
	}
	if len(defs) == 0 && len(offsets) == 0 {
		return nil, nil
	}
	if !b.cfg.Cluster.Alone() {
		return nil, fmt.Errorf("broker: data directory %s was written by a single node of an earlier Hermes version; "+
			"start it once as a single node (without --peers or --join) to migrate it, then grow the cluster with hermes cluster join", b.cfg.DataDir)
	}
	l := &legacyData{topics: make(map[string]TopicConfig, len(defs)), offsets: offsets}
	for name, def := range defs {
		var cfg TopicConfig
		if err := json.Unmarshal(def, &cfg); err != nil {
			return nil, fmt.Errorf("broker: topic %q of an older data directory: %w", name, err)
		}
		if cfg, err = cfg.withDefaults(); err != nil {
			return nil, fmt.Errorf("broker: topic %q of an older data directory: %w", name, err)
		}
		cfg.ReplicationFactor = 1
		l.topics[name] = cfg
		for i := int32(0); i < cfg.Partitions; i++ {
			err := replication.ImportLegacyLog(cluster.GroupName(name, 0, i), b.partitionDir(cluster.DirName(name, 0), i), replication.LogOptions{
				SegmentBytes: cfg.SegmentBytes, RetentionAge: cfg.RetentionAge, RetentionBytes: cfg.RetentionBytes,
			}, b.meta, b.cfg.Cluster.NodeID)
			if err != nil {
				return nil, fmt.Errorf("broker: migrate partition %s/%d of an older data directory: %w", name, i, err)
			}
		}
	}
	b.log.Info("older single-node data directory found: partition logs imported", "topics", len(defs), "offsets", len(offsets))
	return l, nil
}

// migrateLegacy puts the old topics and offsets into the metadata group,
// then deletes the old keys.
func (b *Broker) migrateLegacy(l *legacyData) error {
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	names := make([]string, 0, len(l.topics))
	for name := range l.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		_, err := b.cl.Meta().Run(ctx, createTopicCmd(name, l.topics[name], false)) // id 0: the files stay where they are
		if err != nil && !errors.Is(err, cluster.ErrTopicExists) {                  // exists: a start cut short did it
			return fmt.Errorf("broker: migrate topic %q: %w", name, err)
		}
	}
	byGroup := make(map[string]*cpb.CommitOffsets)
	var groups []string
	for _, o := range l.offsets {
		c := byGroup[o.Group]
		if c == nil {
			c = &cpb.CommitOffsets{Group: o.Group}
			byGroup[o.Group] = c
			groups = append(groups, o.Group)
		}
		c.Offsets = append(c.Offsets, &cpb.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	for _, g := range groups {
		if _, err := b.cl.Meta().Run(ctx, &cpb.Command{Kind: &cpb.Command_CommitOffsets{CommitOffsets: byGroup[g]}}); err != nil {
			return fmt.Errorf("broker: migrate the offsets of group %q: %w", g, err)
		}
	}
	if err := b.meta.DeleteLegacy(); err != nil {
		return fmt.Errorf("broker: remove the migrated keys: %w", err)
	}
	b.log.Info("older single-node data directory migrated", "topics", len(names), "groups", len(groups))
	return nil
}

// createTopicCmd is the metadata command that creates topic name with cfg
// (defaults filled, replication factor chosen); assignID gives it an id
// (always, except for the topics of a migrated directory).
func createTopicCmd(name string, cfg TopicConfig, assignID bool) *cpb.Command {
	return &cpb.Command{Kind: &cpb.Command_CreateTopic{CreateTopic: &cpb.CreateTopic{Name: name, AssignId: assignID, Config: cfg.proto()}}}
}

// proto is c as the metadata keeps it.
func (c TopicConfig) proto() *cpb.TopicConfig {
	return &cpb.TopicConfig{
		Partitions: c.Partitions, RetentionMs: c.RetentionAge.Milliseconds(), RetentionBytes: c.RetentionBytes,
		MaxMessageBytes: c.MaxMessageBytes, DefaultMode: int32(c.DefaultMode), SegmentBytes: c.SegmentBytes,
		ReplicationFactor: c.ReplicationFactor,
	}
}
