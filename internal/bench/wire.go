package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// ProtoWire publishes (and, unless -sub-target names a gRPC address,
// subscribes) over hermes-wire.
const ProtoWire = "wire"

// wireMode is the PUBLISH mode of the run's mode name.
func wireMode(mode string) uint8 {
	switch mode {
	case "eventual":
		return wire.ModeEventual
	case "performance":
		return wire.ModePerformance
	}
	return wire.ModeConsistent
}

// wireOptions are the hermes-wire options every connection takes.
func (cfg *Config) wireOptions() wire.Options {
	return wire.Options{ClientName: "hermes-bench", User: cfg.User, Password: cfg.Password, Token: cfg.Token, TLS: cfg.TLS}
}

// wireClients are the hermes-wire connections of a Hermes target, one
// per -wire-targets address, shared by the workers publishing there
// (their PUBLISH frames are pipelined on it), made at the first
// publisher.
type wireClients struct {
	mu      sync.Mutex
	clients []*wire.Client
}

func (w *wireClients) client(ctx context.Context, cfg *Config, worker int) (*wire.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.clients == nil {
		for _, addr := range cfg.WireTargets {
			c, err := wire.Dial(ctx, addr, cfg.wireOptions())
			if err != nil {
				w.closeLocked()
				return nil, fmt.Errorf("dial hermes-wire %s: %w", addr, err)
			}
			w.clients = append(w.clients, c)
		}
	}
	return w.clients[worker%len(w.clients)], nil
}

func (w *wireClients) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeLocked()
}

func (w *wireClients) closeLocked() {
	for _, c := range w.clients {
		c.Close()
	}
	w.clients = nil
}

// wirePublisher publishes one record per PUBLISH frame, pipelined: done
// is called from the connection's reader when the ack comes.
type wirePublisher struct {
	c       *wire.Client
	topic   uint32
	mode    uint8
	rec     [1]record.Record
	pending sync.WaitGroup // publishes not answered yet
}

func newWirePublisher(ctx context.Context, c *wire.Client, topic string, mode uint8) (*wirePublisher, error) {
	t, err := c.OpenTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	return &wirePublisher{c: c, topic: t.ID, mode: mode}, nil
}

func (p *wirePublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	p.rec[0] = record.Record{MessageID: id, Payload: payload}
	p.pending.Add(1)
	// The frame is encoded before PublishAsync returns: rec may be reused.
	err := p.c.PublishAsync(ctx, p.topic, -1, p.mode, p.rec[:], func(_ wire.Ack, err error) {
		done(err, time.Time{})
		p.pending.Done()
	})
	if err != nil {
		done(err, time.Time{})
		p.pending.Done()
	}
}

// Close waits until every publish was answered (or ctx ends).
func (p *wirePublisher) Close(ctx context.Context) error {
	answered := make(chan struct{})
	go func() {
		p.pending.Wait()
		close(answered)
	}()
	select {
	case <-answered:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wireSubscribe subscribes over hermes-wire on a connection of its own
// (so that Abort can drop it).
func wireSubscribe(ctx context.Context, cfg *Config, topic string, o SubOptions) (Subscription, error) {
	c, err := wire.Dial(ctx, cfg.SubTarget, cfg.wireOptions())
	if err != nil {
		return nil, fmt.Errorf("dial hermes-wire %s: %w", cfg.SubTarget, err)
	}
	t, err := c.OpenTopic(ctx, topic)
	if err != nil {
		c.Close()
		return nil, err
	}
	so := wire.SubscribeOptions{Topic: t.ID, Group: o.Group, Performance: o.Performance, Credit: 4096}
	if o.FromBeginning {
		so.Start = wire.StartEarliest
	}
	s, err := c.Subscribe(ctx, so)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &wireSub{c: c, s: s, next: map[int32]int64{}}, nil
}

// wireSub hands the records of hermes-wire deliveries out one by one.
type wireSub struct {
	c      *wire.Client
	s      *wire.Subscription
	queue  []record.Record
	part   int32
	at     time.Time // when the delivery in queue was taken
	d      Delivery  // handed out by Next, reused
	missed int64
	mu     sync.Mutex
	next   map[int32]int64 // per partition, the offset after the last record handed out
}

func (w *wireSub) Next(ctx context.Context) (*Delivery, error) {
	for len(w.queue) == 0 {
		d, err := w.s.Next(ctx)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.missed += d.Missed
		w.mu.Unlock()
		w.queue, w.part, w.at = d.Records, d.Partition, time.Now()
	}
	r := w.queue[0]
	w.queue = w.queue[1:]
	if w.s.MemberID != "" { // only a group member commits
		w.mu.Lock()
		w.next[w.part] = r.Offset + 1
		w.mu.Unlock()
	}
	w.d = Delivery{ID: r.MessageID, HasID: true, Partition: w.part, Offset: r.Offset, Payload: r.Payload, At: w.at}
	return &w.d, nil
}

func (w *wireSub) Commit(ctx context.Context) error {
	w.mu.Lock()
	offsets := make(map[int32]int64, len(w.next))
	for p, o := range w.next {
		offsets[p] = o
	}
	w.mu.Unlock()
	if w.s.MemberID == "" || len(offsets) == 0 {
		return nil
	}
	return w.s.Commit(ctx, offsets)
}

func (w *wireSub) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := w.s.Close(ctx)
	w.c.Close()
	return err
}

func (w *wireSub) Abort() { w.c.Close() }

func (w *wireSub) Missed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.missed
}
