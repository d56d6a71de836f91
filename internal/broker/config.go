package broker

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/internal/cluster"
	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/replication"
)

// Mode is a publish's delivery mode: when the publisher is acknowledged.
type Mode uint8

const (
	// ModeDefault uses the topic's default mode.
	ModeDefault Mode = iota
	// ModeConsistent acks after a quorum commit, fsynced on each replica
	// (on a single node: after the local fsync).
	ModeConsistent
	// ModeEventual acks after the leader's local fsync.
	ModeEventual
	// ModePerformance keeps records in memory only, never on disk.
	ModePerformance
)

func (m Mode) String() string {
	switch m {
	case ModeConsistent:
		return "consistent"
	case ModeEventual:
		return "eventual"
	case ModePerformance:
		return "performance"
	}
	return "default"
}

// ParseMode parses "consistent", "eventual", "performance" or "" (default).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "default":
		return ModeDefault, nil
	case "consistent":
		return ModeConsistent, nil
	case "eventual":
		return ModeEventual, nil
	case "performance":
		return ModePerformance, nil
	}
	return 0, errorf(ErrInvalidArgument, "unknown delivery mode %q (want consistent, eventual or performance)", s)
}

// Topic limits and defaults.
const (
	DefaultPartitions      = 1
	MaxPartitions          = 1024
	DefaultMaxMessageBytes = 1 << 20
	MaxMaxMessageBytes     = 16 << 20 // must fit one batch (record.MaxBatchBytes)
	DefaultSegmentBytes    = 64 << 20
	MinSegmentBytes        = 1 << 20
)

// TopicConfig is a topic's configuration. The zero value of each field
// means its default.
type TopicConfig struct {
	Partitions      int32         `json:"partitions"`
	RetentionAge    time.Duration `json:"retention_age,omitempty"`
	RetentionBytes  int64         `json:"retention_bytes,omitempty"`
	MaxMessageBytes int32         `json:"max_message_bytes"`
	DefaultMode     Mode          `json:"default_mode"`
	SegmentBytes    int64         `json:"segment_bytes"`
	// ReplicationFactor: replicas per partition (0: the cluster's
	// default, ClusterConfig.ReplicationFactor).
	ReplicationFactor int32 `json:"replication_factor,omitempty"`
}

