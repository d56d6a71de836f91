package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// maxPendingAcks bounds the acks and nacks queued for the stream writer;
// beyond it Ack fails with a retriable ErrResourceExhausted.
const maxPendingAcks = 64 * maxAckBatch

// session is one Subscribe stream of a Consumer. The reader (the
// Consumer's run goroutine) and one writer goroutine serve it.
type session struct {
	stream  subscribeStream
	ctx     context.Context
	cancel  context.CancelFunc
	kickCh  chan struct{} // cap 1: the writer has requests to send
	timeout time.Duration // the broker's session timeout

	// Lock: Consumer.mu guards the fields below.
	acks, nacks []*hermesv1.PartitionOffset
	commits     []pendingCommit // queued for the writer
	awaiting    []pendingCommit // sent, answered in order
	autoPending bool            // an auto commit is queued or awaiting
	halfClose   bool            // Close: send what is queued, then CloseSend
	ended       bool
}

// pendingCommit is one commit request; reply is nil for auto commits.
type pendingCommit struct {
	offs  []*hermesv1.PartitionOffset
	reply chan error
}

func (s *session) wake() {
	select {
	case s.kickCh <- struct{}{}:
	default:
	}
}

// open starts a Subscribe stream at start and waits (bounded by ctx and
// the session timeout) for the broker's `subscribed`. A group member goes
// straight to the group's coordinator when an earlier subscription of the
// Client learned where it is (leader routing), else, or if that fails,
// through the dialled node.
func (c *Consumer) open(ctx context.Context, start *hermesv1.StartPosition) (*session, error) {
	if coord := c.c.coordinatorOf(c.cfg.group); coord != "" {
		s, err := c.openAt(ctx, coord, start)
		if err == nil {
			return s, nil
		}
		c.c.setCoordinator(c.cfg.group, "")
		c.c.log.Debug("hermes: subscribing at the group coordinator failed; going through the dialled node", "group", c.cfg.group, "coordinator", coord, "err", err)
		if ctx.Err() != nil || c.ctx.Err() != nil {
			return nil, err
		}
	}
	return c.openAt(ctx, "", start)
}

// openAt is open through the node at addr ("": the dialled node).
func (c *Consumer) openAt(ctx context.Context, addr string, start *hermesv1.StartPosition) (*session, error) {
	hctx, hcancel := context.WithTimeout(ctx, max(c.cfg.sessionTimeout, 10*time.Second))
	defer hcancel()
	sctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(hctx, cancel) // the handshake is bounded; the stream is not
	defer stop()
	stream, err := c.c.openSubscribe(sctx, addr)
	if err != nil {
		cancel()
		return nil, fromRPC(hctx, err)
	}
	s := &session{stream: stream, ctx: sctx, cancel: cancel, kickCh: make(chan struct{}, 1), timeout: c.cfg.sessionTimeout}
	if err := stream.Send(c.cfg.openRequest(c.topic, start)); err != nil {
		_, err = stream.Recv() // the status says why
		cancel()
		return nil, fromRPC(hctx, err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			cancel()
			return nil, fromRPC(hctx, err)
		}
		if info := resp.GetError(); info != nil {
			cancel()
			return nil, fromInfo(info, codes.OK)
		}
		sub := resp.GetSubscribed()
		if sub == nil {
			if err := c.handle(s, resp); err != nil {
				cancel()
				return nil, err
			}
			continue
		}
		if !stop() {
			cancel()
			return nil, context.Cause(hctx)
		}
		if ms := sub.GetSessionTimeoutMs(); ms > 0 {
			s.timeout = time.Duration(ms) * time.Millisecond
		}
		if coord := sub.GetCoordinatorAddress(); coord != "" {
			c.c.setCoordinator(c.cfg.group, coord) // relayed: go direct next time
		}
		c.mu.Lock()
		c.sess, c.memberID = s, sub.GetMemberId()
		c.mu.Unlock()
		return s, nil
	}
}

