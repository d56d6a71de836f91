package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// wireScheme prefixes the address of a Client that publishes and
// subscribes over hermes-wire.
const wireScheme = "wire://"

// publishStream is a Producer's stream of publish requests and their
// answers: a gRPC PublishStream, or a wirePublish.
type publishStream interface {
	Send(*hermesv1.PublishRequest) error
	Recv() (*hermesv1.PublishResponse, error)
	CloseSend() error
}

// subscribeStream is a Consumer's subscription stream: a gRPC Subscribe
// stream, or a wireSubscribe.
type subscribeStream interface {
	Send(*hermesv1.SubscribeRequest) error
	Recv() (*hermesv1.SubscribeResponse, error)
	CloseSend() error
}

// openPublish opens a publish stream of topic to the node at addr (""
// the dialled node).
func (c *Client) openPublish(ctx context.Context, addr, topic string) (publishStream, error) {
	if c.wire != nil {
		wc, t, err := c.wire.topicAt(ctx, addr, topic)
		if err != nil {
			return nil, err
		}
		return &wirePublish{c: wc, topic: t, ctx: ctx, in: newInbox[*hermesv1.PublishResponse]()}, nil
	}
	api, err := c.leaderAPI(ctx, addr)
	if err != nil {
		return nil, err
	}
	st, err := api.PublishStream(ctx)
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	return st, nil
}

// openSubscribe opens a subscription stream to the node at addr (""
// the dialled node); the first request sent on it opens the
// subscription.
func (c *Client) openSubscribe(ctx context.Context, addr string) (subscribeStream, error) {
	if c.wire != nil {
		return &wireSubscribe{w: c.wire, ctx: ctx, in: newInbox[*hermesv1.SubscribeResponse]()}, nil
	}
	api, err := c.leaderAPI(ctx, addr)
	if err != nil {
		return nil, err
	}
	st, err := api.Subscribe(ctx)
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	return st, nil
}

// dialWire is Dial of a wire:// address: the hermes-wire connection now,
// and gRPC (lazily) to the address the node tells for the rest.
func dialWire(ctx context.Context, addrs string, cfg clientConfig) (*Client, error) {
	var list []string
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("hermes-wire address %q of %q: %v", a, wireScheme+addrs, err)}
		}
		list = append(list, a)
	}
	if len(list) == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("no address in %q", wireScheme+addrs)}
	}
	w := &wireConn{addrs: list, opts: wire.Options{ClientName: "hermes-go", User: cfg.user, Password: cfg.password,
		Token: cfg.token, TLS: cfg.tls, DialTimeout: cfg.dialTimeout}}
	if w.opts.DialTimeout <= 0 {
		w.opts.DialTimeout = DefaultDialTimeout
	}
	wc, err := w.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial %s%s: %w", wireScheme, addrs, err)
	}
	var c *Client
	if admin := grpcAddrOf(wc.GRPCAddr, w.addr()); admin != "" {
		conn, err := grpcConn(admin, nil, &cfg)
		if err != nil {
			w.close()
			return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("the node's gRPC address %s: %v", admin, err)}
		}
		c = newClient(conn, hermesv1.NewHermesClient(conn), cfg)
	} else {
		c = newClient(nil, hermesv1.NewHermesClient(noGRPC{}), cfg)
	}
	c.wire = w
	return c, nil
}

// grpcAddrOf is the gRPC address a node told (advertised), with the
// host the client reached it at when the node listens on every
// interface.
func grpcAddrOf(told, dialled string) string {
	host, port, err := net.SplitHostPort(told)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		h, _, _ := net.SplitHostPort(dialled)
		return net.JoinHostPort(h, port)
	}
	return told
}

// noGRPC is the gRPC connection of a Client whose hermes-wire node told
// no gRPC address: every call fails.
type noGRPC struct{}

func (noGRPC) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errNoGRPC()
}

func (noGRPC) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errNoGRPC()
}

func errNoGRPC() error {
	return status.Error(codes.Unimplemented, "hermes-wire carries publishes and subscriptions only, and the node told no gRPC address for the rest: Dial its gRPC address")
}

