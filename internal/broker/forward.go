package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// ForwardedHeader marks a call one node relays to another: the receiver
// serves it or fails it, but never relays it again, so nodes with stale
// views of who leads cannot bounce a request between them.
const ForwardedHeader = "hermes-forwarded"

// forwardTimeout bounds one relayed call.
const forwardTimeout = 30 * time.Second

// forwarder keeps one client connection per node it relays to.
type forwarder struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by gRPC address
}

func (f *forwarder) client(addr string) (pb.HermesClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// forwardPublish relays a batch for p to the node that leads it (as far
// as this node knows) and answers with that node's result. notHere is the
// error this node would give instead; it is returned as is when the leader
// is unknown or is this node.
func (b *Broker) forwardPublish(p *partition, batch []byte, mode Mode, notHere error, done func(int64, error)) {
	addr := LeaderAddress(notHere)
	if addr == "" || b.cl == nil || addr == b.cl.cfg.GRPCAddr {
		done(0, notHere)
		return
	}
	c, err := b.fw.client(addr)
	if err != nil {
		done(0, notHere)
		return
	}
	part := p.id
	go func() {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), ForwardedHeader, "1"), forwardTimeout)
		defer cancel()
		resp, err := c.Publish(ctx, &pb.PublishRequest{Topic: p.t.name, Partition: &part, Mode: pb.DeliveryMode(mode), Batch: batch})
		if err != nil {
			done(0, fromStatus(err, notHere))
			return
		}
		done(resp.BaseOffset, nil)
	}()
}

// fromStatus turns a relayed call's gRPC error back into a broker error of
// the same kind, keeping the leader hint the other node gave.
func fromStatus(err error, fallback error) error {
	st, ok := status.FromError(err)
	if !ok {
		return &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: 50 * time.Millisecond, leader: LeaderAddress(fallback)}
	}
	for _, d := range st.Details() {
		info, ok := d.(*pb.ErrorInfo)
		if !ok {
			continue
		}
		kind := ErrUnavailable
		name := info.Code.String()[len("ERROR_CODE_"):]
		for _, c := range codeNames {
			if c.name == name {
				kind = c.kind
			}
		}
		return &kindError{kind: kind, msg: info.Message, retryAfter: time.Duration(info.RetryAfterMs) * time.Millisecond, leader: info.LeaderAddress}
	}
	if errors.Is(err, context.DeadlineExceeded) || st.Code() != 0 {
		return &kindError{kind: ErrUnavailable, msg: st.Message(), retryAfter: 50 * time.Millisecond, leader: LeaderAddress(fallback)}
	}
	return fallback
}
