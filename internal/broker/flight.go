package broker

import (
	"context"
	"sync"
)

// Flight bounds the requests and bytes of one publishing stream that
// await their answers: a stream reads its next request only once there is
// room, so a publisher that sends faster than the broker acknowledges is
// held back by its transport's flow control (HTTP/2's, TCP's) instead of
// filling the broker's memory. Every pipelined publish stream (the gRPC
// API's PublishStream, the node-to-node relay) uses one.
type Flight struct {
	mu       sync.Mutex
	cond     *sync.Cond
	n, max   int   // guarded by mu
	bytes    int64 // guarded by mu
	maxBytes int64
}

// Default bounds of a publishing stream.
const (
	DefaultFlightRequests = 1024
	DefaultFlightBytes    = 64 << 20
)

// NewFlight bounds a stream to max requests and maxBytes bytes in flight
// (zero: the defaults).
func NewFlight(max int, maxBytes int64) *Flight {
	if max <= 0 {
		max = DefaultFlightRequests
	}
	if maxBytes <= 0 {
		maxBytes = DefaultFlightBytes
	}
	f := &Flight{max: max, maxBytes: maxBytes}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Acquire waits for room for one request of size bytes (a request larger
// than the byte bound is let through alone). False if ctx ended first.
func (f *Flight) Acquire(ctx context.Context, size int64) bool {
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

// Release gives back the room of one answered request of size bytes.
func (f *Flight) Release(size int64) {
	f.mu.Lock()
	f.n--
	f.bytes -= size
	f.cond.Broadcast()
	f.mu.Unlock()
}

// Wait blocks until nothing is in flight.
func (f *Flight) Wait() {
	f.mu.Lock()
	for f.n > 0 {
		f.cond.Wait()
	}
	f.mu.Unlock()
}
