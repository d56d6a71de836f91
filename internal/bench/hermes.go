package bench

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// Protocols of the Hermes target.
const (
	ProtoGRPC       = "grpc"        // one unary Publish per record
	ProtoGRPCStream = "grpc-stream" // the SDK Producer over PublishStream
	ProtoREST       = "rest"        // POST /v1/topics/{topic}/records
	ProtoGraphQL    = "graphql"     // mutation publishBatch at /graphql
)

// hermes is the Hermes target: publishers spread over the gRPC (or HTTP)
// addresses, worker w on address w mod n; subscribers on the sub address.
// Any node of a cluster accepts any request, so every scenario runs the
// same against one node or several.
type hermes struct {
	cfg     *Config
	mode    client.Mode
	clients []*client.Client // one per gRPC address, shared by its workers
	http    *httpPublishers  // nil until a REST or GraphQL publisher is made
	wire    wireClients
}

// clientOptions are the Hermes SDK options every connection takes.
func (cfg *Config) clientOptions() []client.Option {
	var opts []client.Option
	if cfg.TLS != nil {
		opts = append(opts, client.WithTLS(cfg.TLS))
	}
	switch {
	case cfg.Token != "":
		opts = append(opts, client.WithToken(cfg.Token))
	case cfg.User != "":
		opts = append(opts, client.WithCredentials(cfg.User, cfg.Password))
	}
	return opts
}

// authorization is the header of the HTTP publishers ("": none).
func (cfg *Config) authorization() string {
	switch {
	case cfg.Token != "":
		return "Bearer " + cfg.Token
	case cfg.User != "":
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.User+":"+cfg.Password))
	}
	return ""
}

// httpScheme is the scheme of the Hermes HTTP targets.
func (cfg *Config) httpScheme() string {
	if cfg.TLS != nil {
		return "https://"
	}
	return "http://"
}

func openHermes(ctx context.Context, cfg *Config) (*hermes, error) {
	mode, err := client.ParseMode(cfg.Mode)
	if err != nil {
		return nil, err
	}
	h := &hermes{cfg: cfg, mode: mode}
	for _, addr := range cfg.GRPCTargets {
		c, err := client.Dial(ctx, addr, append(cfg.clientOptions(), client.WithLeaderRouting(!cfg.NoLeaderRouting))...)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		h.clients = append(h.clients, c)
	}
	return h, nil
}

func (h *hermes) Name() string { return "hermes" }

func (h *hermes) Durability() string {
	switch h.mode {
	case client.ModePerformance:
		return "performance: acknowledged once in the leader's memory ring; never written to disk"
	case client.ModeEventual:
		return "eventual: acknowledged after the leader's fsync (group commit); replication follows asynchronously"
	}
	return "consistent: acknowledged after the fsync (group commit), on a cluster by a quorum each fsynced"
}

