package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// A Target is one broker (or cluster) the tool runs a workload against:
// Hermes over gRPC, REST or GraphQL, Kafka through franz-go, NATS
// JetStream through nats.go. The engine knows nothing else of it.
type Target interface {
	// Name is "hermes", "kafka" or "nats".
	Name() string
	// Durability says when the broker acknowledges a publish of the
	// run's settings and how it reaches the disk: printed with every
	// result, so that comparisons state what they compare.
	Durability() string
	// CreateTopics creates the run's topics with partitions partitions.
	CreateTopics(ctx context.Context, names []string, partitions int) error
	// DeleteTopics deletes them (errors are reported, not fatal).
	DeleteTopics(ctx context.Context, names []string) error
	// NewPublisher returns a publisher of topic for worker (0-based) in
	// protocol proto (one of the target's Protocols).
	NewPublisher(ctx context.Context, topic string, worker int, proto string) (Publisher, error)
	// Subscribe subscribes to topic and returns once the broker accepted
	// the subscription: a live subscription then sees every record
	// published after Subscribe returned.
	Subscribe(ctx context.Context, topic string, o SubOptions) (Subscription, error)
	// ErrorKind names the kind of a failure of this target's calls, for
	// the error table (e.g. "UNAVAILABLE"); "" when it does not know it.
	ErrorKind(err error) string
	// Close releases the target's connections.
	Close() error
}

// A Publisher publishes one worker's records to one topic.
type Publisher interface {
	// Publish sends one record. done is called exactly once, with nil when
	// the broker acknowledged the record and the failure otherwise; it
	// may be called before Publish returns or later from another
	// goroutine, but never concurrently for one Publisher. Publish may
	// block: a synchronous publisher waits for the answer, an asynchronous
	// one when its buffer is full. ctx bounds the call and its retries.
	// REQUIRES: payload is not modified until done was called.
	Publish(ctx context.Context, id [16]byte, payload []byte, done Done)
	// Close sends what is buffered and waits (bounded by ctx) until every
	// done was called.
	Close(ctx context.Context) error
}

// Done is called once with a publish's answer: err nil when the broker
// acknowledged the record. at is when the answer was seen, or zero when
// the publisher read no clock for it (the caller then reads it).
type Done func(err error, at time.Time)

// SubOptions say how to subscribe.
type SubOptions struct {
	// Group is the consumer group ("": none, the subscriber reads every
	// partition on its own).
	Group string
	// FromBeginning starts at the oldest record (for a group: where it has
	// committed nothing); otherwise the subscription starts at the tail.
	FromBeginning bool
	// Performance also delivers Hermes' performance-mode records.
	Performance bool
}

// A Subscription delivers one topic's records. Progress of a group is
// committed only by Commit: the engine commits every second, as an
// application with auto-commit would.
type Subscription interface {
	// Next returns the next record, waiting until one arrives or ctx ends.
	// The Delivery is valid until the next call (it may be reused).
	Next(ctx context.Context) (*Delivery, error)
	// Commit commits, for a group, every record Next returned.
	Commit(ctx context.Context) error
	// Close ends the subscription in good order.
	Close() error
	// Abort ends it as a crash would: no commit, the connection dropped.
	Abort()
	// Missed counts records the broker dropped before this subscriber
	// could read them, when the broker reports it (Hermes' ring).
	Missed() int64
}

// errorKind names err's kind when the target does not: context ends,
// network failures by their errno, else "OTHER".
func errorKind(t Target, err error) string {
	if t != nil {
		if k := t.ErrorKind(err); k != "" {
			return k
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "DEADLINE_EXCEEDED"
	case errors.Is(err, context.Canceled):
		return "CANCELED"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "CONNECTION_REFUSED"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "CONNECTION_RESET"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "TIMEOUT"
	case errors.As(err, &ne) && ne.Timeout():
		return "TIMEOUT"
	case errors.As(err, &ne):
		return "NETWORK"
	}
	return "OTHER"
}

// ErrNotAvailable is returned for a protocol or target this build or the
// broker does not offer.
var ErrNotAvailable = errors.New("not available in this build")
