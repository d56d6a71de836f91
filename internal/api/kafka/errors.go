package kafka

import (
	"errors"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Kafka error codes used by name below.
var (
	errNone               int16 = 0
	errUnsupportedVersion       = kerr.UnsupportedVersion.Code
)

// scope says which kind of resource a request was about, for the
// authorization error codes, which Kafka splits by resource.
type scope int

const (
	scopeTopic scope = iota
	scopeGroup
	scopeCluster
)

// code maps a broker error to the Kafka error code a client acts on.
func code(err error, sc scope) int16 {
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, broker.ErrPermissionDenied), errors.Is(err, broker.ErrUnauthenticated):
		switch sc {
		case scopeGroup:
			return kerr.GroupAuthorizationFailed.Code
		case scopeCluster:
			return kerr.ClusterAuthorizationFailed.Code
		}
		return kerr.TopicAuthorizationFailed.Code
	case errors.Is(err, broker.ErrTopicNotFound), errors.Is(err, broker.ErrPartitionNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, broker.ErrInvalidTopicName):
		if sc == scopeGroup {
			return kerr.InvalidGroupID.Code
		}
		return kerr.InvalidTopicException.Code
	case errors.Is(err, broker.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, broker.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, broker.ErrCorruptBatch), errors.Is(err, broker.ErrCorruptData):
		return kerr.CorruptMessage.Code
	case errors.Is(err, broker.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, broker.ErrResourceExhausted):
		// Kafka has no "busy" code for produce or fetch; a timeout is
		// what a client retries after backing off.
		return kerr.RequestTimedOut.Code
	case errors.Is(err, broker.ErrGroupNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, broker.ErrGroupNotEmpty):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, broker.ErrUnknownMember), errors.Is(err, broker.ErrNotAssigned):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, broker.ErrInvalidArgument):
		return kerr.InvalidRequest.Code
	case errors.Is(err, broker.ErrUnavailable):
		if broker.LeaderAddress(err) != "" {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.LeaderNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}

// message is the detail a response's error message carries (Kafka shows
// it to users), or nil.
func message(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// throttleMillis is how long a client over its quota should wait (Kafka's
// ThrottleMillis), from the broker's retry hint, or 0. The request itself
// is refused (REQUEST_TIMED_OUT, retriable): the client retries it once
// the throttle time has passed.
func throttleMillis(err error) int32 {
	if !errors.Is(err, broker.ErrResourceExhausted) {
		return 0
	}
	return int32(min(broker.RetryAfter(err).Milliseconds(), 1<<31-1))
}

// maxMillis keeps the largest throttle time of a request's parts.
type maxMillis struct{ v atomic.Int32 }

func (m *maxMillis) raise(ms int32) {
	for {
		cur := m.v.Load()
		if ms <= cur || m.v.CompareAndSwap(cur, ms) {
			return
		}
	}
}

func (m *maxMillis) get() int32 { return m.v.Load() }