// run serves sessions until Close or a permanent failure.
func (c *Consumer) run(s *session) {
	defer close(c.done)
	for {
		err := c.serve(s)
		c.endSession(s)
		if c.ctx.Err() != nil || c.isClosed() {
			return
		}
		c.c.log.Warn("hermes: subscription broken, reconnecting", "topic", c.topic, "group", c.cfg.group, "err", err)
		if s = c.reconnect(err); s == nil {
			return
		}
	}
}

// serve runs s's writer and reads s until it breaks.
func (c *Consumer) serve(s *session) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.runWriter(s)
	}()
	var err error
	for err == nil {
		var resp *hermesv1.SubscribeResponse
		if resp, err = s.stream.Recv(); err == nil {
			err = c.handle(s, resp)
		}
	}
	s.cancel()
	wg.Wait()
	if errors.Is(err, io.EOF) {
		return &Error{Code: CodeUnavailable, Retriable: true, Message: "subscription closed by the broker"}
	}
	return fromRPC(s.ctx, err)
}

// reconnect subscribes again with backoff; nil means the consumer is
// closed or failed for good (then c.err is set).
func (c *Consumer) reconnect(cause error) *session {
	for attempt := 1; ; attempt++ {
		if !subscribeRetriable(cause) || attempt > c.c.retry.MaxAttempts {
			c.fail(cause)
			return nil
		}
		if sleepCtx(c.ctx, c.c.retry.delay(attempt, retryAfter(cause))) != nil {
			return nil
		}
		start := c.cfg.start
		if c.cfg.group == "" {
			c.mu.Lock()
			start = resumeStart(c.cfg.start, c.cfg.partitions, c.next, c.lastTS)
			c.mu.Unlock()
		}
		if c.isClosed() {
			return nil
		}
		s, err := c.open(c.ctx, start)
		if err == nil {
			return s
		}
		if c.ctx.Err() != nil || c.isClosed() {
			return nil
		}
		c.c.log.Warn("hermes: resubscribe failed", "topic", c.topic, "attempt", attempt, "err", err)
		cause = err
	}
}

