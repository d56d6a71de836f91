package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// apiError is a protocol error reduced to its API code.
type apiError struct {
	code string
	msg  string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }
func (e *apiError) Code() string  { return e.code }

// grpcDriver speaks the gRPC API with the generated client.
type grpcDriver struct{ c pb.HermesClient }

func newGRPCDriver(t *testing.T, node *testcluster.Node) driver {
	c, _ := dial(t, node)
	return &grpcDriver{c: c}
}

func grpcErr(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*pb.ErrorInfo); ok {
			return &apiError{code: strings.TrimPrefix(info.Code.String(), "ERROR_CODE_"), msg: info.Message}
		}
	}
	return err
}

func grpcMode(mode string) pb.DeliveryMode {
	return map[string]pb.DeliveryMode{
		"consistent": pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, "eventual": pb.DeliveryMode_DELIVERY_MODE_EVENTUAL,
		"performance": pb.DeliveryMode_DELIVERY_MODE_PERFORMANCE,
	}[mode]
}

func (d *grpcDriver) CreateTopic(ctx context.Context, name string, c cTopicConfig) error {
	_, err := d.c.CreateTopic(ctx, &pb.CreateTopicRequest{Name: name, Config: &pb.TopicConfig{
		Partitions: c.Partitions, RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes,
		SegmentBytes: c.SegmentBytes, DefaultMode: grpcMode(c.DefaultMode), ReplicationFactor: c.ReplicationFactor}})
	return grpcErr(err)
}

func (d *grpcDriver) DescribeTopic(ctx context.Context, name string) (cTopicConfig, []int64, error) {
	resp, err := d.c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: name})
	if err != nil {
		return cTopicConfig{}, nil, grpcErr(err)
	}
	c := resp.Topic.Config
	out := cTopicConfig{Partitions: c.Partitions, RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes,
		SegmentBytes: c.SegmentBytes, ReplicationFactor: c.ReplicationFactor,
		DefaultMode: strings.ToLower(strings.TrimPrefix(c.DefaultMode.String(), "DELIVERY_MODE_"))}
	var ends []int64
	for _, p := range resp.Topic.Partitions {
		ends = append(ends, p.EndOffset)
	}
	return out, ends, nil
}

func (d *grpcDriver) DeleteTopic(ctx context.Context, name string) error {
	_, err := d.c.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: name})
	return grpcErr(err)
}

func (d *grpcDriver) Publish(ctx context.Context, topic, mode string, recs []cRecord) ([]cAck, error) {
	req := &pb.PublishRequest{Topic: topic, Mode: grpcMode(mode)}
	for _, r := range recs {
		pr := &pb.Record{Key: r.Key, Payload: r.Payload}
		for k, v := range r.Headers {
			pr.Headers = append(pr.Headers, &pb.Header{Key: k, Value: []byte(v)})
		}
		req.Records = append(req.Records, pr)
	}
	resp, err := d.c.Publish(ctx, req)
	if err != nil {
		return nil, grpcErr(err)
	}
	acks := make([]cAck, len(resp.Acks))
	for i, a := range resp.Acks {
		acks[i] = cAck{a.Partition, a.Offset}
	}
	return acks, nil
}

func grpcRecord(r *pb.Record) cRecord {
	out := cRecord{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Payload: r.Payload, DeliveryCount: int(r.DeliveryCount)}
	if len(r.Headers) > 0 {
		out.Headers = map[string]string{}
		for _, h := range r.Headers {
			out.Headers[h.Key] = string(h.Value)
		}
	}
	return out
}

func (d *grpcDriver) Fetch(ctx context.Context, topic string, partition int32, offset int64, max int) ([]cRecord, error) {
	resp, err := d.c.Fetch(ctx, &pb.FetchRequest{Topic: topic, Partition: partition, Offset: offset, MaxRecords: int32(max)})
	if err != nil {
		return nil, grpcErr(err)
	}
	var out []cRecord
	for _, r := range resp.Records {
		out = append(out, grpcRecord(r))
	}
	return out, nil
}

