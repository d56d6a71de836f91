package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Defaults of the producer options.
//
// DefaultLinger is 0: a batch is sent as soon as the sender is free and
// its partition has fewer than DefaultMaxInFlightPerPartition batches
// unanswered, and records published meanwhile gather into the next one,
// so batches grow with the load and no record waits on a timer. One
// producer keeping 1,024 records in flight sent 100-byte records at
// 0.69–0.79 M/s this way (with no per-partition bound then) and 0.40 M/s
// with a 1 ms linger. A linger buys efficiency at moderate
// rates instead: at 10,000 records/s on one node, a 1 ms linger made ten
// records a batch and used 0.22 cores of the broker, where linger 0 made
// one or two and used 0.72, for a p50 of 1.2 ms against 0.6.
// WithLinger(time.Millisecond) is the setting for a steady moderate
// rate where a millisecond does not matter. (Those figures: 20–30 s
// cells of one sitting, docs/BENCHMARKS.md.)
//
// DefaultMaxInFlightPerPartition is 2: while two batches of a partition
// are unanswered, its records gather into the next. Measured on one node
// (consistent, over gRPC, two rounds of 60 s cells), against no bound:
// one producer of 100-byte records with 1,024 in flight sent 405–410 k/s
// against 346–370 k/s; eight producers of 1 KB the same (245–259 k/s
// against 224–274 k/s); at 10,000 records/s the broker used 0.77 cores
// against 0.80, for the same latency (p50 1.5–1.6 ms, p99 5.7–5.9 ms).
// A bound of 1 saved more CPU at 10,000/s (0.70 cores) and cost the
// 100-byte producer 10% of its rate.
const (
	DefaultLinger                  = time.Duration(0)
	DefaultMaxBatchBytes           = 256 << 10
	DefaultMaxBatchRecords         = 10000
	DefaultMaxBufferedBytes        = 32 << 20
	DefaultMaxInFlight             = 64
	DefaultMaxInFlightPerPartition = 2
)

// ProducerOption configures NewProducer. WithMode and WithPartition are
// ProducerOptions too.
type ProducerOption interface{ applyProducer(*producerConfig) }

type producerOption func(*producerConfig)

func (o producerOption) applyProducer(c *producerConfig) { o(c) }

type producerConfig struct {
	send        sendConfig
	linger      time.Duration
	maxBytes    int64
	maxRecords  int
	maxBuffered int64
	maxInFlight int
	// perPartition: WithMaxInFlightPerPartition.
	perPartition int
}

// WithLinger sets how long a partition's batch waits for more records
// before it is sent (default DefaultLinger). 0 sends each batch as soon as
// the sender is free.
func WithLinger(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.linger = max(d, 0) })
}

// WithMaxBatchBytes bounds a batch's size (default DefaultMaxBatchBytes); a
// record larger than it travels alone.
func WithMaxBatchBytes(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxBytes = int64(max(n, 1)) })
}

// WithMaxBatchRecords bounds a batch's record count (default
// DefaultMaxBatchRecords).
func WithMaxBatchRecords(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxRecords = max(n, 1) })
}

// WithMaxBufferedBytes bounds the bytes of records published and not yet
// acknowledged or failed (default DefaultMaxBufferedBytes). At the bound,
// Publish blocks until space frees or its ctx ends.
func WithMaxBufferedBytes(n int64) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxBuffered = max(n, 1) })
}

// WithMaxInFlightPerPartition bounds the batches of one partition sealed
// and not yet answered (default DefaultMaxInFlightPerPartition; 0: only
// WithMaxInFlight bounds them). While a partition is at the bound, its
// records gather into its next batch, which goes when an answer comes
// back, as a Kafka producer's next batch does while its requests are in
// flight: at a moderate rate the records of a round trip travel as one
// batch (one request, one log entry) instead of one each. A batch that
// fills (WithMaxBatchBytes, WithMaxBatchRecords) goes at once, and so do
// the batches Flush and Close send.
func WithMaxInFlightPerPartition(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.perPartition = max(n, 0) })
}

// WithMaxInFlight bounds the requests sent on the stream and not yet
// answered (default DefaultMaxInFlight). With more than 1, a retried batch
// may land after a later batch of the same partition; use 1 for strict
// per-partition order across retries.
func WithMaxInFlight(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxInFlight = max(n, 1) })
}

