package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// errorCode returns the gRPC code and the API error code of err.
func errorCode(err error) (codes.Code, pb.ErrorCode) {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*pb.ErrorInfo); ok {
			return st.Code(), info.Code
		}
	}
	return st.Code(), pb.ErrorCode_ERROR_CODE_UNSPECIFIED
}

// TestBadInputGetsPreciseErrors sends every kind of bad request and checks
// each gets its own code, that nothing acknowledged before is lost, and
// that the broker keeps serving.
func TestBadInputGetsPreciseErrors(t *testing.T) {
	node := testcluster.StartNode(t)
	c, _ := dial(t, node)
	_, err := c.CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "good", Config: &pb.TopicConfig{Partitions: 2, MaxMessageBytes: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	p0, p9, neg := int32(0), int32(9), int32(-1)
	ok := &pb.PublishRequest{Topic: "good", Partition: &p0, Records: []*pb.Record{{Payload: []byte("kept")}}}
	if _, err := c.Publish(ctxT(t, 10*time.Second), ok); err != nil {
		t.Fatal(err)
	}

	ctx := ctxT(t, 30*time.Second)
	call := func(f func() error) error { return f() }
	cases := []struct {
		name string
		err  error
		code codes.Code
		api  pb.ErrorCode
	}{
		{"unknown topic", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "missing", Records: []*pb.Record{{Payload: []byte("x")}}})
			return err
		}), codes.NotFound, pb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND},
		{"oversized payload", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good", Records: []*pb.Record{{Payload: make([]byte, 1025)}}})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE},
		{"invalid topic name", call(func() error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "no spaces allowed"})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME},
		{"empty topic name", call(func() error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: ""})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME},
		{"too long topic name", call(func() error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: strings.Repeat("a", 250)})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_TOPIC_NAME},
		{"topic exists", call(func() error {
			_, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: "good"})
			return err
		}), codes.AlreadyExists, pb.ErrorCode_ERROR_CODE_TOPIC_EXISTS},
		{"negative fetch offset", call(func() error {
			_, err := c.Fetch(ctx, &pb.FetchRequest{Topic: "good", Offset: -5})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{"fetch past the end", call(func() error {
			_, err := c.Fetch(ctx, &pb.FetchRequest{Topic: "good", Offset: 99})
			return err
		}), codes.OutOfRange, pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE},
		{"unknown partition", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good", Partition: &p9, Records: []*pb.Record{{Payload: []byte("x")}}})
			return err
		}), codes.NotFound, pb.ErrorCode_ERROR_CODE_PARTITION_NOT_FOUND},
		{"negative partition", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good", Partition: &neg, Records: []*pb.Record{{Payload: []byte("x")}}})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{"corrupt packed batch", call(func() error {
			b := packed(newIDs(3), 10)
			b[len(b)-1] ^= 0xff
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good", Partition: &p0, Batch: b})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_CORRUPT_BATCH},
		{"bad message id", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good", Records: []*pb.Record{{MessageId: []byte{1, 2, 3}, Payload: []byte("x")}}})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{"empty publish", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good"})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{"unknown mode", call(func() error {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "good", Mode: 42, Records: []*pb.Record{{Payload: []byte("x")}}})
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{"unknown group", call(func() error {
			_, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: "nobody"})
			return err
		}), codes.NotFound, pb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND},
		{"commit past the end", call(func() error {
			_, err := c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.PartitionOffset{{Topic: "good", Partition: 0, Offset: 1000}}})
			return err
		}), codes.OutOfRange, pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE},
		{"subscribe without open", call(func() error {
			s, err := c.Subscribe(ctx)
			if err != nil {
				return err
			}
			s.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Heartbeat{Heartbeat: &pb.Heartbeat{}}})
			_, err = s.Recv()
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
		{"per-message acks without a group", call(func() error {
			s, err := c.Subscribe(ctx)
			if err != nil {
				return err
			}
			s.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: &pb.SubscribeOptions{Topic: "good", AckMode: pb.AckMode_ACK_MODE_PER_MESSAGE}}})
			_, err = s.Recv()
			return err
		}), codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	}
	for _, tc := range cases {
		code, api := errorCode(tc.err)
		if code != tc.code || api != tc.api {
			t.Errorf("%s: got %v/%v (%v), want %v/%v", tc.name, code, api, tc.err, tc.code, tc.api)
		}
	}

	// Garbage on the gRPC port is dropped without harm.
	if conn, err := net.Dial("tcp", node.GRPCAddr); err == nil {
		conn.Write([]byte("GET / HTTP/1.0\r\n\r\n\x00\x01\x02garbage"))
		conn.Close()
	}
	// A PublishStream error answers that request only; the stream goes on.
	stream, err := c.PublishStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&pb.PublishRequest{RequestId: 1, Topic: "missing", Records: []*pb.Record{{Payload: []byte("x")}}})
	stream.Send(&pb.PublishRequest{RequestId: 2, Topic: "good", Partition: &p0, Records: []*pb.Record{{Payload: []byte("after")}}})
	stream.CloseSend()
	answers := map[uint64]*pb.PublishResponse{}
	for len(answers) < 2 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		answers[resp.RequestId] = resp
	}
	if answers[1].Error.GetCode() != pb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND || answers[2].Error != nil {
		t.Fatalf("stream answers: %v / %v", answers[1], answers[2])
	}

	recs := readAll(t, c, "good", 0)
	if len(recs) != 2 || string(recs[0].Payload) != "kept" || string(recs[1].Payload) != "after" {
		t.Fatalf("partition 0 after the bad requests holds %d records", len(recs))
	}
	if resp, err := c.Health(ctx, &pb.HealthRequest{}); err != nil || resp.Status != "SERVING" {
		t.Fatalf("health after bad input: %v %v", resp, err)
	}
}