func (d *grpcDriver) Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error {
	_, err := d.c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: group, MemberId: member,
		Offsets: []*pb.PartitionOffset{{Topic: topic, Partition: partition, Offset: offset}}})
	return grpcErr(err)
}

func (d *grpcDriver) Committed(ctx context.Context, group, topic string, partition int32) (int64, error) {
	resp, err := d.c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: group})
	if err != nil {
		return 0, grpcErr(err)
	}
	for _, p := range resp.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p.CommittedOffset, nil
		}
	}
	return 0, fmt.Errorf("group %s has no partition %s/%d", group, topic, partition)
}

func (d *grpcDriver) Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := d.c.Subscribe(ctx)
	if err != nil {
		cancel()
		return nil, grpcErr(err)
	}
	open := &pb.SubscribeOptions{Topic: topic, Group: o.Group, CreditRecords: 1,
		AckWaitMs: o.AckWait.Milliseconds(), MaxDeliveries: int32(o.MaxDeliveries)}
	switch o.Start {
	case "earliest":
		open.Start = &pb.StartPosition{Position: &pb.StartPosition_Earliest{Earliest: true}}
	case "offset":
		open.Start = &pb.StartPosition{Position: &pb.StartPosition_Offset{Offset: o.StartValue}}
	case "timestamp":
		open.Start = &pb.StartPosition{Position: &pb.StartPosition_TimestampUnixNano{TimestampUnixNano: o.StartValue}}
	}
	switch o.AckMode {
	case "per-message":
		open.AckMode = pb.AckMode_ACK_MODE_PER_MESSAGE
	case "auto":
		open.AckMode = pb.AckMode_ACK_MODE_AUTO
	}
	if err := s.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: open}}); err != nil {
		if errors.Is(err, io.EOF) {
			// The server ended the stream first (a refusal): its status
			// comes with Recv.
			_, err = s.Recv()
		}
		cancel()
		return nil, grpcErr(err)
	}
	resp, err := s.Recv()
	if err != nil {
		cancel()
		return nil, grpcErr(err)
	}
	return &grpcSub{s: s, cancel: cancel, topic: topic, member: resp.GetSubscribed().GetMemberId()}, nil
}

// grpcSub asks for one record at a time (credit 1), so Next never leaves
// records delivered but unseen.
type grpcSub struct {
	mu     sync.Mutex
	s      pb.Hermes_SubscribeClient
	cancel context.CancelFunc
	topic  string
	member string
	queue  []cRecord
}

func (g *grpcSub) MemberID() string { return g.member }
func (g *grpcSub) Close()           { g.cancel() }

func (g *grpcSub) Next(ctx context.Context) (cRecord, error) {
	for len(g.queue) == 0 {
		resp, err := g.s.Recv()
		if err != nil {
			return cRecord{}, grpcErr(err)
		}
		if e := resp.GetError(); e != nil {
			return cRecord{}, &apiError{code: strings.TrimPrefix(e.Code.String(), "ERROR_CODE_"), msg: e.Message}
		}
		for _, r := range resp.GetDeliveries().GetRecords() {
			g.queue = append(g.queue, grpcRecord(r))
		}
		if n := len(resp.GetDeliveries().GetRecords()); n > 0 {
			g.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Credit{Credit: &pb.Credit{Records: int32(n)}}})
		}
	}
	r := g.queue[0]
	g.queue = g.queue[1:]
	return r, nil
}

func (g *grpcSub) send(req *pb.SubscribeRequest) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.s.Send(req)
}

func (g *grpcSub) Ack(ctx context.Context, r cRecord) error {
	err := g.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Ack{Ack: &pb.AckRequest{
		Records: []*pb.PartitionOffset{{Topic: g.topic, Partition: r.Partition, Offset: r.Offset}},
	}}})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
