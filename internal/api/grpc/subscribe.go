package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// defaultCreditRecords is a subscription's record credit when the client
// names none.
const defaultCreditRecords = 1000

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// Subscribe serves one subscription: records flow while the client has
// credit; its other requests (credit, acks, commits, heartbeats) are
// handled as they come.
func (s *Service) Subscribe(stream pb.Hermes_SubscribeServer) error {
	first, err := stream.Recv()
	if isEOF(err) {
		return toStatus(invalid("the stream ended before its `open` request"))
	}
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return toStatus(invalid("the first subscribe request must be `open`"))
	}
	opts, err := subscribeOptions(open)
	if err != nil {
		return toStatus(err)
	}
	sub, err := s.b.Subscribe(stream.Context(), opts)
	if err != nil {
		return toStatus(err)
	}
	defer sub.Close()
	ss := &subStream{stream: stream, sub: sub}
	defer ss.finish()
	records := int(open.CreditRecords)
	if records == 0 {
		records = defaultCreditRecords
	}
	sub.Grant(records, open.CreditBytes)
	if err := ss.send(&pb.SubscribeResponse{Kind: &pb.SubscribeResponse_Subscribed{Subscribed: &pb.Subscribed{
		MemberId: sub.MemberID(), SessionTimeoutMs: sub.SessionTimeout().Milliseconds(),
		CoordinatorAddress: sub.Coordinator(),
	}}}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- ss.receive()
		cancel()
	}()
	err = ss.deliver(ctx)
	cancel()
	if err == nil || errors.Is(err, context.Canceled) {
		select {
		case err = <-recvErr:
		default:
		}
	}
	if err == nil || isEOF(err) || errors.Is(err, context.Canceled) {
		return nil
	}
	return toStatus(err)
}

func subscribeOptions(o *pb.SubscribeOptions) (broker.SubscribeOptions, error) {
	out := broker.SubscribeOptions{
		Topic: o.Topic, Group: o.Group, Partitions: o.Partitions, ClientID: o.ClientId,
		AckWait:            time.Duration(o.AckWaitMs) * time.Millisecond,
		MaxDeliveries:      int(o.MaxDeliveries),
		MaxAckPending:      int(o.MaxAckPending),
		DeadLetterTopic:    o.DeadLetterTopic,
		SessionTimeout:     time.Duration(o.SessionTimeoutMs) * time.Millisecond,
		IncludePerformance: o.IncludePerformance,
		Packed:             o.Packed,
	}
	if o.CreditRecords < 0 || o.CreditBytes < 0 {
		return out, invalid("credit must not be negative")
	}
	switch o.AckMode {
	case pb.AckMode_ACK_MODE_UNSPECIFIED:
		out.AckMode = broker.AckManual
	case pb.AckMode_ACK_MODE_AUTO:
		out.AckMode = broker.AckAuto
	case pb.AckMode_ACK_MODE_PER_MESSAGE:
		out.AckMode = broker.AckPerMessage
	default:
		return out, invalid("unknown ack mode %d", o.AckMode)
	}
	switch p := o.GetStart().GetPosition().(type) {
	case nil, *pb.StartPosition_Latest:
		out.Start = broker.StartPosition{Kind: broker.StartLatest}
	case *pb.StartPosition_Earliest:
		out.Start = broker.StartPosition{Kind: broker.StartEarliest}
	case *pb.StartPosition_Offset:
		out.Start = broker.StartPosition{Kind: broker.StartOffset, Value: p.Offset}
	case *pb.StartPosition_TimestampUnixNano:
		out.Start = broker.StartPosition{Kind: broker.StartTimestamp, Value: p.TimestampUnixNano}
	}
	return out, nil
}

// subStream is one Subscribe call's state.
type subStream struct {
	stream pb.Hermes_SubscribeServer
	sub    broker.Subscription
	sendMu sync.Mutex
	done   bool // guarded by sendMu: the handler returned; no more sends
}