// wireConn is a Client's hermes-wire connection: one at a time, to one
// of addrs, dialled again (the next address first) once it failed.
type wireConn struct {
	addrs []string
	opts  wire.Options

	mu     sync.Mutex
	c      *wire.Client
	next   int // the address to dial next
	cur    string
	closed bool

	// leaders are the connections to partition leaders a node named
	// (leader routing), by address: dialled on first use, again once
	// broken. Lock: lmu, which a dial holds (not mu: the connection to
	// the dialled node stays usable meanwhile).
	lmu     sync.Mutex
	leaders map[string]*wire.Client
}

// get returns the live connection, dialling one if there is none.
func (w *wireConn) get(ctx context.Context) (*wire.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if w.c != nil {
		select {
		case <-w.c.Done():
			w.c = nil
			w.next = (w.next + 1) % len(w.addrs) // it failed: another node first
		default:
			return w.c, nil
		}
	}
	var errs []string
	for range w.addrs {
		addr := w.addrs[w.next]
		c, err := wire.Dial(ctx, addr, w.opts)
		if err == nil {
			w.c, w.cur = c, addr
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var we *wire.Error
		if errors.As(err, &we) && !we.Retriable {
			return nil, wireErr(err) // refused by the node (authentication, version): no other will differ
		}
		errs = append(errs, fmt.Sprintf("%s: %v", addr, err))
		w.next = (w.next + 1) % len(w.addrs)
	}
	return nil, &Error{Code: CodeUnavailable, Retriable: true, Message: "hermes-wire: broker not reachable (" + strings.Join(errs, "; ") + ")"}
}

// leader returns the connection to the partition leader at addr, dialling
// it (within leaderConnectTimeout) if there is none or it broke.
func (w *wireConn) leader(ctx context.Context, addr string) (*wire.Client, error) {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	if c := w.leaders[addr]; c != nil {
		select {
		case <-c.Done():
			delete(w.leaders, addr)
		default:
			return c, nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, leaderConnectTimeout)
	defer cancel()
	c, err := wire.Dial(dctx, addr, w.opts)
	if err != nil {
		return nil, wireErr(err)
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		c.Close()
		return nil, ErrClosed
	}
	if w.leaders == nil {
		w.leaders = make(map[string]*wire.Client)
	}
	w.leaders[addr] = c
	return c, nil
}

// topic returns the live connection and topic's id on it.
func (w *wireConn) topic(ctx context.Context, name string) (*wire.Client, uint32, error) {
	return w.topicAt(ctx, "", name)
}

// topicAt returns the connection to addr ("": the dialled node; else a
// partition leader, see leader) and topic's id on it.
func (w *wireConn) topicAt(ctx context.Context, addr, name string) (*wire.Client, uint32, error) {
	if len(name) > wire.MaxName {
		// The node would close the connection, shared by every stream of
		// the Client, for the malformed frame: refuse it here.
		return nil, 0, &Error{Code: CodeInvalidTopicName, Message: fmt.Sprintf("invalid name: topic name must be 1 to %d characters, got %d", wire.MaxName, len(name))}
	}
	var wc *wire.Client
	var err error
	if addr == "" {
		wc, err = w.get(ctx)
	} else {
		wc, err = w.leader(ctx, addr)
	}
	if err != nil {
		return nil, 0, err
	}
	if t, ok := wc.Opened(name); ok {
		return wc, t.ID, nil
	}
	t, err := wc.OpenTopic(ctx, name)
	if err != nil {
		return nil, 0, wireErr(err)
	}
	return wc, t.ID, nil
}

// addr is the address of the current connection.
func (w *wireConn) addr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

func (w *wireConn) close() {
	w.mu.Lock()
	w.closed = true
	if w.c != nil {
		w.c.Close()
		w.c = nil
	}
	w.mu.Unlock()
	w.lmu.Lock()
	defer w.lmu.Unlock()
	for addr, c := range w.leaders {
		c.Close()
		delete(w.leaders, addr)
	}
}

// wireErr converts a hermes-wire error into this package's: the node's
// ERROR as the *Error of the same code, a broken connection as a
// retriable ErrUnavailable.
func wireErr(err error) error {
	var we *wire.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		return &Error{Code: Code(we.Code), Message: we.Message, Retriable: we.Retriable, RetryAfter: we.RetryAfter}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrClosed):
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: CodeUnavailable, Retriable: true, Message: "hermes-wire: " + err.Error()}
}

