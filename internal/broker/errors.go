package broker

import (
	"errors"
	"fmt"
	"time"
)

// Error kinds the broker returns. Adapters map each kind to their
// protocol's code in one table and test with errors.Is, never by text.
var (
	// ErrInvalidArgument: a request field is malformed or out of bounds.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidTopicName: a topic (or group) name breaks the naming rule.
	ErrInvalidTopicName = errors.New("invalid name")
	// ErrTopicNotFound: no topic of that name.
	ErrTopicNotFound = errors.New("topic not found")
	// ErrTopicExists: CreateTopic of an existing topic.
	ErrTopicExists = errors.New("topic already exists")
	// ErrPartitionNotFound: the topic has no such partition.
	ErrPartitionNotFound = errors.New("partition not found")
	// ErrMessageTooLarge: a record exceeds the topic's max message size.
	ErrMessageTooLarge = errors.New("message too large")
	// ErrCorruptBatch: a packed batch failed validation (framing or CRC).
	ErrCorruptBatch = errors.New("corrupt batch")
	// ErrOffsetOutOfRange: an offset below the log start or past its end.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrResourceExhausted: a bound was reached (queue bytes, disk quota).
	// Retriable; RetryAfter tells when.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrGroupNotFound: no group of that name (no members, no offsets).
	ErrGroupNotFound = errors.New("group not found")
	// ErrNotAssigned: a member acted on a partition it does not own.
	ErrNotAssigned = errors.New("partition not assigned to this member")
	// ErrUnknownMember: the member left or its session expired.
	ErrUnknownMember = errors.New("unknown group member")
	// ErrGroupNotEmpty: an administrative commit while members own the partitions.
	ErrGroupNotEmpty = errors.New("group has live members")
	// ErrPermissionDenied: the request's principal may not do this.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnauthenticated: no valid credentials, where they are required,
	// or wrong ones.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrAlreadyExists: creating a user (or ACL, token) that exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrNotFound: a user or token that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the broker or partition cannot serve now (closing,
	// failed storage, another node leads it). Retriable.
	ErrUnavailable = errors.New("unavailable")
	// ErrCorruptData: stored records failed their checksum when read. Not
	// retriable: the same read fails again until the data is repaired.
	ErrCorruptData = errors.New("corrupt data")
)

// Retry hints that the broker's retriable errors carry (RetryAfter): how
// long a client should wait before it sends the same request again.
const (
	// notLeaderRetry: the partition's leader is another node, or being
	// elected.
	notLeaderRetry = 50 * time.Millisecond
	// queueFullRetry: the partition's proposal queue stayed full for
	// replication.Config.ProposeWait.
	queueFullRetry = 50 * time.Millisecond
	// duplicateInFlightRetry: a copy of a retried batch is stored but not
	// committed yet; its offsets come with the next retry.
	duplicateInFlightRetry = 20 * time.Millisecond
	// diskQuotaRetry: Config.MaxDiskBytes is used up.
	diskQuotaRetry = time.Second
	// topicBusyRetry: a topic of that name is being created or deleted.
	topicBusyRetry = 100 * time.Millisecond
	// metadataRetry: the metadata group has no leader, or a node has not
	// registered yet.
	metadataRetry = 200 * time.Millisecond
	// coordinatorRetry: the group coordinator moved or cannot be reached.
	coordinatorRetry = 100 * time.Millisecond
	// subscriptionsRetry: Config.MaxSubscriptions are open.
	subscriptionsRetry = time.Second
	// groupStateRetry: a group's claim or committed offsets could not be
	// written through the metadata group (no quorum, a leader change).
	groupStateRetry = 200 * time.Millisecond
	// relayedCommitRetry: the group coordinator did not answer a relayed
	// commit within relayedCommitWait.
	relayedCommitRetry = time.Second
)

// Retriable reports whether err is of a kind a client may retry
// unchanged (the kind's Retriable bit in the table below).
func Retriable(err error) bool {
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.retriable
		}
	}
	return false
}

