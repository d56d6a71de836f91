package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// ForwardedHeader marks a call one node relays to another: the receiver
// serves it or fails it, but never relays it again, so nodes with stale
// views of who leads cannot bounce a request between them.
const ForwardedHeader = "hermes-forwarded"

// relayed returns ctx marked ForwardedHeader, for a call this node makes
// on another's behalf.
func relayed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, ForwardedHeader, "1")
}

// forwarder relays publishes to partition leaders. Each (leader, topic,
// partition) gets one ordered relay: a PublishStream whose requests the
// leader handles in the order sent, so the batches a client sent in order
// through this node stay in order in the partition.
type forwarder struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by gRPC address
	relays map[relayKey]*relay
	closed bool
}

type relayKey struct {
	addr      string
	topic     string
	partition int32
}

func (f *forwarder) client(addr string) (pb.HermesClient, error) {
	if c := f.conns[addr]; c != nil {
		return pb.NewHermesClient(c), nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(32<<20), grpc.MaxCallRecvMsgSize(32<<20)))
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = make(map[string]*grpc.ClientConn)
	}
	f.conns[addr] = c
	return pb.NewHermesClient(c), nil
}

// api returns a client of the node at addr (its public gRPC address).
func (f *forwarder) api(addr string) (pb.HermesClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("broker: closing")
	}
	return f.client(addr)
}

// relay returns the ordered relay to a partition's leader.
func (f *forwarder) relay(addr, topic string, partition int32) (*relay, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("broker: closing")
	}
	k := relayKey{addr, topic, partition}
	if r := f.relays[k]; r != nil {
		return r, nil
	}
	c, err := f.client(addr)
	if err != nil {
		return nil, err
	}
	r := newRelay(c, topic, partition)
	if f.relays == nil {
		f.relays = make(map[relayKey]*relay)
	}
	f.relays[k] = r
	return r, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, r := range f.relays {
		r.stop()
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns, f.relays = nil, nil
}

// forwardPublish relays a batch for p to the node that leads it (as far
// as this node knows) and answers with that node's result. notHere is the
// error this node would give instead; it is returned as is when the leader
// is unknown or is this node.
func (b *Broker) forwardPublish(p *partition, batch []byte, mode Mode, notHere error, wait bool, done stored) {
	addr := LeaderAddress(notHere)
	if addr == "" || b.cl == nil || addr == b.cl.cfg.GRPCAddr {
		done(0, "", notHere)
		return
	}
	r, err := b.fw.relay(addr, p.t.name, p.id)
	if err != nil {
		done(0, "", notHere)
		return
	}
	r.send(&pb.PublishRequest{Topic: p.t.name, Partition: &p.id, Mode: pb.DeliveryMode(mode), Batch: batch}, wait, func(base int64, err error) {
		if err != nil {
			done(0, "", fromStatus(err, notHere))
			return
		}
		b.m.relayed.WithLabelValues(p.t.name).Inc()
		done(base, addr, nil)
	})
}

// relayQueue bounds the publishes waiting to go out on one relay; beyond
// it a relayed publish waits (at most relayWait) or fails at once with a
// retriable error.
const (
	relayQueue = 1024
	relayWait  = 10 * time.Second
)

// relay is one ordered PublishStream to a partition's leader. A single
// goroutine sends in arrival order; answers are matched by request id. If
// the stream breaks, what is in flight fails (retriable) and the next
// publish opens a new stream.
type relay struct {
	c     pb.HermesClient
	q     chan relayReq
	quit  chan struct{}
	once  sync.Once
	next  uint64 // request ids; owned by run
	label string

	mu  sync.Mutex
	cur *relayStream // the open stream; guarded by mu
}

// relayStream is one stream's in-flight publishes, by request id.
type relayStream struct {
	s    pb.Hermes_PublishStreamClient
	mu   sync.Mutex
	wait map[uint64]func(int64, error)
	dead bool // the stream ended: nothing more is registered
}

type relayReq struct {
	req  *pb.PublishRequest
	done func(int64, error)
}