var errStreamDone = errors.New("subscription stream finished")

// send sends on the stream unless the handler has returned (gRPC forbids
// sending after that; the receive goroutine may still be running).
func (ss *subStream) send(resp *pb.SubscribeResponse) error {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	if ss.done {
		return errStreamDone
	}
	return ss.stream.Send(resp)
}

func (ss *subStream) finish() {
	ss.sendMu.Lock()
	ss.done = true
	ss.sendMu.Unlock()
}

// receive handles the client's requests until the stream ends.
func (ss *subStream) receive() error {
	for {
		req, err := ss.stream.Recv()
		if err != nil {
			return err
		}
		if err := ss.sub.Heartbeat(); err != nil {
			return err
		}
		if err := ss.handle(req); err != nil {
			if e := ss.send(&pb.SubscribeResponse{Kind: &pb.SubscribeResponse_Error{Error: errorInfo(err)}}); e != nil {
				return e
			}
		}
	}
}

func (ss *subStream) handle(req *pb.SubscribeRequest) error {
	switch k := req.Kind.(type) {
	case *pb.SubscribeRequest_Credit:
		if k.Credit.Records < 0 || k.Credit.Bytes < 0 {
			return invalid("credit must not be negative")
		}
		ss.sub.Grant(int(k.Credit.Records), k.Credit.Bytes)
	case *pb.SubscribeRequest_Ack:
		return forEachPartition(k.Ack.Records, ss.sub.Ack)
	case *pb.SubscribeRequest_Nack:
		return forEachPartition(k.Nack.Records, ss.sub.Nack)
	case *pb.SubscribeRequest_Commit:
		offsets := make([]broker.Offset, len(k.Commit.Offsets))
		for i, o := range k.Commit.Offsets {
			offsets[i] = broker.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset}
		}
		res := &pb.CommitResult{Offsets: k.Commit.Offsets}
		if err := ss.sub.Commit(offsets); err != nil {
			res.Error = errorInfo(err)
		}
		return ss.send(&pb.SubscribeResponse{Kind: &pb.SubscribeResponse_Commit{Commit: res}})
	case *pb.SubscribeRequest_Heartbeat:
	case *pb.SubscribeRequest_Open:
		return invalid("the subscription is already open")
	default:
		return invalid("empty subscribe request")
	}
	return nil
}

// forEachPartition groups offsets by partition for Ack and Nack.
func forEachPartition(recs []*pb.PartitionOffset, fn func(int32, []int64) error) error {
	by := make(map[int32][]int64)
	for _, r := range recs {
		by[r.Partition] = append(by[r.Partition], r.Offset)
	}
	var first error
	for p, offs := range by {
		if err := fn(p, offs); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// deliver sends what the broker delivers (within the client's credit).
func (ss *subStream) deliver(ctx context.Context) error {
	for {
		d, err := ss.sub.Next(ctx)
		if err != nil {
			return err
		}
		if err := ss.send(deliveryToPB(d)); err != nil {
			return err
		}
	}
}

func deliveryToPB(d *broker.Delivery) *pb.SubscribeResponse {
	if a := d.Assignment; a != nil {
		return &pb.SubscribeResponse{Kind: &pb.SubscribeResponse_Assignment{Assignment: &pb.Assignment{
			Topic: a.Topic, Partitions: a.Partitions, Generation: a.Generation,
		}}}
	}
	out := &pb.Deliveries{Missed: d.Missed}
	for _, bt := range d.Batches {
		out.Batches = append(out.Batches, &pb.RecordBatch{Partition: d.Partition, Data: bt})
	}
	for i := range d.Records {
		r := &d.Records[i]
		out.Records = append(out.Records, recordToPB(&r.Record, r.Partition, r.Mode, r.DeliveryCount))
	}
	return &pb.SubscribeResponse{Kind: &pb.SubscribeResponse_Deliveries{Deliveries: out}}
}
