package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/broker"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// errorKinds maps each broker error kind to its gRPC code and API error
// code: the one table of this protocol. Retriability comes from the broker.
var errorKinds = []struct {
	kind error
	code codes.Code
	api  pb.ErrorCode
}{
	{broker.ErrInvalidArgument, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	{broker.ErrInvalidTopicName, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME},
	{broker.ErrMessageTooLarge, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE},
	{broker.ErrCorruptBatch, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_CORRUPT_BATCH},
	{broker.ErrCorruptData, codes.DataLoss, pb.ErrorCode_ERROR_CODE_CORRUPT_DATA},
	{broker.ErrTopicNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND},
	{broker.ErrPartitionNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_PARTITION_NOT_FOUND},
	{broker.ErrGroupNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND},
	{broker.ErrTopicExists, codes.AlreadyExists, pb.ErrorCode_ERROR_CODE_TOPIC_EXISTS},
	{broker.ErrOffsetOutOfRange, codes.OutOfRange, pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE},
	{broker.ErrResourceExhausted, codes.ResourceExhausted, pb.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED},
	{broker.ErrNotAssigned, codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_NOT_ASSIGNED},
	{broker.ErrUnknownMember, codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER},
	{broker.ErrGroupNotEmpty, codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY},
	{broker.ErrPermissionDenied, codes.PermissionDenied, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
	{broker.ErrUnauthenticated, codes.Unauthenticated, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED},
	{broker.ErrAlreadyExists, codes.AlreadyExists, pb.ErrorCode_ERROR_CODE_ALREADY_EXISTS},
	{broker.ErrNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_NOT_FOUND},
	{broker.ErrUnavailable, codes.Unavailable, pb.ErrorCode_ERROR_CODE_UNAVAILABLE},
}

// errorInfo describes err for the API.
func errorInfo(err error) *pb.ErrorInfo {
	info := &pb.ErrorInfo{Code: pb.ErrorCode_ERROR_CODE_INTERNAL, Message: err.Error()}
	for _, k := range errorKinds {
		if errors.Is(err, k.kind) {
			info.Code = k.api
			break
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		info.Code = pb.ErrorCode_ERROR_CODE_UNAVAILABLE
	}
	info.Retriable = broker.Retriable(err) || info.Code == pb.ErrorCode_ERROR_CODE_UNAVAILABLE
	info.RetryAfterMs = broker.RetryAfter(err).Milliseconds()
	info.LeaderAddress = broker.LeaderAddress(err)
	return info
}

// toStatus turns a broker error into a gRPC status with an ErrorInfo
// detail.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isBrokerError(err) {
		return err
	}
	code := codes.Internal
	for _, k := range errorKinds {
		if errors.Is(err, k.kind) {
			code = k.code
			break
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	st := status.New(code, err.Error())
	if withInfo, e := st.WithDetails(errorInfo(err)); e == nil {
		st = withInfo
	}
	return st.Err()
}

func isBrokerError(err error) bool {
	for _, k := range errorKinds {
		if errors.Is(err, k.kind) {
			return true
		}
	}
	return false
}

func invalid(format string, args ...any) error {
	return errorf(broker.ErrInvalidArgument, format, args...)
}
