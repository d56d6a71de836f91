package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsJS is the NATS JetStream target, through nats.go's jetstream
// package: one stream per topic (subject = topic name; JetStream streams
// have no partitions, so -partitions is ignored), one connection per
// publishing worker and per subscriber. Records carry their message id in
// Nats-Msg-Id, which JetStream deduplicates (2-minute window).
type natsJS struct {
	cfg *Config
	nc  *nats.Conn
	js  jetstream.JetStream
}

func openNATS(ctx context.Context, cfg *Config) (*natsJS, error) {
	nc, js, err := natsConnect(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats %s: JetStream: %w", cfg.NATSURL, err)
	}
	return &natsJS{cfg: cfg, nc: nc, js: js}, nil
}

// maxAsyncPending bounds a worker's asynchronous publishes awaiting acks.
const maxAsyncPending = 4096

func natsConnect(cfg *Config) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("hermes-bench"))
	if err != nil {
		return nil, nil, fmt.Errorf("nats %s: %w", cfg.NATSURL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxAsyncPending))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// streamName is topic as a stream name ('.' is not allowed there).
func streamName(topic string) string { return strings.ReplaceAll(topic, ".", "_") }

func (n *natsJS) Name() string { return "nats" }

func (n *natsJS) Durability() string {
	storage := "file storage"
	if n.cfg.Mode == "performance" {
		storage = "memory storage"
	}
	return fmt.Sprintf("JetStream %s, %d replica(s): a publish is acknowledged once the stream leader (and a quorum of replicas) "+
		"stored it; the file store is not fsynced per message (it syncs periodically, every 2 minutes by default)", storage, n.cfg.Replicas)
}

func (n *natsJS) CreateTopics(ctx context.Context, names []string, _ int) error {
	storage := jetstream.FileStorage
	if n.cfg.Mode == "performance" {
		storage = jetstream.MemoryStorage
	}
	for _, t := range names {
		_, err := n.js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName(t), Subjects: []string{t},
			Storage: storage, Replicas: n.cfg.Replicas, Duplicates: 2 * time.Minute})
		if err != nil {
			return fmt.Errorf("create stream %s: %w", t, err)
		}
	}
	return nil
}

func (n *natsJS) DeleteTopics(ctx context.Context, names []string) error {
	var errs []error
	for _, t := range names {
		errs = append(errs, n.js.DeleteStream(ctx, streamName(t)))
	}
	return errors.Join(errs...)
}

func (n *natsJS) NewPublisher(ctx context.Context, topic string, worker int, proto string) (Publisher, error) {
	nc, js, err := natsConnect(n.cfg)
	if err != nil {
		return nil, err
	}
	p := &natsPublisher{nc: nc, js: js, subject: topic, sync: proto == ProtoGRPC}
	if !p.sync {
		p.pending = make(chan natsPending, maxAsyncPending)
		p.waited = make(chan struct{})
		go p.wait()
	}
	return p, nil
}

// natsPublisher publishes synchronously (js.PublishMsg) or asynchronously
// (js.PublishMsgAsync, acks awaited in order by one goroutine).
type natsPublisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	sync    bool
	pending chan natsPending
	waited  chan struct{}
}

type natsPending struct {
	f    jetstream.PubAckFuture
	done Done
}

func (p *natsPublisher) wait() {
	defer close(p.waited)
	var c answerClock
	for pf := range p.pending {
		var err error
		var at time.Time
		select {
		case <-pf.f.Ok():
			at = c.ready()
		case err = <-pf.f.Err():
			at = c.ready()
		default:
			select {
			case <-pf.f.Ok():
			case err = <-pf.f.Err():
			}
			at = c.waited()
		}
		pf.done(err, at)
	}
}

func (p *natsPublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	msg := &nats.Msg{Subject: p.subject, Data: payload}
	msgID := jetstream.WithMsgID(uuid.UUID(id).String())
	if p.sync {
		_, err := p.js.PublishMsg(ctx, msg, msgID)
		done(err, time.Time{})
		return
	}
	for {
		f, err := p.js.PublishMsgAsync(msg, msgID)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && ctx.Err() == nil {
			continue // the pending bound: wait for acks, as a blocked producer would
		}
		if err != nil {
			done(err, time.Time{})
			return
		}
		p.pending <- natsPending{f, done}
		return
	}
}