// errorInfo is a hermes-wire ERROR as the gRPC API's in-band error.
func errorInfo(we *wire.Error) *hermesv1.ErrorInfo {
	return &hermesv1.ErrorInfo{Code: hermesv1.ErrorCode(we.Code), Message: we.Message, Retriable: we.Retriable,
		RetryAfterMs: we.RetryAfter.Milliseconds(), LeaderAddress: we.Leader}
}

// recordsOf converts records of a request for hermes-wire.
func recordsOf(rs []*hermesv1.Record) []record.Record {
	out := make([]record.Record, len(rs))
	for i, r := range rs {
		out[i] = record.Record{Timestamp: r.GetTimestampUnixNano(), Key: r.Key, Payload: r.GetPayload()}
		copy(out[i].MessageID[:], r.GetMessageId())
		for _, h := range r.GetHeaders() {
			out[i].Headers = append(out[i].Headers, record.Header{Key: h.GetKey(), Value: h.GetValue()})
		}
	}
	return out
}

// publishWire is Client.Publish over hermes-wire.
func (c *Client) publishWire(ctx context.Context, topic string, partition int32, mode Mode, rs []*hermesv1.Record) ([]*hermesv1.RecordAck, Mode, error) {
	recs := recordsOf(rs)
	// A frame over the node's limit would close the connection, which
	// every stream of the Client shares: refuse it here. The count is an
	// upper bound of the frame's size.
	size := wire.HeaderSize + 16
	for i := range recs {
		size += 64 + len(recs[i].Key) + len(recs[i].Payload)
		for _, h := range recs[i].Headers {
			size += 8 + len(h.Key) + len(h.Value)
		}
	}
	if size > wire.MaxFrame {
		return nil, 0, &Error{Code: CodeMessageTooLarge, Message: fmt.Sprintf(
			"a publish of %d records and about %d bytes exceeds hermes-wire's frame limit of %d bytes: publish fewer at once, or use a Producer", len(recs), size, wire.MaxFrame)}
	}
	var ack wire.Ack
	err := c.call(ctx, func(ctx context.Context) error {
		wc, id, err := c.wire.topic(ctx, topic)
		if err != nil {
			return err
		}
		ack, err = wc.Publish(ctx, id, partition, uint8(mode), recs)
		return wireErr(err)
	})
	if err != nil {
		return nil, 0, err
	}
	acks := make([]*hermesv1.RecordAck, ack.Count)
	for i := range acks {
		if ack.Partition == -1 {
			acks[i] = &hermesv1.RecordAck{Partition: ack.Places[i].Partition, Offset: ack.Places[i].Offset}
		} else {
			acks[i] = &hermesv1.RecordAck{Partition: ack.Partition, Offset: ack.BaseOffset + int64(i)}
		}
	}
	return acks, Mode(ack.Mode), nil
}

// wirePublish is a Producer's publish stream over a hermes-wire
// connection: each request a PUBLISH, each answer the response of the
// request's id. It ends with the connection or its ctx.
type wirePublish struct {
	c     *wire.Client
	topic uint32
	ctx   context.Context
	in    *inbox[*hermesv1.PublishResponse]
}

func (s *wirePublish) Send(req *hermesv1.PublishRequest) error {
	part := int32(-1)
	if req.Partition != nil {
		part = *req.Partition
	}
	id := req.GetRequestId()
	done := func(a wire.Ack, err error) { s.answered(id, a, err) }
	var err error
	if req.Batch != nil {
		err = s.c.PublishBatchAsync(s.ctx, s.topic, part, uint8(req.GetMode()), req.Batch, done)
	} else {
		err = s.c.PublishAsync(s.ctx, s.topic, part, uint8(req.GetMode()), recordsOf(req.GetRecords()), done)
	}
	if err != nil {
		err = wireErr(err)
		s.in.end(err)
	}
	return err
}

// CloseSend does nothing: a publish stream over hermes-wire has nothing
// to half-close; it ends with its ctx.
func (s *wirePublish) CloseSend() error { return nil }

// answered takes a PUBLISH's answer (on the connection's reader).
func (s *wirePublish) answered(id uint64, a wire.Ack, err error) {
	var we *wire.Error
	resp := &hermesv1.PublishResponse{RequestId: id}
	switch {
	case err == nil:
		resp.Partition, resp.BaseOffset, resp.Count, resp.Mode = a.Partition, a.BaseOffset, int32(a.Count), hermesv1.DeliveryMode(a.Mode)
		resp.LeaderAddress = a.Leader
	case errors.As(err, &we) && !we.Fatal:
		resp.Error = errorInfo(we)
	default: // the connection failed: so did everything in flight on it
		s.in.end(wireErr(err))
		return
	}
	s.in.push(resp)
}