// Producer publishes records of one topic asynchronously: it batches them
// per partition and pipelines packed batches over a PublishStream: one to
// the dialled node, and on a cluster one to each partition leader the
// broker named (see WithLeaderRouting). It is safe for concurrent use.
// Retriable failures (RESOURCE_EXHAUSTED, UNAVAILABLE, a broken stream)
// are retried with the same message ids, up to the Client's RetryPolicy
// attempts per batch. The broker answers a batch it already stored within
// its duplicate window (2 minutes by default) with the stored copy's
// offsets; past that window a resent batch may be stored twice, each copy
// with the same message ids, so consumers can recognise them.
//
// The partition count is read once at creation: partitions added later
// receive no records from this Producer.
type Producer struct {
	c      *Client
	topic  string
	cfg    producerConfig
	maxMsg int // the topic's max message bytes; 0 when unknown

	ctx    context.Context // ends with Close; parent of the streams
	cancel context.CancelFunc

	mu sync.Mutex
	// Lock: mu guards every field below.
	acc        accumulator
	live       map[uint64]*batch // every batch not yet done, by seq
	buffered   int64             // Invariant: the sum of bytes of live batches.
	space      chan struct{}     // closed and replaced when buffered drops, if waiters > 0
	waiters    int
	streams    map[string]*pubStream // open streams by node address ("": the dialled node)
	connecting map[string]bool       // leader addresses being connected to in the background
	routes     routes
	inflight   int // Invariant: 0 <= inflight <= cfg.maxInFlight
	nextReq    uint64
	// futures are handed out one at a time from a block allocated
	// futureBlock at a time, one allocation where there were
	// futureBlock. A Future is never written after it is handed out, and
	// a block is freed when none of its futures is referenced; a done
	// batch holds no records, so a kept Future keeps only small things.
	futures  []Future
	closed   bool // no more Publish
	stopping bool // the sender should exit

	wake       chan struct{} // cap 1: the sender has something to look at
	stopCh     chan struct{} // closed by Close: the sender exits
	senderDone chan struct{}
	receivers  sync.WaitGroup // one goroutine per stream
	enc        encoder        // owned by the sender goroutine
	spanless   spanless       // the last Publish context without a span
}

// NewProducer returns a Producer for topic. It asks the broker for the
// topic's partition count and max message size. The Producer must be
// closed.
//
// Errors: ErrTopicNotFound, ErrPartitionNotFound when WithPartition names
// a partition the topic lacks, ErrClosed.
func (c *Client) NewProducer(ctx context.Context, topic string, opts ...ProducerOption) (*Producer, error) {
	cfg := producerConfig{
		linger: DefaultLinger, maxBytes: DefaultMaxBatchBytes, maxRecords: DefaultMaxBatchRecords,
		maxBuffered: DefaultMaxBufferedBytes, maxInFlight: DefaultMaxInFlight,
		perPartition: DefaultMaxInFlightPerPartition,
	}
	for _, o := range opts {
		o.applyProducer(&cfg)
	}
	info, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	n := int32(len(info.Partitions))
	if n == 0 {
		n = max(info.Config.Partitions, 1)
	}
	fixed := int32(-1)
	if cfg.send.hasPartition {
		if cfg.send.partition < 0 || cfg.send.partition >= n {
			return nil, &Error{Code: CodePartitionNotFound,
				Message: fmt.Sprintf("topic %q has no partition %d", topic, cfg.send.partition)}
		}
		fixed = cfg.send.partition
	}
	p := &Producer{
		c: c, topic: topic, cfg: cfg, maxMsg: int(info.Config.MaxMessageBytes),
		acc:  newAccumulator(n, fixed, cfg.maxBytes, cfg.maxRecords, cfg.linger, cfg.perPartition),
		live: make(map[uint64]*batch), space: make(chan struct{}),
		streams: make(map[string]*pubStream), routes: newRoutes(n, c.cfg.direct),
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), senderDone: make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.runSender()
	return p, nil
}

// Publish adds m to its partition's batch and returns at once with its
// Future, unless the Producer holds its max buffered bytes: then it blocks
// until space frees or ctx ends (the Future then fails with ctx.Err()).
// A zero m.ID is set to a new UUIDv7; a zero Timestamp means the time the
// batch is sent. ctx bounds only the wait for space, not the delivery.
//
// When ctx carries an OpenTelemetry span, the record is sent with its
// trace context in the headers "traceparent" and "tracestate" (trace.go;
// m itself is not changed).
//
// REQUIRES: m and its slices stay unmodified until the Future is done.
// The Future fails at once with ErrMessageTooLarge when m exceeds the
// topic's max message bytes or the buffer bound, ErrClosed after Close.
func (p *Producer) Publish(ctx context.Context, m *Message) *Future {
	// The clock is read only when something needs it: a record without
	// an id, or a batch opened with a linger (accumulator.add). A
	// caller's ids and linger 0 spare it (about 50 ns a record on a
	// virtual machine's clock).
	var now time.Time
	if m.ID.IsZero() {
		now = time.Now()
	}
	m, cost, refused := p.admit(ctx, m, now)
	if refused != nil {
		return refused
	}
	p.mu.Lock()
	f, wake := p.enqueue(ctx, m, cost, now)
	p.mu.Unlock()
	if wake {
		p.signal()
	}
	return f
}