// kindError carries a kind, a detail message and optional hints.
type kindError struct {
	kind       error
	msg        string
	retryAfter time.Duration
	// leaderNode is the node that can serve the request instead (0: not
	// known), and leader its gRPC address, for clients.
	leaderNode uint64
	leader     string
}

func (e *kindError) Error() string { return e.kind.Error() + ": " + e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf makes an error of the given kind with a formatted detail.
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Errorf makes an error of one of the kinds above with a formatted
// detail, for adapters that reject input before calling the broker.
func Errorf(kind error, format string, args ...any) error { return errorf(kind, format, args...) }

// exhausted makes a retriable ErrResourceExhausted with a retry hint.
func exhausted(after time.Duration, format string, args ...any) error {
	return &kindError{kind: ErrResourceExhausted, msg: fmt.Sprintf(format, args...), retryAfter: after}
}

// LeaderAddress returns the gRPC address of the node that can serve the
// failed request (a partition's leader, the group coordinator), or "".
func LeaderAddress(err error) string {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.leader
	}
	return ""
}

// LeaderNode returns the id of the node that can serve the failed request
// (a partition's leader, the group coordinator), or 0: its addresses for
// each protocol are in Nodes.
func LeaderNode(err error) uint64 { return leaderNode(err) }

// leaderNode returns the id of the node that can serve the failed
// request, or 0.
func leaderNode(err error) uint64 {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.leaderNode
	}
	return 0
}

// RetryAfter returns the retry hint carried by err, or 0.
func RetryAfter(err error) time.Duration {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.retryAfter
	}
	return 0
}

// kinds is the one table of error kinds: the code every protocol shows
// (gRPC's ErrorInfo, REST's and GraphQL's "code", the node-to-node
// service), and whether a client may retry the request unchanged.
// Adapters map each kind to their protocol's own codes from it.
var kinds = []struct {
	kind      error
	name      string
	retriable bool
}{
	{ErrInvalidArgument, "INVALID_ARGUMENT", false},
	{ErrInvalidTopicName, "INVALID_TOPIC_NAME", false},
	{ErrTopicNotFound, "TOPIC_NOT_FOUND", false},
	{ErrTopicExists, "TOPIC_EXISTS", false},
	{ErrPartitionNotFound, "PARTITION_NOT_FOUND", false},
	{ErrMessageTooLarge, "MESSAGE_TOO_LARGE", false},
	{ErrCorruptBatch, "CORRUPT_BATCH", false},
	{ErrOffsetOutOfRange, "OFFSET_OUT_OF_RANGE", false},
	{ErrResourceExhausted, "RESOURCE_EXHAUSTED", true},
	{ErrGroupNotFound, "GROUP_NOT_FOUND", false},
	{ErrNotAssigned, "NOT_ASSIGNED", false},
	{ErrUnknownMember, "UNKNOWN_MEMBER", false},
	{ErrGroupNotEmpty, "GROUP_NOT_EMPTY", false},
	{ErrPermissionDenied, "PERMISSION_DENIED", false},
	{ErrUnauthenticated, "UNAUTHENTICATED", false},
	{ErrAlreadyExists, "ALREADY_EXISTS", false},
	{ErrNotFound, "NOT_FOUND", false},
	{ErrUnavailable, "UNAVAILABLE", true},
	{ErrCorruptData, "CORRUPT_DATA", false},
}

// Code names the kind of err as every protocol shows it ("TOPIC_NOT_FOUND",
// ...), or "INTERNAL" for an error of no known kind. The names equal the
// gRPC API's ErrorCode values without their ERROR_CODE_ prefix.
func Code(err error) string {
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return "INTERNAL"
}

// KindOf returns the kind named code (as Code returns it), or
// ErrUnavailable for a name of no known kind.
func KindOf(code string) error {
	for _, k := range kinds {
		if k.name == code {
			return k.kind
		}
	}
	return ErrUnavailable
}

// detail is err's message without its kind.
func detail(err error) string {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.msg
	}
	return err.Error()
}