// Recv returns the next answer, or why the stream ended: the connection
// failing, or its ctx (the Producer closing, or its sender giving the
// stream up).
func (s *wirePublish) Recv() (*hermesv1.PublishResponse, error) {
	return s.in.next(s.ctx, s.c, "publish stream cancelled")
}

// inbox holds what a stream over hermes-wire has for Recv: answers in
// order, then why it ended.
type inbox[T any] struct {
	mu    sync.Mutex
	queue []T
	err   error
	ready chan struct{} // cap 1: queue or err changed
}

func newInbox[T any]() *inbox[T] { return &inbox[T]{ready: make(chan struct{}, 1)} }

func (q *inbox[T]) push(v T) {
	q.mu.Lock()
	q.queue = append(q.queue, v)
	q.mu.Unlock()
	q.wake()
}

// end ends the stream with err, after what is queued; the first reason
// counts.
func (q *inbox[T]) end(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.wake()
}

func (q *inbox[T]) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next returns the next answer, or why the stream ended: the
// connection c failing (nil: not watched) or ctx ending (a retriable
// ErrUnavailable saying cancelled).
func (q *inbox[T]) next(ctx context.Context, c *wire.Client, cancelled string) (T, error) {
	var conn <-chan struct{}
	if c != nil {
		conn = c.Done()
	}
	var zero T
	for {
		q.mu.Lock()
		if len(q.queue) > 0 {
			v := q.queue[0]
			q.queue[0] = zero
			q.queue = q.queue[1:]
			q.mu.Unlock()
			return v, nil
		}
		err := q.err
		q.mu.Unlock()
		if err != nil {
			return zero, err
		}
		select {
		case <-q.ready:
		case <-conn:
			q.end(wireErr(c.Err()))
		case <-ctx.Done():
			q.end(&Error{Code: CodeUnavailable, Retriable: true, Message: cancelled})
		}
	}
}

// wireSubscribe is a Consumer's subscription stream over hermes-wire:
// the first request (open) SUBSCRIBEs, the others become CREDIT, ACK,
// NACK and COMMIT frames; what the node sends comes back as the gRPC
// API's responses. Commits and the closing UNSUBSCRIBE run in order on
// a goroutine of their own, so a commit's wait holds up no credit.
type wireSubscribe struct {
	w   *wireConn
	ctx context.Context
	sub *wire.Subscription // set by the open request
	// leave ends sub once: at CloseSend, or when ctx ends (the Consumer
	// gave the stream up; the connection, shared, stays).
	leave sync.Once

	in *inbox[*hermesv1.SubscribeResponse]

	orderly chan func() // commits and the unsubscribe, in order
}

func (s *wireSubscribe) Send(req *hermesv1.SubscribeRequest) error {
	if open := req.GetOpen(); open != nil {
		if err := s.open(open); err != nil {
			s.in.end(err)
			return err
		}
		return nil
	}
	if s.sub == nil {
		return &Error{Code: CodeInvalidArgument, Message: "hermes-wire: a subscription's first request opens it"}
	}
	var err error
	switch k := req.GetKind().(type) {
	case *hermesv1.SubscribeRequest_Credit:
		err = s.sub.Grant(int(k.Credit.GetRecords()), int(k.Credit.GetBytes()))
	case *hermesv1.SubscribeRequest_Heartbeat:
		err = s.sub.Grant(0, 0) // any frame of the subscription keeps its member alive
	case *hermesv1.SubscribeRequest_Ack:
		err = s.acks(k.Ack.GetRecords(), s.sub.Ack)
	case *hermesv1.SubscribeRequest_Nack:
		err = s.acks(k.Nack.GetRecords(), s.sub.Nack)
	case *hermesv1.SubscribeRequest_Commit:
		offs := k.Commit.GetOffsets()
		select {
		case s.orderly <- func() { s.commit(offs) }:
		case <-s.ctx.Done(): // runOrderly is gone: the commit is lost with the stream
			err = &Error{Code: CodeUnavailable, Retriable: true, Message: "subscription cancelled"}
		}
	default:
		err = &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("hermes-wire: no frame for a %T request", k)}
	}
	if err != nil {
		err = wireErr(err)
		s.in.end(err)
	}
	return err
}

