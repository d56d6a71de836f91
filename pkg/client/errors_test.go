package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestErrorMapping sends every Hermes code through a gRPC status with an
// ErrorInfo, as the broker does, and checks the sentinel it matches.
func TestErrorMapping(t *testing.T) {
	cases := []struct {
		code     hermesv1.ErrorCode
		grpc     codes.Code
		sentinel error
	}{
		{hermesv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, codes.InvalidArgument, ErrInvalidArgument},
		{hermesv1.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, codes.NotFound, ErrTopicNotFound},
		{hermesv1.ErrorCode_ERROR_CODE_TOPIC_EXISTS, codes.AlreadyExists, ErrTopicExists},
		{hermesv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME, codes.InvalidArgument, ErrInvalidTopicName},
		{hermesv1.ErrorCode_ERROR_CODE_PARTITION_NOT_FOUND, codes.NotFound, ErrPartitionNotFound},
		{hermesv1.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE, codes.InvalidArgument, ErrMessageTooLarge},
		{hermesv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, codes.OutOfRange, ErrOffsetOutOfRange},
		{hermesv1.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED, codes.ResourceExhausted, ErrResourceExhausted},
		{hermesv1.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND, codes.NotFound, ErrGroupNotFound},
		{hermesv1.ErrorCode_ERROR_CODE_NOT_ASSIGNED, codes.FailedPrecondition, ErrNotAssigned},
		{hermesv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER, codes.FailedPrecondition, ErrUnknownMember},
		{hermesv1.ErrorCode_ERROR_CODE_CORRUPT_BATCH, codes.InvalidArgument, ErrCorruptBatch},
		{hermesv1.ErrorCode_ERROR_CODE_UNAVAILABLE, codes.Unavailable, ErrUnavailable},
		{hermesv1.ErrorCode_ERROR_CODE_INTERNAL, codes.Internal, ErrInternal},
		{hermesv1.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY, codes.FailedPrecondition, ErrGroupNotEmpty},
		{hermesv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, codes.PermissionDenied, ErrPermissionDenied},
		{hermesv1.ErrorCode_ERROR_CODE_UNAUTHENTICATED, codes.Unauthenticated, ErrUnauthenticated},
		{hermesv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, codes.AlreadyExists, ErrAlreadyExists},
		{hermesv1.ErrorCode_ERROR_CODE_NOT_FOUND, codes.NotFound, ErrNotFound},
		{hermesv1.ErrorCode_ERROR_CODE_CORRUPT_DATA, codes.DataLoss, ErrCorruptData},
	}
	if len(cases) != len(codeTable)-1 {
		t.Fatalf("test covers %d codes, table has %d", len(cases), len(codeTable)-1)
	}
	for _, tc := range cases {
		retriable := tc.grpc == codes.Unavailable || tc.grpc == codes.ResourceExhausted
		if codeTable[Code(tc.code)].grpc != tc.grpc {
			t.Errorf("%v: table says gRPC %v, API says %v", tc.code, codeTable[Code(tc.code)].grpc, tc.grpc)
		}
		err := fromRPC(context.Background(), hermesErr(tc.code, tc.grpc, retriable, "boom"))
		wrapped := fmt.Errorf("op: %w", err)
		if !errors.Is(wrapped, tc.sentinel) {
			t.Errorf("%v: errors.Is(%v, sentinel) = false", tc.code, err)
		}
		var e *Error
		if !errors.As(wrapped, &e) || e.Message != "boom" || e.Retriable != retriable || e.GRPCCode != tc.grpc {
			t.Errorf("%v: got %#v", tc.code, e)
		}
		if errors.Is(err, ErrInternal) && tc.sentinel != ErrInternal {
			t.Errorf("%v matches ErrInternal", tc.code)
		}
		if got := codeTable[Code(tc.code)].retriable; got != retriable {
			t.Errorf("%v: table retriable = %v", tc.code, got)
		}
	}
}

func TestErrorRetryAfterAndText(t *testing.T) {
	st, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&hermesv1.ErrorInfo{
		Code: hermesv1.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED, Message: "queue full", Retriable: true, RetryAfterMs: 250})
	err := fromRPC(context.Background(), st.Err())
	if got := retryAfter(err); got != 250*time.Millisecond {
		t.Errorf("retryAfter = %v", got)
	}
	if !isRetriable(err) {
		t.Error("not retriable")
	}
	if got, want := err.Error(), "RESOURCE_EXHAUSTED: queue full"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestErrorWithoutInfo covers statuses made by gRPC itself.
func TestErrorWithoutInfo(t *testing.T) {
	err := fromRPC(context.Background(), status.Error(codes.Unavailable, "connection refused"))
	if !errors.Is(err, ErrUnavailable) || !isRetriable(err) {
		t.Errorf("unavailable: %v", err)
	}
	err = fromRPC(context.Background(), status.Error(codes.NotFound, "no such method"))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnspecified || e.GRPCCode != codes.NotFound {
		t.Errorf("not found without info: %#v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fromRPC(ctx, status.Error(codes.Canceled, "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if err := fromRPC(context.Background(), status.Error(codes.DeadlineExceeded, "x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	if fromRPC(context.Background(), nil) != nil {
		t.Error("nil error mapped to non-nil")
	}
}

func TestRetryDelay(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}.normalize()
	for attempt, want := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 10: 40} {
		want *= time.Millisecond
		for range 20 {
			if d := p.delay(attempt, 0); d < want*4/5 || d > want*6/5 {
				t.Fatalf("delay(%d) = %v, want %v ±20%%", attempt, d, want)
			}
		}
	}
	if d := p.delay(1, time.Second); d != time.Second {
		t.Errorf("delay with hint = %v, want the hint", d)
	}
	if q := (RetryPolicy{}).normalize(); q.MaxAttempts != 1 || q.Backoff <= 0 || q.MaxBackoff < q.Backoff {
		t.Errorf("normalize zero policy = %+v", q)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeDefault, ModeConsistent, ModeEventual, ModePerformance} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("fast"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ParseMode(fast) err = %v", err)
	}
}

// A call whose retries the deadline cuts short says why it was retried,
// not only that the time is up.
func TestDeadlineNamesTheRetriedError(t *testing.T) {
	fb, c := startFake(t, WithRetry(100, 10*time.Millisecond))
	fb.mu.Lock()
	fb.topics["t"] = make([][]record.Record, 1)
	fb.unaryFails = 3
	fb.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Publish(ctx, "t", []*Message{{Payload: []byte("x")}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Publish: %v; want the deadline and the error retried", err)
	}
}