// subscribeRetriable reports whether a broken or refused subscription is
// worth another try: not when the request itself is wrong.
func subscribeRetriable(err error) bool {
	switch {
	case errors.Is(err, ErrTopicNotFound), errors.Is(err, ErrInvalidArgument),
		errors.Is(err, ErrInvalidTopicName), errors.Is(err, ErrPartitionNotFound),
		errors.Is(err, ErrOffsetOutOfRange), errors.Is(err, ErrClosed),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// fail ends the subscription for good with err.
func (c *Consumer) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.wakeWaiters()
	c.mu.Unlock()
}

// endSession retires s: commits in progress fail as ErrUnavailable (they
// may or may not have been applied); buffered records are dropped, since
// the next session gets fresh credit and (for a group) the broker
// redelivers everything after the committed offsets.
func (c *Consumer) endSession(s *session) {
	lost := &Error{Code: CodeUnavailable, Retriable: true, Message: "subscription stream broke before the commit was answered"}
	c.mu.Lock()
	s.ended = true
	for _, pc := range append(s.awaiting, s.commits...) {
		if pc.reply != nil {
			pc.reply <- lost
		}
	}
	s.awaiting, s.commits, s.acks, s.nacks = nil, nil, nil, nil
	if c.sess == s {
		c.sess = nil
	}
	clear(c.queue)
	c.queue = c.queue[:0]
	c.oweRecs, c.oweBytes = 0, 0
	if c.cfg.group != "" {
		c.memberID, c.assignment, c.returned = "", nil, c.returned[:0]
		clear(c.consumed)
		clear(c.committed)
	}
	c.mu.Unlock()
}

// handle applies one response of s.
func (c *Consumer) handle(s *session, resp *hermesv1.SubscribeResponse) error {
	switch k := resp.GetKind().(type) {
	case *hermesv1.SubscribeResponse_Subscribed:
		c.mu.Lock()
		c.memberID = k.Subscribed.GetMemberId()
		c.mu.Unlock()
	case *hermesv1.SubscribeResponse_Assignment:
		c.assign(k.Assignment.GetPartitions())
	case *hermesv1.SubscribeResponse_Deliveries:
		return c.deliver(k.Deliveries)
	case *hermesv1.SubscribeResponse_Commit:
		c.commitAnswered(s, k.Commit)
	case *hermesv1.SubscribeResponse_Error:
		c.c.log.Warn("hermes: subscription request failed", "topic", c.topic, "err", fromInfo(k.Error, codes.OK))
	}
	return nil
}

// assign installs a group assignment and drops what belongs to revoked
// partitions: their records go to the new owner.
func (c *Consumer) assign(parts []int32) {
	owned := make(map[int32]bool, len(parts))
	for _, p := range parts {
		owned[p] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assignment = append([]int32(nil), parts...)
	kept := c.queue[:0]
	for _, q := range c.queue {
		if owned[q.m.Partition] {
			kept = append(kept, q)
		} else {
			c.oweCredit(1, q.cost)
		}
	}
	clear(c.queue[len(kept):])
	c.queue = kept
	for _, m := range []map[int32]int64{c.consumed, c.committed} {
		for p := range m {
			if !owned[p] {
				delete(m, p)
			}
		}
	}
	c.returned = slices.DeleteFunc(c.returned, func(r partOffset) bool { return !owned[r.partition] })
}

// deliver queues delivered records for Next.
func (c *Consumer) deliver(d *hermesv1.Deliveries) error {
	qs, err := c.decode(d)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.missed += d.GetMissed()
	part, n, ok := int32(-1), int64(0), false // c.next of part, looked up once per run of part's records
	for _, q := range qs {
		if q.m.Partition != part {
			part = q.m.Partition
			n, ok = c.next[part]
		}
		// Dropping by offset compares log offsets: never a performance
		// record's ring offset.
		if ok && c.cfg.group == "" && durable(q.m) && q.m.Offset < n {
			c.oweCredit(1, q.cost) // already returned before a reconnect
			continue
		}
		c.queue = append(c.queue, q)
	}
	if limit := 2 * int(c.cfg.creditRecords); len(c.queue) > limit {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("broker sent %d records beyond credit %d", len(c.queue), c.cfg.creditRecords)}
	}
	if len(qs) > 0 {
		c.wakeWaiters()
	}
	return nil
}

// recordCredit and batchCredit are the byte credit the broker charges for
// what it sends (the contract of hermes.v1.Credit): for a Record its key,
// payload and headers plus record.CreditOverhead, the length of each
// RecordBatch's data. The consumer gives back exactly these amounts, no
// more and no less, so its byte credit neither leaks nor grows.
func recordCredit(r *hermesv1.Record) int64 {
	n := len(r.GetKey()) + len(r.GetPayload()) + record.CreditOverhead
	for _, h := range r.GetHeaders() {
		n += len(h.GetKey()) + len(h.GetValue())
	}
	return int64(n)
}
func batchCredit(b *hermesv1.RecordBatch) int64 { return int64(len(b.GetData())) }

// decode turns a Deliveries message into queue entries, charging each
// record the credit bytes it took: recordCredit, or its share of its
// packed batch's batchCredit (the shares of a batch add up to it).
func (c *Consumer) decode(d *hermesv1.Deliveries) ([]queued, error) {
	n := len(d.GetRecords())
	for _, b := range d.GetBatches() {
		if h, err := record.ParseHeader(b.GetData()); err == nil {
			n += int(h.RecordCount) // a bad batch fails below
		}
	}
	out := make([]queued, 0, n)
	if rs := d.GetRecords(); len(rs) > 0 {
		ms := make([]Message, len(rs))
		for i, r := range rs {
			messageFromProto(&ms[i], c.topic, r)
			out = append(out, queued{m: &ms[i], cost: recordCredit(r)})
		}
	}
	for _, b := range d.GetBatches() {
		ms, err := c.dec.decode(b.GetData(), c.topic, b.GetPartition(), 0)
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			continue // empty data: a batch that validates holds at least one record
		}
		total := batchCredit(b)
		share, rest := total/int64(len(ms)), total%int64(len(ms))
		for i := range ms {
			out = append(out, queued{m: &ms[i], cost: share})
		}
		out[len(out)-len(ms)].cost += rest
	}
	return out, nil
}