// PublishBatch is Publish of each of msgs in turn, in one step: one
// clock read and one lock for the slice instead of one per record. It
// returns their Futures in the order of msgs; each record succeeds or
// fails on its own (one too large fails alone), records of a partition
// keep their order, and they may share batches with records published
// before and after. It blocks, like Publish, while the Producer holds
// its max buffered bytes.
//
// REQUIRES: as for Publish, for every message.
func (p *Producer) PublishBatch(ctx context.Context, msgs []*Message) []*Future {
	futs := make([]*Future, len(msgs))
	costs := make([]int64, len(msgs))
	admitted := make([]*Message, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		admitted[i], costs[i], futs[i] = p.admit(ctx, m, now)
	}
	wake := false
	p.mu.Lock()
	for i, m := range admitted {
		if futs[i] != nil {
			continue // refused
		}
		if wake && p.buffered+costs[i] > p.cfg.maxBuffered {
			// This record waits for space that only sending what is
			// ready frees: wake the sender first.
			p.signal()
			wake = false
		}
		var w bool
		futs[i], w = p.enqueue(ctx, m, costs[i], now)
		wake = wake || w
	}
	p.mu.Unlock()
	if wake {
		p.signal()
	}
	return futs
}

// admit readies m for a batch: its id, its trace context, its cost in
// buffered bytes; or the failed Future of a record too large.
func (p *Producer) admit(ctx context.Context, m *Message, now time.Time) (*Message, int64, *Future) {
	ensureID(m, now)
	h, ok := p.spanless.traceOf(ctx)
	m = withTrace(h, ok, m)
	sz := m.size()
	cost := int64(sz + recordOverhead)
	if (p.maxMsg > 0 && sz > p.maxMsg) || cost > p.cfg.maxBuffered {
		return m, 0, failedFuture(m.ID, &Error{Code: CodeMessageTooLarge,
			Message: fmt.Sprintf("record of %d bytes exceeds the limit of topic %q", sz, p.topic)})
	}
	return m, cost, nil
}

// enqueue adds an admitted m to its partition's batch, once cost fits
// the buffer bound; wake reports that the sender has work. Lock: mu
// must be held; it is released while waiting for space.
func (p *Producer) enqueue(ctx context.Context, m *Message, cost int64, now time.Time) (f *Future, wake bool) {
	if err := p.reserve(ctx, cost); err != nil {
		return failedFuture(m.ID, err), false
	}
	b, idx, isNew := p.acc.add(m, cost, now)
	if isNew {
		p.live[b.seq] = b
	}
	if len(p.futures) == 0 {
		p.futures = make([]Future, futureBlock)
	}
	f = &p.futures[0]
	p.futures = p.futures[1:]
	*f = Future{b: b, idx: int64(idx), id: m.ID}
	return f, isNew || p.acc.ready.len() > 0
}

// futureBlock is how many futures a Producer allocates at once (3 KiB).
const futureBlock = 64

// reserve waits until cost more bytes fit the buffer bound and takes them.
// Lock: mu must be held; it is released while waiting.
func (p *Producer) reserve(ctx context.Context, cost int64) error {
	for {
		if p.closed {
			return ErrClosed
		}
		if p.buffered+cost <= p.cfg.maxBuffered {
			p.buffered += cost
			return nil
		}
		ch := p.space
		p.waiters++
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.waiters--
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// release returns n buffered bytes and wakes blocked publishers.
// Lock: mu must be held.
func (p *Producer) release(n int64) {
	p.buffered -= n
	if p.buffered < 0 {
		panic(fmt.Sprintf("hermes client: producer buffered %d < 0 after releasing %d", p.buffered, n))
	}
	if p.waiters > 0 {
		close(p.space)
		p.space = make(chan struct{})
	}
}

// signal wakes the sender without blocking.
func (p *Producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Flush sends every record published before the call at once (ignoring
// linger) and waits until each is acknowledged or failed, or ctx ends.
// Errors are reported by the records' Futures; Flush returns only
// ctx.Err().
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.acc.sealAll()
	waits := make([]chan struct{}, 0, len(p.live))
	for _, b := range p.live {
		waits = append(waits, b.done)
	}
	p.mu.Unlock()
	p.signal()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops accepting records, flushes those buffered (bounded by ctx),
// and releases the stream. Records not acknowledged when ctx ends fail
// with ErrClosed, and Close returns ctx.Err() soon after ctx ends, even
// when the broker stopped reading the stream (its streams are cancelled).
// Close is idempotent.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.waiters > 0 { // blocked publishers see closed
		close(p.space)
		p.space = make(chan struct{})
	}
	p.mu.Unlock()
	err := p.Flush(ctx)
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	close(p.stopCh)
	if err != nil {
		// Records are left: the sender may be blocked in stream.Send by
		// HTTP/2 flow control (a broker that stopped reading), which only
		// the stream's context ends. From here on every failure of the
		// producer's streams is reported as ErrClosed (closing).
		p.cancel()
	}
	<-p.senderDone
	p.mu.Lock()
	left := make([]*batch, 0, len(p.live))
	for _, b := range p.live {
		left = append(left, b)
	}
	streams := make([]*pubStream, 0, len(p.streams))
	for _, s := range p.streams {
		streams = append(streams, s)
	}
	p.mu.Unlock()
	for _, b := range left {
		p.finish(b, nil, ErrClosed)
	}
	for _, s := range streams {
		_ = s.stream.CloseSend()
	}
	p.cancel()
	p.receivers.Wait()
	return err
}
