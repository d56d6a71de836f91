package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Code is the kind of a broker-reported failure. Its values are those of
// hermesv1.ErrorCode, the same in every Hermes protocol.
type Code int32

// The codes of the Hermes API (proto/hermes/v1 ErrorCode).
const (
	CodeUnspecified       Code = Code(hermesv1.ErrorCode_ERROR_CODE_UNSPECIFIED)
	CodeInvalidArgument   Code = Code(hermesv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	CodeTopicNotFound     Code = Code(hermesv1.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND)
	CodeTopicExists       Code = Code(hermesv1.ErrorCode_ERROR_CODE_TOPIC_EXISTS)
	CodeInvalidTopicName  Code = Code(hermesv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME)
	CodePartitionNotFound Code = Code(hermesv1.ErrorCode_ERROR_CODE_PARTITION_NOT_FOUND)
	CodeMessageTooLarge   Code = Code(hermesv1.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE)
	CodeOffsetOutOfRange  Code = Code(hermesv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE)
	CodeResourceExhausted Code = Code(hermesv1.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED)
	CodeGroupNotFound     Code = Code(hermesv1.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND)
	CodeNotAssigned       Code = Code(hermesv1.ErrorCode_ERROR_CODE_NOT_ASSIGNED)
	CodeUnknownMember     Code = Code(hermesv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER)
	CodeCorruptBatch      Code = Code(hermesv1.ErrorCode_ERROR_CODE_CORRUPT_BATCH)
	CodeUnavailable       Code = Code(hermesv1.ErrorCode_ERROR_CODE_UNAVAILABLE)
	CodeInternal          Code = Code(hermesv1.ErrorCode_ERROR_CODE_INTERNAL)
	CodeGroupNotEmpty     Code = Code(hermesv1.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY)
	CodePermissionDenied  Code = Code(hermesv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	CodeUnauthenticated   Code = Code(hermesv1.ErrorCode_ERROR_CODE_UNAUTHENTICATED)
	CodeAlreadyExists     Code = Code(hermesv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS)
	CodeNotFound          Code = Code(hermesv1.ErrorCode_ERROR_CODE_NOT_FOUND)
	CodeCorruptData       Code = Code(hermesv1.ErrorCode_ERROR_CODE_CORRUPT_DATA)
)

// String returns the code's name as the API spells it without its
// ERROR_CODE_ prefix, e.g. "TOPIC_NOT_FOUND".
func (c Code) String() string {
	if k, ok := codeTable[c]; ok {
		return k.name
	}
	return fmt.Sprintf("CODE_%d", int32(c))
}

// Error is a failure reported by the broker (or, for ErrClosed-like
// conditions, by this package). Match its kind with errors.Is against the
// sentinel values below, never by its text:
//
//	if errors.Is(err, client.ErrTopicNotFound) { ... }
//
// errors.As(err, &e) with e *Error gives the details.
type Error struct {
	// Code is the kind of failure.
	Code Code
	// Message is the broker's human-readable explanation; may be empty.
	Message string
	// Retriable reports that sending the same request again (with the same
	// message ids) may succeed, after RetryAfter when that is non-zero.
	Retriable bool
	// RetryAfter is the broker's hint of how long to wait before retrying.
	RetryAfter time.Duration
	// GRPCCode is the gRPC status code the error arrived with (codes.OK
	// for errors reported in-band on a stream).
	GRPCCode codes.Code
}

// Error formats the error as "CODE: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is reports whether target is an *Error of the same Code, which is what
// makes errors.Is(err, ErrTopicNotFound) work.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinel errors, one per Code; test for them with errors.Is.
var (
	// ErrInvalidArgument: the request was malformed or a value out of range.
	ErrInvalidArgument = sentinel(CodeInvalidArgument)
	// ErrTopicNotFound: the named topic does not exist.
	ErrTopicNotFound = sentinel(CodeTopicNotFound)
	// ErrTopicExists: CreateTopic without IfNotExists on an existing topic.
	ErrTopicExists = sentinel(CodeTopicExists)
	// ErrInvalidTopicName: the topic name is not allowed.
	ErrInvalidTopicName = sentinel(CodeInvalidTopicName)
	// ErrPartitionNotFound: the partition is not one of the topic's.
	ErrPartitionNotFound = sentinel(CodePartitionNotFound)
	// ErrMessageTooLarge: a record exceeds the topic's max message bytes.
	ErrMessageTooLarge = sentinel(CodeMessageTooLarge)
	// ErrOffsetOutOfRange: the offset is below the log start or above its end.
	ErrOffsetOutOfRange = sentinel(CodeOffsetOutOfRange)
	// ErrResourceExhausted: a broker bound was reached; retriable after
	// Error.RetryAfter.
	ErrResourceExhausted = sentinel(CodeResourceExhausted)
	// ErrGroupNotFound: the consumer group does not exist.
	ErrGroupNotFound = sentinel(CodeGroupNotFound)
	// ErrNotAssigned: the member does not own the partition (e.g. a commit
	// after a rebalance moved it away).
	ErrNotAssigned = sentinel(CodeNotAssigned)
	// ErrUnknownMember: the broker no longer knows the group member (its
	// session expired).
	ErrUnknownMember = sentinel(CodeUnknownMember)
	// ErrCorruptBatch: the broker rejected a packed batch as malformed.
	ErrCorruptBatch = sentinel(CodeCorruptBatch)
	// ErrCorruptData: records stored on the broker failed their checksum
	// when read (the error names the offsets); reading on past them needs
	// an offset after them.
	ErrCorruptData = sentinel(CodeCorruptData)
	// ErrUnavailable: the broker (or a partition leader) cannot serve now;
	// retriable.
	ErrUnavailable = sentinel(CodeUnavailable)
	// ErrInternal: a broker bug or an unexpected failure.
	ErrInternal = sentinel(CodeInternal)
	// ErrGroupNotEmpty: the operation needs a group without live members.
	ErrGroupNotEmpty = sentinel(CodeGroupNotEmpty)
	// ErrPermissionDenied: the client's principal may not do this.
	ErrPermissionDenied = sentinel(CodePermissionDenied)
	// ErrUnauthenticated: the node requires credentials and got none, or
	// wrong ones.
	ErrUnauthenticated = sentinel(CodeUnauthenticated)
	// ErrAlreadyExists: a user of that name exists.
	ErrAlreadyExists = sentinel(CodeAlreadyExists)
	// ErrNotFound: no user or token of that name.
	ErrNotFound = sentinel(CodeNotFound)
)

// Errors made by this package, not by the broker.
var (
	// ErrClosed is returned by calls on a Client, Producer or Consumer
	// after its Close, and by futures of records a Close abandoned.
	ErrClosed = errors.New("hermes client: closed")
	// ErrNoGroup is returned by Consumer.Commit on a subscription without
	// a consumer group: there is nothing to commit to.
	ErrNoGroup = errors.New("hermes client: subscription has no consumer group")
	// ErrWrongAckMode is returned by Consumer.Ack and Consumer.Nack unless
	// the subscription uses AckPerMessage.
	ErrWrongAckMode = errors.New("hermes client: ack/nack need AckPerMessage mode")
	// ErrNotDurable is returned by Consumer.Ack, Consumer.Nack and
	// Consumer.Commit given a ModePerformance record: its offset is one of
	// the partition's in-memory ring, not of the durable log, so there is
	// nothing to acknowledge or commit.
	ErrNotDurable = errors.New("hermes client: performance record (ring offset): not acked or committed")
)

func sentinel(c Code) *Error { return &Error{Code: c, Retriable: codeTable[c].retriable} }

// codeKind is one row of the single table that maps Hermes codes.
type codeKind struct {
	name      string
	grpc      codes.Code
	retriable bool
}

// codeTable maps every Hermes code to its name, the gRPC code the broker
// sends it with, and whether it is retriable by default.
var codeTable = map[Code]codeKind{
	CodeUnspecified:       {"UNSPECIFIED", codes.Unknown, false},
	CodeInvalidArgument:   {"INVALID_ARGUMENT", codes.InvalidArgument, false},
	CodeTopicNotFound:     {"TOPIC_NOT_FOUND", codes.NotFound, false},
	CodeTopicExists:       {"TOPIC_EXISTS", codes.AlreadyExists, false},
	CodeInvalidTopicName:  {"INVALID_TOPIC_NAME", codes.InvalidArgument, false},
	CodePartitionNotFound: {"PARTITION_NOT_FOUND", codes.NotFound, false},
	CodeMessageTooLarge:   {"MESSAGE_TOO_LARGE", codes.InvalidArgument, false},
	CodeOffsetOutOfRange:  {"OFFSET_OUT_OF_RANGE", codes.OutOfRange, false},
	CodeResourceExhausted: {"RESOURCE_EXHAUSTED", codes.ResourceExhausted, true},
	CodeGroupNotFound:     {"GROUP_NOT_FOUND", codes.NotFound, false},
	CodeNotAssigned:       {"NOT_ASSIGNED", codes.FailedPrecondition, false},
	CodeUnknownMember:     {"UNKNOWN_MEMBER", codes.FailedPrecondition, false},
	CodeCorruptBatch:      {"CORRUPT_BATCH", codes.InvalidArgument, false},
	CodeUnavailable:       {"UNAVAILABLE", codes.Unavailable, true},
	CodeInternal:          {"INTERNAL", codes.Internal, false},
	CodeGroupNotEmpty:     {"GROUP_NOT_EMPTY", codes.FailedPrecondition, false},
	CodePermissionDenied:  {"PERMISSION_DENIED", codes.PermissionDenied, false},
	CodeUnauthenticated:   {"UNAUTHENTICATED", codes.Unauthenticated, false},
	CodeAlreadyExists:     {"ALREADY_EXISTS", codes.AlreadyExists, false},
	CodeNotFound:          {"NOT_FOUND", codes.NotFound, false},
	CodeCorruptData:       {"CORRUPT_DATA", codes.DataLoss, false},
}

// grpcFallback is the Hermes code given to a gRPC status that carries no
// ErrorInfo (e.g. a connection failure made by gRPC itself). gRPC codes
// shared by several Hermes codes (NotFound, FailedPrecondition) have none.
var grpcFallback = map[codes.Code]Code{
	codes.InvalidArgument:   CodeInvalidArgument,
	codes.AlreadyExists:     CodeTopicExists,
	codes.OutOfRange:        CodeOffsetOutOfRange,
	codes.ResourceExhausted: CodeResourceExhausted,
	codes.Unavailable:       CodeUnavailable,
	codes.Internal:          CodeInternal,
	codes.PermissionDenied:  CodePermissionDenied,
	codes.Unauthenticated:   CodeUnauthenticated,
}

// fromInfo converts an in-band ErrorInfo. REQUIRES: info != nil.
func fromInfo(info *hermesv1.ErrorInfo, gc codes.Code) *Error {
	return &Error{
		Code:       Code(info.GetCode()),
		Message:    info.GetMessage(),
		Retriable:  info.GetRetriable(),
		RetryAfter: time.Duration(info.GetRetryAfterMs()) * time.Millisecond,
		GRPCCode:   gc,
	}
}

// fromRPC converts the error of a gRPC call into an *Error. It returns nil
// for nil, ctx.Err() when the call failed because ctx ended, and err itself
// when it is not a gRPC status.
func fromRPC(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if info, ok := d.(*hermesv1.ErrorInfo); ok {
			return fromInfo(info, st.Code())
		}
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		if ctx != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if st.Code() == codes.DeadlineExceeded {
			return context.DeadlineExceeded
		}
		return context.Canceled
	}
	c, ok := grpcFallback[st.Code()]
	if !ok {
		c = CodeUnspecified
	}
	return &Error{
		Code:      c,
		Message:   st.Message(),
		Retriable: codeTable[c].retriable,
		GRPCCode:  st.Code(),
	}
}

// isRetriable reports whether err may succeed when sent again.
func isRetriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable
}

// retryAfter is the broker's retry hint carried by err, or 0.
func retryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
