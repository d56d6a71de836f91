package grpcapi

import (
	"context"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// PublishStream reads publish requests without waiting for their acks (up
// to the stream's in-flight bounds) and sends each answer as soon as the
// broker acknowledges it, so one stream pipelines many group commits.
func (s *Service) PublishStream(stream pb.Hermes_PublishStreamServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	fl := broker.NewFlight(s.limits.PublishInFlight, s.limits.PublishInFlightBytes)
	// out holds at most PublishInFlight answers (the flight bound), so an
	// answer never blocks the broker's callback.
	out := make(chan *pb.PublishResponse, s.limits.PublishInFlight)
	sendDone := make(chan error, 1)
	go func() {
		var err error
		for resp := range out {
			if err != nil {
				continue // the stream is broken: drain, so callbacks finish
			}
			if err = stream.Send(resp); err != nil {
				cancel() // stop reading requests
			}
		}
		sendDone <- err
	}()
	err := s.receivePublishes(ctx, stream, fl, out)
	fl.Wait()  // every accepted request has been answered into out ...
	close(out) // ... and the sender sends them all before the stream ends
	if e := <-sendDone; err == nil {
		err = e
	}
	return err
}

func (s *Service) receivePublishes(ctx context.Context, stream pb.Hermes_PublishStreamServer, fl *broker.Flight, out chan<- *pb.PublishResponse) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || isEOF(err) {
				return nil
			}
			return err
		}
		size := int64(len(req.Batch))
		for _, r := range req.Records {
			size += int64(len(r.Payload) + len(r.Key))
		}
		if !fl.Acquire(ctx, size) {
			return nil
		}
		id := req.RequestId
		answer := func(resp *pb.PublishResponse) {
			out <- resp
			fl.Release(size)
		}
		breq, err := publishRequest(req)
		if err != nil {
			answer(&pb.PublishResponse{RequestId: id, Error: errorInfo(err)})
			continue
		}
		s.b.PublishAsync(stream.Context(), breq, func(res *broker.PublishResult, err error) {
			if err != nil {
				answer(&pb.PublishResponse{RequestId: id, Error: errorInfo(err)})
				return
			}
			answer(publishResponse(id, res))
		})
	}
}

func batchNext(bt []byte) int64 {
	h, err := record.ParseBatch(bt)
	if err != nil {
		return 0
	}
	return h.NextOffset()
}
