package grpcapi

import (
	"context"
	"sync"

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
	var g gate
	recvDone := make(chan error, 1)
	go func() { recvDone <- s.receivePublishes(ctx, stream, fl, out, &g) }()
	var err error
	select {
	case err = <-recvDone:
	case <-s.b.Draining():
		// The node is stopping: accept no more requests, answer those
		// accepted, and end the stream so that the client goes on with
		// another node. The receiving goroutine, blocked in Recv, ends
		// with the stream.
		cancel()
		g.close()
		err = toStatus(broker.Errorf(broker.ErrUnavailable, "the node is shutting down"))
	}
	fl.Wait()  // every accepted request has been answered into out ...
	close(out) // ... and the sender sends them all before the stream ends
	if e := <-sendDone; err == nil {
		err = e
	}
	return err
}

// gate lets a stream's receiver accept requests until the stream closes
// it; close waits for a request being accepted.
type gate struct {
	mu     sync.Mutex
	closed bool
}

// enter reports whether a request may be accepted; if so the caller
// accepts it and calls leave.
func (g *gate) enter() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	return true
}

func (g *gate) leave() { g.mu.Unlock() }

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (s *Service) receivePublishes(ctx context.Context, stream pb.Hermes_PublishStreamServer, fl *broker.Flight, out chan<- *pb.PublishResponse, g *gate) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || isEOF(err) {
				return nil
			}
			return err
		}
		if !g.enter() {
			return nil
		}
		ok := s.accept(ctx, stream, req, fl, out)
		g.leave()
		if !ok {
			return nil
		}
	}
}

// accept starts the publish of one request, whose answer goes to out; it
// returns false when the stream ends before the flight bound lets it in.
func (s *Service) accept(ctx context.Context, stream pb.Hermes_PublishStreamServer, req *pb.PublishRequest, fl *broker.Flight, out chan<- *pb.PublishResponse) bool {
	size := int64(len(req.Batch))
	for _, r := range req.Records {
		size += int64(len(r.Payload) + len(r.Key))
	}
	if !fl.Acquire(ctx, size) {
		return false
	}
	id := req.RequestId
	answer := func(resp *pb.PublishResponse) {
		out <- resp
		fl.Release(size)
	}
	breq, err := publishRequest(req)
	if err != nil {
		answer(&pb.PublishResponse{RequestId: id, Error: errorInfo(err)})
		return true
	}
	s.b.PublishAsync(stream.Context(), breq, func(res *broker.PublishResult, err error) {
		if err != nil {
			answer(&pb.PublishResponse{RequestId: id, Error: errorInfo(err)})
			return
		}
		answer(publishResponse(id, res))
	})
	return true
}

func batchNext(bt []byte) int64 {
	h, err := record.ParseBatch(bt)
	if err != nil {
		return 0
	}
	return h.NextOffset()
}
