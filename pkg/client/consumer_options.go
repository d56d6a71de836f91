package client

import (
	"time"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Defaults of the subscription options. The credit lets the broker run
// ahead of the application by about a 100 B record's three milliseconds
// of reading: with 8,192 records and 4 MiB a backlog read waited for
// credit (2.1-2.3 M records/s of 100 B over hermes-wire, 2.6-2.9 M with
// these; docs/BENCHMARKS.md). A consumer buffers at most this much.
const (
	DefaultCreditRecords      = 32768
	DefaultCreditBytes        = 16 << 20
	DefaultSessionTimeout     = 10 * time.Second
	DefaultAutoCommitInterval = time.Second
	// DefaultCloseTimeout bounds the final commit of Consumer.Close.
	DefaultCloseTimeout = 5 * time.Second
	// maxPendingCommits bounds Commit calls waiting for the broker's answer
	// on one consumer; more wait for a place.
	maxPendingCommits = 64
	// maxAckBatch bounds the records of one ack or nack request.
	maxAckBatch = 1000
)

// AckMode says how a consumer's progress is recorded.
type AckMode int

const (
	// AckAutoCommit (the default): the consumer commits, every auto-commit
	// interval and on Close, the offsets of the records the application
	// finished. A record counts as finished when Next is called again
	// (or Close, or Commit): at-least-once, as Kafka's auto commit.
	AckAutoCommit AckMode = iota
	// AckManual: nothing is committed unless the application calls Commit.
	AckManual
	// AckPerMessage: the application Acks (or Nacks) each record; an
	// unacked record is sent again after the ack wait, and after max
	// deliveries goes to the dead-letter topic. The broker's committed
	// offset follows the acks.
	AckPerMessage
	// AckAtMostOnce: the broker commits each record as it sends it; a
	// crash loses the records in flight.
	AckAtMostOnce
)

// String returns the mode's name as the CLI spells it.
func (m AckMode) String() string {
	switch m {
	case AckAutoCommit:
		return "auto"
	case AckManual:
		return "manual"
	case AckPerMessage:
		return "per-message"
	case AckAtMostOnce:
		return "at-most-once"
	}
	return "unknown"
}

// SubscribeOption configures Client.Subscribe.
type SubscribeOption func(*subscribeConfig)

type subscribeConfig struct {
	group          string
	partitions     []int32
	start          *hermesv1.StartPosition
	ackMode        AckMode
	ackWait        time.Duration
	maxDeliveries  int32
	maxAckPending  int32
	deadLetter     string
	creditRecords  int32
	creditBytes    int64
	packed         *bool
	sessionTimeout time.Duration
	clientID       string
	autoCommit     time.Duration
	performance    bool
}

func defaultSubscribeConfig() subscribeConfig {
	return subscribeConfig{
		start:          &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Latest{Latest: true}},
		creditRecords:  DefaultCreditRecords,
		creditBytes:    DefaultCreditBytes,
		sessionTimeout: DefaultSessionTimeout,
		autoCommit:     DefaultAutoCommitInterval,
	}
}

// WithGroup joins consumer group g: its members share the topic's
// partitions and its committed offsets. Without a group the consumer
// reads the partitions on its own and tracks nothing on the broker.
func WithGroup(g string) SubscribeOption { return func(c *subscribeConfig) { c.group = g } }

// WithPartitions limits a consumer without group to partitions ps
// (default: all).
func WithPartitions(ps ...int32) SubscribeOption {
	return func(c *subscribeConfig) { c.partitions = append([]int32(nil), ps...) }
}

// FromBeginning starts at the oldest retained record. For a group it
// applies only to partitions the group has committed nothing for.
func FromBeginning() SubscribeOption {
	return func(c *subscribeConfig) {
		c.start = &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Earliest{Earliest: true}}
	}
}

// FromLatest starts with records published after subscribing (default).
func FromLatest() SubscribeOption {
	return func(c *subscribeConfig) {
		c.start = &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Latest{Latest: true}}
	}
}

// FromOffset starts at offset o (of every partition read).
func FromOffset(o int64) SubscribeOption {
	return func(c *subscribeConfig) {
		c.start = &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Offset{Offset: o}}
	}
}

// FromTimestamp starts at the first record with a timestamp at or after t.
func FromTimestamp(t time.Time) SubscribeOption {
	return func(c *subscribeConfig) {
		c.start = &hermesv1.StartPosition{Position: &hermesv1.StartPosition_TimestampUnixNano{TimestampUnixNano: t.UnixNano()}}
	}
}

