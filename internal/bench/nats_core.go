package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// natsCore is core NATS (no JetStream) through nats.go: publish and
// subscribe on the topic's subject, the way a latency-sensitive NATS user
// runs it. Core NATS stores nothing and acknowledges nothing: a publish
// counts as acknowledged once nats.go took it (it writes it to the
// connection's buffer, flushed by its own goroutine), and a record a
// subscriber lost is reported lost.
type natsCore struct {
	cfg *Config
}

func openNATSCore(_ context.Context, cfg *Config) (*natsCore, error) {
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("hermes-bench"))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", cfg.NATSURL, err)
	}
	nc.Close()
	return &natsCore{cfg: cfg}, nil
}

func (n *natsCore) Name() string { return "nats-core" }

func (n *natsCore) Durability() string {
	return "core NATS: at most once, from memory; a publish is not acknowledged by the server (it counts once the client library took it)"
}

func (n *natsCore) CreateTopics(context.Context, []string, int) error { return nil }
func (n *natsCore) DeleteTopics(context.Context, []string) error      { return nil }
func (n *natsCore) ErrorKind(error) string                            { return "" }
func (n *natsCore) Close() error                                      { return nil }

func (n *natsCore) NewPublisher(ctx context.Context, topic string, _ int, proto string) (Publisher, error) {
	nc, err := nats.Connect(n.cfg.NATSURL, nats.Name("hermes-bench"))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", n.cfg.NATSURL, err)
	}
	return &natsCorePublisher{nc: nc, subject: topic, flush: proto == ProtoGRPC}, nil
}

// natsCorePublisher publishes on its own connection; with flush (the
// synchronous protocol) each publish waits for a round trip to the server.
type natsCorePublisher struct {
	nc      *nats.Conn
	subject string
	flush   bool
}

func (p *natsCorePublisher) Publish(ctx context.Context, _ [16]byte, payload []byte, done Done) {
	err := p.nc.Publish(p.subject, payload)
	if err == nil && p.flush {
		err = p.nc.FlushTimeout(closeTimeout)
	}
	done(err, time.Time{})
}

func (p *natsCorePublisher) Close(ctx context.Context) error {
	err := p.nc.FlushTimeout(closeTimeout)
	p.nc.Close()
	return err
}

func (n *natsCore) Subscribe(ctx context.Context, topic string, o SubOptions) (Subscription, error) {
	if o.FromBeginning {
		return nil, fmt.Errorf("core NATS keeps nothing: it has live subscribers only: %w", ErrNotAvailable)
	}
	nc, err := nats.Connect(n.cfg.NATSURL, nats.Name("hermes-bench"))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", n.cfg.NATSURL, err)
	}
	// A channel subscription: the connection's reader hands each message
	// straight to Next (what it cannot queue there it drops and counts).
	msgs := make(chan *nats.Msg, 1<<18)
	var sub *nats.Subscription
	if o.Group != "" {
		sub, err = nc.ChanQueueSubscribe(topic, o.Group, msgs)
	} else {
		sub, err = nc.ChanSubscribe(topic, msgs)
	}
	if err == nil {
		err = nc.FlushTimeout(10 * time.Second) // the server has the subscription
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsCoreSub{nc: nc, sub: sub, msgs: msgs}, nil
}

// natsCoreSub receives on a channel; offsets count its deliveries.
type natsCoreSub struct {
	nc      *nats.Conn
	sub     *nats.Subscription
	msgs    chan *nats.Msg
	next    int64
	dropped atomic.Int64 // as last read from the live subscription
}

func (s *natsCoreSub) Next(ctx context.Context) (*Delivery, error) {
	select {
	case m := <-s.msgs:
		d := &Delivery{Offset: s.next, Payload: m.Data}
		s.next++
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *natsCoreSub) Commit(context.Context) error { return nil }
func (s *natsCoreSub) Close() error                 { s.Missed(); s.nc.Close(); return nil }
func (s *natsCoreSub) Abort()                       { s.Missed(); s.nc.Close() }

// Missed counts what the client library dropped for a slow subscriber
// (read while the subscription is open: a closed one answers an error).
func (s *natsCoreSub) Missed() int64 {
	if n, err := s.sub.Dropped(); err == nil {
		s.dropped.Store(int64(n))
	}
	return s.dropped.Load()
}