// withDefaults validates c and fills in defaults.
func (c TopicConfig) withDefaults() (TopicConfig, error) {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Partitions < 0 || c.Partitions > MaxPartitions {
		return c, errorf(ErrInvalidArgument, "partitions must be 1 to %d, got %d", MaxPartitions, c.Partitions)
	}
	if c.RetentionAge < 0 || c.RetentionBytes < 0 {
		return c, errorf(ErrInvalidArgument, "retention must not be negative")
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxMessageBytes < 0 || c.MaxMessageBytes > MaxMaxMessageBytes {
		return c, errorf(ErrInvalidArgument, "max message bytes must be 1 to %d, got %d", MaxMaxMessageBytes, c.MaxMessageBytes)
	}
	if c.DefaultMode == ModeDefault {
		c.DefaultMode = ModeConsistent
	}
	if c.DefaultMode > ModePerformance {
		return c, errorf(ErrInvalidArgument, "unknown default mode %d", c.DefaultMode)
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.ReplicationFactor < 0 || c.ReplicationFactor > cluster.MaxReplicationFactor {
		return c, errorf(ErrInvalidArgument, "replication factor must be 1 to %d, got %d", cluster.MaxReplicationFactor, c.ReplicationFactor)
	}
	if c.SegmentBytes < MinSegmentBytes {
		return c, errorf(ErrInvalidArgument, "segment bytes must be at least %d, got %d", MinSegmentBytes, c.SegmentBytes)
	}
	return c, nil
}

// Config configures a Broker. Zero fields take the defaults named.
type Config struct {
	// DataDir holds topics/ (partition logs), cluster/ (the metadata
	// log) and meta/ (Pebble: node id, Raft state). Required.
	DataDir string
	Logger  *slog.Logger
	// Registerer receives the broker's metrics; nil = a private registry.
	Registerer prometheus.Registerer
	// Cluster says which cluster this node belongs to; the zero value is
	// a cluster of one (node 1).
	Cluster ClusterConfig
	// Auth turns on authentication and ACLs (off: every request is
	// allowed, authenticated or not).
	Auth AuthConfig
	// Authorizer decides what each request's principal may do when Auth
	// is off (nil: AllowAll).
	Authorizer Authorizer

	// MaxQueueBytes bounds the publish bytes queued per partition before
	// they go into a Raft entry (default replication.DefaultMaxQueueBytes);
	// at the bound a publish waits (at most
	// replication.DefaultProposeWait), then fails with a retriable
	// ErrResourceExhausted.
	MaxQueueBytes int64
	// MaxDiskBytes is a quota on all partition logs (0 = none). Beyond it
	// durable publishes fail with a retriable ErrResourceExhausted.
	MaxDiskBytes int64
	// MinFreeBytes: while the data directory's file system has less free,
	// durable publishes get a retriable ErrResourceExhausted (0: no
	// floor). A partition replica whose write failed (a full disk) is
	// opened again from disk once at least this much (at least 16 MiB) is
	// free.
	MinFreeBytes int64
	// ScrubInterval is the pause between two rounds of the scrubber,
	// which reads every local replica's committed records back and
	// repairs a damaged batch from another replica (0: no scrubbing);
	// ScrubBytesPerSecond bounds how fast it reads (0: unbounded).
	ScrubInterval       time.Duration
	ScrubBytesPerSecond int64
	// TailCacheBytes is the RAM per partition kept for live readers
	// (default 16 MiB).
	TailCacheBytes int64
	// PageCacheBytes is how much of each partition's newest log stays in
	// the operating system's page cache; older bytes are dropped once
	// fsynced (partlog.Options.CacheBytes; default 64 MiB, negative:
	// left to the kernel).
	PageCacheBytes int64
	// PreallocateBytes is the step in which a partition's active segment
	// file is extended ahead of its writes (partlog.Options.
	// PreallocateBytes; default 4 MiB, negative: never).
	PreallocateBytes int64
	// PreallocateZeros writes that space with zeros ahead of the writes
	// (partlog.Options.PreallocateWrite) instead of fallocating it.
	PreallocateZeros bool
	// RingRecords and RingBytes bound each partition's in-memory ring of
	// performance records (defaults 65536 and 64 MiB).
	RingRecords int
	RingBytes   int64
	// RetentionCheck is how often retention runs (default 30s).
	RetentionCheck time.Duration
	// GroupTick is how often sessions expire, ack deadlines fire and
	// ack-driven offsets are persisted (default 100ms).
	GroupTick time.Duration
	// MaxSubscriptions bounds open subscriptions (default 10000).
	MaxSubscriptions int
	// DedupWindow and DedupMaxBatches bound, per partition, the batches
	// remembered to recognise a retried publish (same records, same
	// message ids, same batch): defaults 2 minutes and 10000 batches.
	// DedupMaxBatches < 0 turns duplicate detection off.
	DedupWindow     time.Duration
	DedupMaxBatches int
	// Tracer records OpenTelemetry spans of publishes, their replication
	// commits and deliveries (trace.go); nil, the default, turns tracing
	// off at the cost of a nil check per request.
	Tracer trace.Tracer
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Authorizer == nil {
		c.Authorizer = AllowAll{}
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = replication.DefaultMaxQueueBytes
	}
	if c.TailCacheBytes == 0 {
		c.TailCacheBytes = 16 << 20
	}
	if c.RingRecords == 0 {
		c.RingRecords = 65536
	}
	if c.RingBytes == 0 {
		c.RingBytes = 64 << 20
	}
	if c.RetentionCheck == 0 {
		c.RetentionCheck = 30 * time.Second
	}
	if c.GroupTick == 0 {
		c.GroupTick = 100 * time.Millisecond
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = 10000
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = dedup.DefaultMaxAge
	}
	if c.DedupMaxBatches == 0 {
		c.DedupMaxBatches = dedup.DefaultMaxBatches
	}
	return c
}
