package grpcapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/broker/brokertest"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// serve runs the adapter over a fake broker on a loopback socket.
func serve(t *testing.T) (*brokertest.Fake, pb.HermesClient) {
	t.Helper()
	f := brokertest.New()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerCodec(nil))
	Register(srv, New(f, slog.New(slog.NewTextHandler(io.Discard, nil)), "test", StreamLimits{}))
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	lastConn = conn
	return f, pb.NewHermesClient(conn)
}

// lastConn is the connection serve made last (for raw calls).
var lastConn *grpc.ClientConn

// rawCodec sends []byte messages as they are: bytes that are not
// protobuf reach the server.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return nil }
func (rawCodec) Name() string                       { return "proto" }

// A request that is not protobuf is the client's fault: INVALID_ARGUMENT
// with the API's error code, on unary calls and on streams, never
// INTERNAL.
func TestUndecodableRequestsAreInvalidArgument(t *testing.T) {
	_, c := serve(t)
	if _, err := c.CreateTopic(ctxT(t), &pb.CreateTopicRequest{Name: "t", Config: &pb.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	garbage := []byte{0xff, 0xff, 0xff, 0xff}
	err := lastConn.Invoke(ctxT(t), pb.Hermes_DescribeTopic_FullMethodName, garbage, new([]byte), grpc.ForceCodec(rawCodec{}))
	var info *pb.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		info, _ = d.(*pb.ErrorInfo)
	}
	if status.Code(err) != codes.InvalidArgument || info == nil || info.Code != pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
		t.Fatalf("unary call with garbage: %v, want INVALID_ARGUMENT", err)
	}
	stream, err := lastConn.NewStream(ctxT(t), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		pb.Hermes_PublishStream_FullMethodName, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(garbage); err != nil {
		t.Fatal(err)
	}
	if err := stream.RecvMsg(new([]byte)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stream with garbage: %v, want INVALID_ARGUMENT", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Every broker error kind reaches the client as its gRPC code and API
// code, with the broker's Retriable bit and hints.
func TestErrorKindsMapToCodes(t *testing.T) {
	f, c := serve(t)
	cases := []struct {
		kind error
		code codes.Code
		api  pb.ErrorCode
	}{
		{broker.ErrInvalidArgument, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{broker.ErrInvalidTopicName, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME},
		{broker.ErrTopicNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND},
		{broker.ErrTopicExists, codes.AlreadyExists, pb.ErrorCode_ERROR_CODE_TOPIC_EXISTS},
		{broker.ErrPartitionNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_PARTITION_NOT_FOUND},
		{broker.ErrMessageTooLarge, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE},
		{broker.ErrCorruptBatch, codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_CORRUPT_BATCH},
		{broker.ErrOffsetOutOfRange, codes.OutOfRange, pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE},
		{broker.ErrResourceExhausted, codes.ResourceExhausted, pb.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED},
		{broker.ErrGroupNotFound, codes.NotFound, pb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND},
		{broker.ErrNotAssigned, codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_NOT_ASSIGNED},
		{broker.ErrUnknownMember, codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER},
		{broker.ErrGroupNotEmpty, codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY},
		{broker.ErrPermissionDenied, codes.PermissionDenied, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{broker.ErrUnavailable, codes.Unavailable, pb.ErrorCode_ERROR_CODE_UNAVAILABLE},
		{broker.ErrCorruptData, codes.DataLoss, pb.ErrorCode_ERROR_CODE_CORRUPT_DATA},
		{errors.New("a bug"), codes.Internal, pb.ErrorCode_ERROR_CODE_INTERNAL},
	}
	for _, tc := range cases {
		f.Errs["Topic"] = broker.Errorf(tc.kind, "detail of %v", tc.kind)
		if tc.api == pb.ErrorCode_ERROR_CODE_INTERNAL {
			f.Errs["Topic"] = tc.kind
		}
		_, err := c.DescribeTopic(ctxT(t), &pb.DescribeTopicRequest{Name: "t"})
		st := status.Convert(err)
		var info *pb.ErrorInfo
		for _, d := range st.Details() {
			info, _ = d.(*pb.ErrorInfo)
		}
		if st.Code() != tc.code || info == nil || info.Code != tc.api || info.Retriable != broker.Retriable(f.Errs["Topic"]) {
			t.Errorf("%v: status %v, info %+v; want %v, %v", tc.kind, st.Code(), info, tc.code, tc.api)
		}
	}
}

// A publish's records reach the broker as sent, and the acknowledgement
// comes back per record.
func TestPublishConvertsRecords(t *testing.T) {
	f, c := serve(t)
	if _, err := c.CreateTopic(ctxT(t), &pb.CreateTopicRequest{Name: "t", Config: &pb.TopicConfig{Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Publish(ctxT(t), &pb.PublishRequest{Topic: "t", Mode: pb.DeliveryMode_DELIVERY_MODE_EVENTUAL, Records: []*pb.Record{
		{Key: []byte("k"), Payload: []byte("one"), Headers: []*pb.Header{{Key: "h", Value: []byte("v")}}},
		{Key: []byte("k"), Payload: []byte("two")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Acks) != 2 || resp.Acks[1].Offset != resp.Acks[0].Offset+1 || resp.Mode != pb.DeliveryMode_DELIVERY_MODE_EVENTUAL {
		t.Fatalf("acks %+v", resp)
	}
	res, err := f.Fetch(context.Background(), broker.FetchRequest{Topic: "t", Partition: resp.Acks[0].Partition})
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := broker.DecodeFrom(nil, res.Batches, 0, 0)
	if err != nil || len(recs) != 2 || string(recs[0].Key) != "k" || string(recs[0].Payload) != "one" ||
		len(recs[0].Headers) != 1 || recs[0].Headers[0].Key != "h" || string(recs[0].Headers[0].Value) != "v" {
		t.Fatalf("the broker got %+v, %v", recs, err)
	}
}

// A subscriber's credit goes to the broker as it is: the adapter keeps no
// credit of its own, and sends what the broker delivers within it.
func TestSubscribeCreditGoesToTheBroker(t *testing.T) {
	f, c := serve(t)
	f.CreateTopic(context.Background(), "t", broker.TopicConfig{}, false)
	for i := 0; i < 10; i++ {
		_, err := f.Publish(context.Background(), &broker.PublishRequest{Topic: "t", Partition: 0,
			Records: []record.Record{{Payload: []byte("0123456789")}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: &pb.SubscribeOptions{Topic: "t",
		Start: &pb.StartPosition{Position: &pb.StartPosition_Earliest{Earliest: true}}, CreditRecords: 3, CreditBytes: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	received := func(n int) {
		t.Helper()
		for got := 0; got < n; {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			got += len(resp.GetDeliveries().GetRecords())
			if got > n {
				t.Fatalf("received %d records with credit for %d", got, n)
			}
		}
	}
	if resp, err := stream.Recv(); err != nil || resp.GetSubscribed() == nil {
		t.Fatalf("first answer %v, %v", resp, err)
	}
	received(3)
	if err := stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Credit{Credit: &pb.Credit{Records: 2}}}); err != nil {
		t.Fatal(err)
	}
	received(2)
	var grants []brokertest.Call
	for _, call := range f.Calls() {
		if call.Method == "Grant" {
			grants = append(grants, call)
		}
	}
	if len(grants) != 2 || grants[0].Records != 3 || grants[0].Bytes != 1000 || grants[1].Records != 2 || grants[1].Bytes != 0 {
		t.Fatalf("the broker was granted %+v; want {3, 1000} then {2, 0}", grants)
	}
}

// A publish stream of a node that starts a graceful stop answers the
// requests it accepted, then ends with UNAVAILABLE (the client goes on
// with another node) instead of holding the node's stop up.
func TestPublishStreamEndsWhenTheNodeDrains(t *testing.T) {
	f, c := serve(t)
	if _, err := c.CreateTopic(ctxT(t), &pb.CreateTopicRequest{Name: "t", Config: &pb.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	stream, err := c.PublishStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	for i := range 3 {
		if err := stream.Send(&pb.PublishRequest{RequestId: uint64(i + 1), Topic: "t", Partition: &p0,
			Records: []*pb.Record{{Payload: []byte("x")}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		resp, err := stream.Recv()
		if err != nil || resp.Error != nil || resp.RequestId != uint64(i+1) {
			t.Fatalf("answer %d: %+v, %v", i+1, resp, err)
		}
	}
	f.Drain()
	_, err = stream.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("after the node drains: %v, want UNAVAILABLE", err)
	}
}