// WithAckMode sets how progress is recorded (default AckAutoCommit).
// It matters only with a group.
func WithAckMode(m AckMode) SubscribeOption { return func(c *subscribeConfig) { c.ackMode = m } }

// WithAckWait sets how long the broker waits for a per-message ack before
// it delivers the record again (broker default 30s).
func WithAckWait(d time.Duration) SubscribeOption {
	return func(c *subscribeConfig) { c.ackWait = d }
}

// WithMaxDeliveries bounds the deliveries of one record with per-message
// acks before it goes to the dead-letter topic (broker default 5; -1 means
// unlimited).
func WithMaxDeliveries(n int) SubscribeOption {
	return func(c *subscribeConfig) { c.maxDeliveries = int32(n) }
}

// WithMaxAckPending bounds the unacked records per partition with
// per-message acks (broker default 1000).
func WithMaxAckPending(n int) SubscribeOption {
	return func(c *subscribeConfig) { c.maxAckPending = int32(n) }
}

// WithDeadLetterTopic names the dead-letter topic (default "<topic>.dlq").
func WithDeadLetterTopic(t string) SubscribeOption {
	return func(c *subscribeConfig) { c.deadLetter = t }
}

// WithCredit bounds the records and bytes the broker may send ahead of the
// application (defaults DefaultCreditRecords, DefaultCreditBytes): the
// consumer buffers at most that much, and grants credit back as Next
// returns records.
func WithCredit(records int, bytes int64) SubscribeOption {
	return func(c *subscribeConfig) { c.creditRecords, c.creditBytes = int32(max(records, 1)), max(bytes, 1) }
}

// WithPacked asks for deliveries in the packed batch format (default true,
// except with AckPerMessage). Packed deliveries do not carry Mode and
// DeliveryCount: those Message fields stay 0.
func WithPacked(on bool) SubscribeOption { return func(c *subscribeConfig) { c.packed = &on } }

// WithSessionTimeout sets the group session timeout (default
// DefaultSessionTimeout); the consumer sends a heartbeat every third of it.
func WithSessionTimeout(d time.Duration) SubscribeOption {
	return func(c *subscribeConfig) { c.sessionTimeout = d }
}

// WithClientID names the member in DescribeGroup.
func WithClientID(id string) SubscribeOption { return func(c *subscribeConfig) { c.clientID = id } }

// WithAutoCommitInterval sets the period of AckAutoCommit commits (default
// DefaultAutoCommitInterval).
func WithAutoCommitInterval(d time.Duration) SubscribeOption {
	return func(c *subscribeConfig) { c.autoCommit = max(d, time.Millisecond) }
}

// WithPerformanceRecords also delivers ModePerformance records (live only,
// from the broker's in-memory ring; their offsets are a separate sequence).
// They arrive with Mode ModePerformance, packed subscription or not, and
// never count as the consumer's progress: Ack, Nack and Commit(msgs...)
// refuse them with ErrNotDurable.
func WithPerformanceRecords() SubscribeOption {
	return func(c *subscribeConfig) { c.performance = true }
}

// openRequest is the first request of a subscription stream.
func (cfg *subscribeConfig) openRequest(topic string, start *hermesv1.StartPosition) *hermesv1.SubscribeRequest {
	packed := cfg.ackMode != AckPerMessage
	if cfg.packed != nil {
		packed = *cfg.packed
	}
	o := &hermesv1.SubscribeOptions{
		Topic: topic, Group: cfg.group, Partitions: cfg.partitions, Start: start,
		AckMode:            cfg.protoAckMode(),
		AckWaitMs:          cfg.ackWait.Milliseconds(),
		MaxDeliveries:      cfg.maxDeliveries,
		MaxAckPending:      cfg.maxAckPending,
		DeadLetterTopic:    cfg.deadLetter,
		SessionTimeoutMs:   cfg.sessionTimeout.Milliseconds(),
		CreditRecords:      cfg.creditRecords,
		CreditBytes:        cfg.creditBytes,
		Packed:             packed,
		IncludePerformance: cfg.performance,
		ClientId:           cfg.clientID,
	}
	return &hermesv1.SubscribeRequest{Kind: &hermesv1.SubscribeRequest_Open{Open: o}}
}

func (cfg *subscribeConfig) protoAckMode() hermesv1.AckMode {
	switch cfg.ackMode {
	case AckPerMessage:
		return hermesv1.AckMode_ACK_MODE_PER_MESSAGE
	case AckAtMostOnce:
		return hermesv1.AckMode_ACK_MODE_AUTO
	}
	return hermesv1.AckMode_ACK_MODE_UNSPECIFIED
}