// open SUBSCRIBEs as o asks.
func (s *wireSubscribe) open(o *hermesv1.SubscribeOptions) error {
	switch {
	case o.GetDeadLetterTopic() != "" && o.GetDeadLetterTopic() != o.GetTopic()+".dlq":
		return &Error{Code: CodeInvalidArgument, Message: "hermes-wire's dead-letter topic is always <topic>.dlq: subscribe over gRPC for another"}
	case o.GetMaxAckPending() != 0:
		return &Error{Code: CodeInvalidArgument, Message: "hermes-wire has no bound on unacknowledged records (WithMaxAckPending): subscribe over gRPC for one"}
	case len(o.GetGroup()) > wire.MaxName: // a malformed frame would close the shared connection
		return &Error{Code: CodeInvalidTopicName, Message: fmt.Sprintf("invalid name: group name must be 1 to %d characters, got %d", wire.MaxName, len(o.GetGroup()))}
	case len(o.GetClientId()) > wire.MaxClientName:
		return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("client id of %d bytes; at most %d", len(o.GetClientId()), wire.MaxClientName)}
	}
	wc, id, err := s.w.topic(s.ctx, o.GetTopic())
	if err != nil {
		return err
	}
	wo := wire.SubscribeOptions{Topic: id, Group: o.GetGroup(), ClientID: o.GetClientId(), Partitions: o.GetPartitions(),
		Performance: o.GetIncludePerformance(), Packed: o.GetPacked(),
		Credit: int(o.GetCreditRecords()), CreditBytes: int(o.GetCreditBytes()),
		SessionTimeoutMs: uint32(o.GetSessionTimeoutMs()), AckWaitMs: uint32(o.GetAckWaitMs()), MaxDeliveries: uint32(o.GetMaxDeliveries()),
		ManualCredit: true, RawBatches: true, Handler: s.delivered, OnEnd: s.ended}
	switch p := o.GetStart().GetPosition().(type) {
	case *hermesv1.StartPosition_Earliest:
		wo.Start = wire.StartEarliest
	case *hermesv1.StartPosition_Offset:
		wo.Start, wo.StartValue = wire.StartOffset, p.Offset
	case *hermesv1.StartPosition_TimestampUnixNano:
		wo.Start, wo.StartValue = wire.StartTimestamp, p.TimestampUnixNano
	default:
		wo.Start = wire.StartLatest
	}
	switch o.GetAckMode() {
	case hermesv1.AckMode_ACK_MODE_AUTO:
		wo.AckMode = 1
	case hermesv1.AckMode_ACK_MODE_PER_MESSAGE:
		wo.AckMode = 2
	}
	sub, err := wc.Subscribe(s.ctx, wo)
	if err != nil {
		return wireErr(err)
	}
	s.sub = sub
	s.orderly = make(chan func(), maxPendingCommits+1)
	go s.runOrderly()
	context.AfterFunc(s.ctx, func() {
		ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
		defer cancel()
		s.unsubscribe(ctx)
	})
	s.in.push(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Subscribed{Subscribed: &hermesv1.Subscribed{
		MemberId: sub.MemberID, SessionTimeoutMs: int64(sub.SessionTimeoutMs)}}})
	return nil
}

// acks sends ACK or NACK frames, one per partition.
func (s *wireSubscribe) acks(offs []*hermesv1.PartitionOffset, send func(int32, []int64) error) error {
	byPart := map[int32][]int64{}
	var order []int32
	for _, o := range offs {
		if _, ok := byPart[o.GetPartition()]; !ok {
			order = append(order, o.GetPartition())
		}
		byPart[o.GetPartition()] = append(byPart[o.GetPartition()], o.GetOffset())
	}
	for _, p := range order {
		if err := send(p, byPart[p]); err != nil {
			return err
		}
	}
	return nil
}

// runOrderly runs commits and the unsubscribe one after the other.
func (s *wireSubscribe) runOrderly() {
	for {
		select {
		case f := <-s.orderly:
			f()
		case <-s.ctx.Done():
			return
		}
	}
}