func (h *hermes) CreateTopics(ctx context.Context, names []string, partitions int) error {
	for _, n := range names {
		if _, err := h.clients[0].CreateTopic(ctx, n, client.WithPartitionCount(int32(partitions))); err != nil {
			return fmt.Errorf("create topic %s: %w", n, err)
		}
	}
	// On a cluster each node learns of a topic through its own copy of the
	// metadata log: wait until every target knows the topics, so no
	// publish of the run fails with TOPIC_NOT_FOUND for a few milliseconds.
	for _, c := range h.clients[1:] {
		for _, n := range names {
			for {
				_, err := c.DescribeTopic(ctx, n)
				if err == nil {
					break
				}
				if !errors.Is(err, client.ErrTopicNotFound) {
					return fmt.Errorf("describe topic %s: %w", n, err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
	h.waitLeaders(ctx, names, partitions)
	return nil
}

// leaderWait bounds how long CreateTopics waits for the new partitions'
// first leaders.
const leaderWait = 5 * time.Second

// waitLeaders waits until the first target knows a leader for every
// partition of the topics names, so that the run's clock does not start
// during their first election (about 100 ms on a cluster, during which a
// publish waits): Kafka's target waits for its new partitions likewise.
// It gives up silently after leaderWait, or when the cluster cannot be
// described (no Describe permission): the run then goes on as before.
func (h *hermes) waitLeaders(ctx context.Context, names []string, partitions int) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for {
		info, err := h.clients[0].DescribeCluster(ctx)
		if err != nil {
			return
		}
		led := 0
		for _, p := range info.Partitions {
			if want[p.Topic] && p.Leader != 0 {
				led++
			}
		}
		if led >= len(names)*partitions {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (h *hermes) DeleteTopics(ctx context.Context, names []string) error {
	var errs []error
	for _, n := range names {
		if err := h.clients[0].DeleteTopic(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func (h *hermes) NewPublisher(ctx context.Context, topic string, worker int, proto string) (Publisher, error) {
	c := h.clients[worker%len(h.clients)]
	switch proto {
	case ProtoGRPC:
		return &unaryPublisher{c: c, topic: topic, opts: []client.PublishOption{client.WithMode(h.mode)}}, nil
	case ProtoGRPCStream:
		opts := []client.ProducerOption{client.WithMode(h.mode), client.WithLinger(h.cfg.Linger)}
		if n := h.cfg.PartitionInFlight; n != 0 {
			opts = append(opts, client.WithMaxInFlightPerPartition(max(n, 0))) // -1: no bound
		}
		p, err := c.NewProducer(ctx, topic, opts...)
		if err != nil {
			return nil, err
		}
		return newStreamPublisher(p), nil
	case ProtoWire:
		wc, err := h.wire.client(ctx, h.cfg, worker)
		if err != nil {
			return nil, err
		}
		return newWirePublisher(ctx, wc, topic, wireMode(h.cfg.Mode))
	case ProtoREST, ProtoGraphQL:
		if h.http == nil {
			h.http = newHTTPPublishers(h.cfg)
		}
		return h.http.publisher(ctx, topic, worker, proto)
	}
	return nil, fmt.Errorf("protocol %q: %w", proto, ErrNotAvailable)
}

func (h *hermes) Subscribe(ctx context.Context, topic string, o SubOptions) (Subscription, error) {
	if h.cfg.SubProtocol == ProtoWire {
		return wireSubscribe(ctx, h.cfg, topic, o)
	}
	// Each subscription has its own connection, so that Abort can drop it
	// as a crashed process would.
	c, err := client.Dial(ctx, h.cfg.SubTarget, h.cfg.clientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", h.cfg.SubTarget, err)
	}
	opts := []client.SubscribeOption{client.FromLatest(), client.WithAckMode(client.AckManual)}
	if o.FromBeginning {
		opts = append(opts, client.FromBeginning())
	}
	if o.Group != "" {
		opts = append(opts, client.WithGroup(o.Group), client.WithClientID("hermes-bench"))
	}
	if o.Performance {
		opts = append(opts, client.WithPerformanceRecords())
	}
	cs, err := c.Subscribe(ctx, topic, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &hermesSub{c: c, cs: cs, group: o.Group != ""}, nil
}

func (h *hermes) ErrorKind(err error) string {
	var e *client.Error
	switch {
	case errors.As(err, &e):
		return e.Code.String()
	case errors.Is(err, client.ErrClosed):
		return "CLOSED"
	}
	var he *httpError
	if errors.As(err, &he) {
		return he.Code
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return wire.CodeName(we.Code)
	}
	return ""
}

func (h *hermes) Close() error {
	for _, c := range h.clients {
		c.Close()
	}
	if h.http != nil {
		h.http.close()
	}
	h.wire.close()
	return nil
}

// unaryPublisher sends one unary Publish per record and waits for it.
type unaryPublisher struct {
	c     *client.Client
	topic string
	opts  []client.PublishOption
	msg   [1]*client.Message
}

func (p *unaryPublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	p.msg[0] = &client.Message{ID: id, Payload: payload}
	_, err := p.c.Publish(ctx, p.topic, p.msg[:], p.opts...)
	done(err, time.Time{})
}

func (p *unaryPublisher) Close(context.Context) error { return nil }

// streamPublisher publishes through an SDK Producer (batched, pipelined
// over one PublishStream) and reports each Future, in publish order, from
// one waiter goroutine.
type streamPublisher struct {
	p       *client.Producer
	pending chan pendingFuture
	waited  chan struct{}
}

type pendingFuture struct {
	f    *client.Future
	done Done
}

// maxPendingFutures bounds the futures queued for the waiter; the
// Producer's own buffer bound (32 MiB) usually blocks Publish first.
const maxPendingFutures = 1 << 16

func newStreamPublisher(p *client.Producer) *streamPublisher {
	sp := &streamPublisher{p: p, pending: make(chan pendingFuture, maxPendingFutures), waited: make(chan struct{})}
	go sp.wait()
	return sp
}

func (sp *streamPublisher) wait() {
	defer close(sp.waited)
	var c answerClock
	for pf := range sp.pending {
		var at time.Time
		select {
		case <-pf.f.Done():
			at = c.ready()
		default:
			<-pf.f.Done()
			at = c.waited()
		}
		_, err := pf.f.Result()
		pf.done(err, at)
	}
}

func (sp *streamPublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	f := sp.p.Publish(ctx, &client.Message{ID: id, Payload: payload})
	sp.pending <- pendingFuture{f, done}
}

func (sp *streamPublisher) Close(ctx context.Context) error {
	err := sp.p.Close(ctx) // flushes; futures left fail with ErrClosed
	close(sp.pending)
	select {
	case <-sp.waited:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// hermesSub is a Hermes subscription on its own connection.
// hermesSub hands out polled records one at a time, as kafkaSub does:
// the SDK's Poll takes every record received in one call.
type hermesSub struct {
	c     *client.Client
	cs    *client.Consumer
	group bool
	buf   []*client.Message
	at    time.Time // when Poll returned buf
	d     Delivery  // handed out by Next, reused

	mu   sync.Mutex
	last map[int32]*client.Message // group: the newest durable record handed out, per partition
}

func (s *hermesSub) Next(ctx context.Context) (*Delivery, error) {
	if len(s.buf) == 0 {
		ms, err := s.cs.Poll(ctx, 0)
		if err != nil {
			return nil, err
		}
		s.buf, s.at = ms, time.Now()
	}
	m := s.buf[0]
	s.buf[0] = nil
	s.buf = s.buf[1:]
	if s.group && m.Mode != client.ModePerformance {
		s.mu.Lock()
		if s.last == nil {
			s.last = map[int32]*client.Message{}
		}
		s.last[m.Partition] = m
		s.mu.Unlock()
	}
	s.d = Delivery{ID: m.ID, HasID: true, Partition: m.Partition, Offset: m.Offset, Payload: m.Payload, At: s.at}
	return &s.d, nil
}

// Commit commits what Next handed out (not what Poll took and Next has
// not handed out yet).
func (s *hermesSub) Commit(ctx context.Context) error {
	if !s.group {
		return nil
	}
	owned := s.cs.Assignment() // a partition moved away is not this member's to commit
	s.mu.Lock()
	ms := make([]*client.Message, 0, len(s.last))
	for p, m := range s.last {
		if slices.Contains(owned, p) {
			ms = append(ms, m)
		} else {
			delete(s.last, p)
		}
	}
	s.mu.Unlock()
	if len(ms) == 0 {
		return nil
	}
	return s.cs.Commit(ctx, ms...)
}

func (s *hermesSub) Close() error {
	err := s.cs.Close() // AckManual: Close commits nothing itself
	s.c.Close()
	return err
}

// Abort drops the connection first, as a killed process would, so the
// broker sees the stream break; the Consumer is then closed (its calls
// fail at once) in the background, bounded by the SDK's close timeout.
func (s *hermesSub) Abort() {
	s.c.Close()
	go s.cs.Close()
}

func (s *hermesSub) Missed() int64 { return s.cs.Missed() }

// closeTimeout bounds the end of publishers and subscriptions.
const closeTimeout = 30 * time.Second