func (p *natsPublisher) Close(ctx context.Context) error {
	var err error
	if !p.sync {
		select {
		case <-p.js.PublishAsyncComplete():
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.nc.Close() // futures still pending fail
		close(p.pending)
		<-p.waited
		return err
	}
	p.nc.Close()
	return nil
}

func (n *natsJS) Subscribe(ctx context.Context, topic string, o SubOptions) (Subscription, error) {
	nc, js, err := natsConnect(n.cfg)
	if err != nil {
		return nil, err
	}
	s := &natsSub{nc: nc, group: o.Group != "", msgs: make(chan jetstream.Msg, 1024), done: make(chan struct{})}
	if s.cons, err = n.consumer(ctx, js, topic, o); err == nil {
		s.cc, err = s.cons.Consume(func(m jetstream.Msg) {
			select {
			case s.msgs <- m:
			case <-s.done:
			}
		})
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// consumer makes the JetStream consumer: a durable one with explicit acks
// for a group, an ordered one otherwise, started exactly after
// the stream's last sequence for a live subscriber.
func (n *natsJS) consumer(ctx context.Context, js jetstream.JetStream, topic string, o SubOptions) (jetstream.Consumer, error) {
	name := streamName(topic)
	if o.Group != "" {
		return js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: streamName(o.Group),
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: natsAckWait, MaxAckPending: 1 << 20})
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if !o.FromBeginning {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return nil, err
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, info.State.LastSeq+1
	}
	return js.OrderedConsumer(ctx, name, cfg)
}

// natsSub receives through Consume's callback into a channel.
type natsSub struct {
	nc    *nats.Conn
	cons  jetstream.Consumer
	cc    jetstream.ConsumeContext
	group bool
	msgs  chan jetstream.Msg
	done  chan struct{} // closed by Close and Abort: the handler stops waiting

	mu      sync.Mutex
	unacked []jetstream.Msg // Lock: mu. Returned by Next, not acked by Commit yet.
}

func (s *natsSub) Next(ctx context.Context) (*Delivery, error) {
	var m jetstream.Msg
	select {
	case m = <-s.msgs:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d := &Delivery{Payload: m.Data()}
	if md, err := m.Metadata(); err == nil {
		d.Offset = int64(md.Sequence.Stream)
	}
	if id, err := uuid.Parse(m.Headers().Get(jetstream.MsgIDHeader)); err == nil {
		d.ID, d.HasID = id, true
	}
	if s.group {
		s.mu.Lock()
		s.unacked = append(s.unacked, m)
		s.mu.Unlock()
	}
	return d, nil
}

// Commit acks every message Next returned since the last Commit, the
// last one waiting for the server's confirmation. (AckAll would be
// cheaper but wrong here: a new member's ack of a later message would
// also ack the earlier ones a killed member left unacked, and they would
// never be redelivered.)
func (s *natsSub) Commit(ctx context.Context) error {
	s.mu.Lock()
	ms := s.unacked
	s.unacked = nil
	s.mu.Unlock()
	if len(ms) == 0 {
		return nil
	}
	for _, m := range ms[:len(ms)-1] {
		if err := m.Ack(); err != nil {
			return err
		}
	}
	return ms[len(ms)-1].DoubleAck(ctx)
}

func (s *natsSub) Close() error  { s.cc.Stop(); s.nc.Close(); return nil }
func (s *natsSub) Abort()        { s.nc.Close(); s.cc.Stop() }
func (s *natsSub) Missed() int64 { return 0 }

// natsAckWait is how long JetStream waits for a group member's ack before
// it redelivers.
const natsAckWait = 5 * time.Second

// RedeliveryDelay: a killed member's unacked messages come back only after
// the ack wait, so the crash scenario drains at least that long.
func (n *natsJS) RedeliveryDelay() time.Duration { return natsAckWait + time.Second }

func (n *natsJS) ErrorKind(err error) string {
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api):
		return fmt.Sprintf("JS_%d", api.ErrorCode)
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return "TIMEOUT"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConnectionClosed):
		return "CLOSED"
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return "NO_RESPONDERS"
	}
	return ""
}

func (n *natsJS) Close() error { n.nc.Close(); return nil }