// commit sends a COMMIT and queues its answer as a CommitResult.
func (s *wireSubscribe) commit(offs []*hermesv1.PartitionOffset) {
	m := make(map[int32]int64, len(offs))
	for _, o := range offs {
		m[o.GetPartition()] = o.GetOffset()
	}
	res := &hermesv1.CommitResult{Offsets: offs}
	var we *wire.Error
	if err := s.sub.Commit(s.ctx, m); err != nil {
		if !errors.As(err, &we) || we.Fatal {
			s.in.end(wireErr(err)) // the answer is lost with the subscription
			return
		}
		res.Error = errorInfo(we)
	}
	s.in.push(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Commit{Commit: res}})
}

// CloseSend ends the subscription after the commits sent before it (a
// group member leaves its group); Recv then returns what is left and
// io.EOF.
func (s *wireSubscribe) CloseSend() error {
	if s.sub == nil {
		s.in.end(io.EOF)
		return nil
	}
	select {
	case s.orderly <- func() {
		s.unsubscribe(s.ctx)
		s.in.end(io.EOF)
	}:
	case <-s.ctx.Done():
	}
	return nil
}

// unsubscribeTimeout bounds the UNSUBSCRIBE of a subscription given up.
const unsubscribeTimeout = 5 * time.Second

// unsubscribe ends the subscription at the node, once.
func (s *wireSubscribe) unsubscribe(ctx context.Context) {
	s.leave.Do(func() { s.sub.Close(ctx) })
}

// delivered takes a delivery (on the connection's reader: it must not
// block).
func (s *wireSubscribe) delivered(d *wire.Delivery) {
	if d.Assignment != nil {
		s.in.push(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Assignment{Assignment: &hermesv1.Assignment{
			Partitions: d.Assignment, Generation: d.Generation}}})
		return
	}
	ds := &hermesv1.Deliveries{Missed: d.Missed}
	if d.Mode == wire.ModePerformance {
		// Ring records carry their mode, which a batch cannot.
		for _, b := range d.Batches {
			recs, err := record.DecodeRecords(nil, b)
			if err != nil {
				s.in.end(&Error{Code: CodeCorruptBatch, Message: fmt.Sprintf("partition %d: %v", d.Partition, err)})
				return
			}
			d.Records = append(d.Records, recs...)
			for range recs {
				d.DeliveryCounts = append(d.DeliveryCounts, 0)
			}
		}
		d.Batches = nil
	}
	for _, b := range d.Batches {
		ds.Batches = append(ds.Batches, &hermesv1.RecordBatch{Partition: d.Partition, Data: b})
	}
	// One allocation for the delivery's records, one for their headers.
	prs := make([]hermesv1.Record, len(d.Records))
	ds.Records = make([]*hermesv1.Record, len(d.Records))
	var phs []hermesv1.Header
	for i := range d.Records {
		r, pr := &d.Records[i], &prs[i]
		pr.MessageId, pr.Key, pr.Payload, pr.TimestampUnixNano = r.MessageID[:], r.Key, r.Payload, r.Timestamp
		pr.Partition, pr.Offset, pr.Mode, pr.DeliveryCount = d.Partition, r.Offset, hermesv1.DeliveryMode(d.Mode), uint32(d.DeliveryCounts[i])
		if len(r.Headers) > 0 {
			if phs == nil {
				n := 0
				for j := i; j < len(d.Records); j++ {
					n += len(d.Records[j].Headers)
				}
				phs = make([]hermesv1.Header, 0, n)
			}
			pr.Headers = make([]*hermesv1.Header, len(r.Headers))
			for j, h := range r.Headers {
				phs = append(phs, hermesv1.Header{Key: h.Key, Value: h.Value})
				pr.Headers[j] = &phs[len(phs)-1]
			}
		}
		ds.Records[i] = pr
	}
	if len(ds.Batches) == 0 && len(ds.Records) == 0 && ds.Missed == 0 {
		return
	}
	s.in.push(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Deliveries{Deliveries: ds}})
}

// ended is the subscription's end: the node's SUB_END, the connection
// failing, or Close.
func (s *wireSubscribe) ended(err error) {
	if errors.Is(err, wire.ErrClosed) {
		err = &Error{Code: CodeUnavailable, Retriable: true, Message: "hermes-wire connection closed"}
	}
	s.in.end(wireErr(err))
}

// Recv returns the next response, or why the subscription ended.
func (s *wireSubscribe) Recv() (*hermesv1.SubscribeResponse, error) {
	return s.in.next(s.ctx, nil, "subscription cancelled")
}
