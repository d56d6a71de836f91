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
	fl := newFlight(s.limits.PublishInFlight, s.limits.PublishInFlightBytes)
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
	fl.wait()  // every accepted request has been answered into out ...
	close(out) // ... and the sender sends them all before the stream ends
	if e := <-sendDone; err == nil {
		err = e
	}
	return err
}

func (s *Service) receivePublishes(ctx context.Context, stream pb.Hermes_PublishStreamServer, fl *flight, out chan<- *pb.PublishResponse) error {
	relayed := forwarded(stream.Context())
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
		if !fl.acquire(ctx, size) {
			return nil
		}
		id := req.RequestId
		answer := func(resp *pb.PublishResponse) {
			out <- resp
			fl.release(size)
		}
		breq, err := publishRequest(req)
		if err != nil {
			answer(&pb.PublishResponse{RequestId: id, Error: errorInfo(err)})
			continue
		}
		breq.Forwarded = relayed
		s.b.PublishAsync(breq, func(res *broker.PublishResult, err error) {
			if err != nil {
				answer(&pb.PublishResponse{RequestId: id, Error: errorInfo(err)})
				return
			}
			answer(publishResponse(id, res))
		})
	}
}

// flight bounds the requests and bytes of one stream awaiting answers.
type flight struct {
	mu       sync.Mutex
	cond     *sync.Cond
	n, max   int
	bytes    int64
	maxBytes int64
}

func newFlight(max int, maxBytes int64) *flight {
	f := &flight{max: max, maxBytes: maxBytes}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// acquire waits for room for one request of size bytes (a request larger
// than the byte bound is let through alone). False if ctx ended.
func (f *flight) acquire(ctx context.Context, size int64) bool {
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n >= f.max || (f.n > 0 && f.bytes+size > f.maxBytes) {
		if ctx.Err() != nil {
			return false
		}
		f.cond.Wait()
	}
	f.n++
	f.bytes += size
	return true
}

func (f *flight) release(size int64) {
	f.mu.Lock()
	f.n--
	f.bytes -= size
	f.cond.Broadcast()
	f.mu.Unlock()
}

// wait blocks until nothing is in flight.
func (f *flight) wait() {
	f.mu.Lock()
	for f.n > 0 {
		f.cond.Wait()
	}
	f.mu.Unlock()
}

func batchNext(bt []byte) int64 {
	h, err := record.ParseBatch(bt)
	if err != nil {
		return 0
	}
	return h.NextOffset()
}