func newRelay(c pb.HermesClient, topic string, partition int32) *relay {
	r := &relay{c: c, q: make(chan relayReq, relayQueue), quit: make(chan struct{}),
		label: fmt.Sprintf("%s/%d", topic, partition)}
	go r.run()
	return r
}

func (r *relay) send(req *pb.PublishRequest, wait bool, done func(int64, error)) {
	select {
	case r.q <- relayReq{req, done}:
		return
	case <-r.quit:
		done(0, status.Error(codes.Unavailable, "relay closed"))
		return
	default:
	}
	full := status.Error(codes.ResourceExhausted, "too many publishes waiting to be relayed to "+r.label)
	if !wait {
		done(0, full)
		return
	}
	t := time.NewTimer(relayWait)
	defer t.Stop()
	select {
	case r.q <- relayReq{req, done}:
	case <-r.quit:
		done(0, status.Error(codes.Unavailable, "relay closed"))
	case <-t.C:
		done(0, full)
	}
}

func (r *relay) stop() { r.once.Do(func() { close(r.quit) }) }

// run sends queued publishes over a stream, opening one when needed.
func (r *relay) run() {
	var st *relayStream
	var cancel context.CancelFunc
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	for {
		var rr relayReq
		select {
		case <-r.quit:
			if st != nil {
				st.fail(status.Error(codes.Unavailable, "relay closed"))
			}
			return
		case rr = <-r.q:
		}
		if st != nil && st.isDead() {
			cancel()
			st, cancel = nil, nil
		}
		if st == nil {
			ctx, c := context.WithCancel(relayed(context.Background()))
			s, err := r.c.PublishStream(ctx)
			if err != nil {
				c()
				rr.done(0, err)
				continue
			}
			st, cancel = &relayStream{s: s, wait: make(map[uint64]func(int64, error))}, c
			go st.receive()
		}
		r.next++
		rr.req.RequestId = r.next
		if !st.register(r.next, rr.done) {
			rr.done(0, status.Error(codes.Unavailable, "relay stream ended"))
			continue
		}
		if err := st.s.Send(rr.req); err != nil {
			cancel() // receive ends and fails what is in flight
			st, cancel = nil, nil
		}
	}
}

func (st *relayStream) register(id uint64, done func(int64, error)) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dead {
		return false
	}
	st.wait[id] = done
	return true
}

func (st *relayStream) isDead() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.dead
}

// receive answers in-flight publishes until the stream ends, then fails
// the rest.
func (st *relayStream) receive() {
	for {
		resp, err := st.s.Recv()
		if err != nil {
			st.fail(status.Error(codes.Unavailable, "relay stream ended: "+err.Error()))
			return
		}
		st.mu.Lock()
		done := st.wait[resp.RequestId]
		delete(st.wait, resp.RequestId)
		st.mu.Unlock()
		if done == nil {
			continue
		}
		if resp.Error != nil {
			s := status.New(codes.Unavailable, resp.Error.Message)
			if d, err := s.WithDetails(resp.Error); err == nil {
				s = d
			}
			done(0, s.Err())
			continue
		}
		done(resp.BaseOffset, nil)
	}
}

// fail ends the stream's bookkeeping and fails what was in flight.
func (st *relayStream) fail(err error) {
	st.mu.Lock()
	waiting := st.wait
	st.wait, st.dead = nil, true
	st.mu.Unlock()
	for _, done := range waiting {
		done(0, err)
	}
}

// fromStatus turns a relayed call's gRPC error back into a broker error of
// the same kind, keeping the leader hint the other node gave.
func fromStatus(err error, fallback error) error {
	st, ok := status.FromError(err)
	if !ok {
		return &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: 50 * time.Millisecond, leader: LeaderAddress(fallback)}
	}
	for _, d := range st.Details() {
		if info, ok := d.(*pb.ErrorInfo); ok {
			return fromInfo(info)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || st.Code() != 0 {
		return &kindError{kind: ErrUnavailable, msg: st.Message(), retryAfter: 50 * time.Millisecond, leader: LeaderAddress(fallback)}
	}
	return fallback
}
