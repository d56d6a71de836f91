package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Options configure a Client.
type Options struct {
	// ClientName names the client in the node's logs.
	ClientName string
	// User and Password, or Token, authenticate the connection (or the
	// certificate of TLS, when it has one).
	User, Password string
	Token          string
	// TLS, when set, connects with TLS.
	TLS *tls.Config
	// DialTimeout bounds connecting and the handshake (default 10 s).
	DialTimeout time.Duration
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("hermes-wire: connection closed")

// Client is one hermes-wire connection. It is safe for concurrent use:
// requests are pipelined, and answers matched to them by correlation id.
//
// A frame is written at once, on the caller's goroutine, while the
// connection is idle (the lowest latency); while more than 8 publishes
// are unanswered, publishes leave their frames to the client's flusher
// goroutine, so the frames published during one write go out together in
// the next (the throughput of a loaded connection). Publishing and
// acknowledgements allocate nothing; a delivery costs one allocation for
// its records' bytes.
type Client struct {
	nc net.Conn
	// NodeID, Principal and Server are what the handshake said;
	// GRPCAddr the node's gRPC address, when it told it
	// (CapGRPCAddress).
	NodeID    uint64
	Principal string
	Server    string
	GRPCAddr  string
	maxFrame  int
	caps      uint32 // the capabilities the server accepted

	corr     atomic.Uint64
	inflight chan struct{}

	// Writing: callers append frames to wbuf; one of them at a time
	// (writing) writes what has gathered, so concurrent publishes share
	// system calls.
	wmu     sync.Mutex
	wbuf    []byte
	spare   []byte
	writing bool
	// flushing: the flusher goroutine was asked to write (flush).
	flushing bool
	flush    chan struct{}

	mu      sync.Mutex
	pending map[uint64]waiter
	subs    map[uint32]*Subscription
	topics  map[string]Topic
	nextSub uint32
	err     error // why the connection ended
	done    chan struct{}
}

// waiter is what waits for the answer of a request: a publish's done, or
// another request's answer (which gets a copy of the body).
type waiter struct {
	publish func(Ack, error)
	answer  func(Header, []byte, error)
}

func (w waiter) fail(err error) {
	if w.publish != nil {
		w.publish(Ack{}, err)
	} else {
		w.answer(Header{}, nil, err)
	}
}

// Topic is an opened topic.
type Topic struct {
	ID          uint32
	Name        string
	Partitions  int
	DefaultMode uint8
}

// Ack is a PUBLISH_ACK: records of Partition got BaseOffset,
// BaseOffset+1, ...; with records of several partitions, Partition is -1
// and Places says where each went.
type Ack struct {
	Partition  int32
	Mode       uint8
	BaseOffset int64
	Count      int
	Places     []Place
	// Leader is the hermes-wire address of the partition's leader when
	// the node relayed the records to it: where the partition's next
	// publishes can go, saving the relay's hop ("" otherwise).
	Leader string
}

// Place is where one record went.
type Place struct {
	Partition int32
	Offset    int64
}

// Dial connects to a node's hermes-wire listener and performs the
// handshake.
func Dial(ctx context.Context, addr string, o Options) (*Client, error) {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &Client{nc: nc, inflight: make(chan struct{}, MaxInFlight), pending: map[uint64]waiter{},
		subs: map[uint32]*Subscription{}, topics: map[string]Topic{}, done: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	if err := c.hello(br, o); err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	c.flush = make(chan struct{}, 1)
	go c.readLoop(br)
	go c.flusher()
	return c, nil
}

func (c *Client) hello(br *bufio.Reader, o Options) error {
	b, at := BeginFrame(nil, FrameHello, 0, 0)
	b = append(b, Magic[:]...)
	b = AppendU16(b, Version)
	b = AppendU16(b, Version)
	b = AppendU32(b, CapGRPCAddress|CapClientID|CapLeader)
	b = AppendStr(b, o.ClientName)
	switch {
	case o.Token != "":
		b = append(b, AuthToken)
		b = AppendStr(b, o.Token)
	case o.User != "":
		b = append(b, AuthPassword)
		b = AppendStr(b, o.User)
		b = AppendStr(b, o.Password)
	default:
		b = append(b, AuthNone)
	}
	if _, err := c.nc.Write(FinishFrame(b, at)); err != nil {
		return err
	}
	h, body, err := readFrame(br, MaxFrame, nil)
	if err != nil {
		return fmt.Errorf("hermes-wire handshake: %w", err)
	}
	d := NewDecoder(body)
	switch h.Type {
	case FrameError:
		e := d.ErrorBody()
		e.Fatal = h.Flags&FlagFatal != 0
		return e
	case FrameHelloOK:
	default:
		return fmt.Errorf("hermes-wire handshake: answered with frame type %#02x", h.Type)
	}
	if v := d.U16("version"); v != Version && d.Err() == nil {
		return fmt.Errorf("hermes-wire handshake: the server chose version %d", v)
	}
	d.Zero(2, "reserved")
	caps := d.U32("capabilities")
	c.caps = caps
	c.NodeID = d.U64("node id")
	c.maxFrame = int(d.U32("max frame"))
	if n := int(d.U32("max in flight")); n > 0 && n < MaxInFlight {
		c.inflight = make(chan struct{}, n)
	}
	c.Principal = string(d.Str(1<<16-1, "principal"))
	c.Server = string(d.Str(1<<16-1, "server"))
	if caps&CapGRPCAddress != 0 {
		c.GRPCAddr = string(d.Str(1<<16-1, "gRPC address"))
	}
	return d.End()
}

// readFrame reads one frame of at most max bytes, its body into buf
// when it fits.
func readFrame(br *bufio.Reader, max int, buf []byte) (Header, []byte, error) {
	hb, err := br.Peek(HeaderSize)
	if err != nil {
		if len(hb) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, nil, err
	}
	h, err := ParseHeader(hb)
	if err != nil {
		return h, nil, err
	}
	br.Discard(HeaderSize)
	if int(h.Length)+4 > max {
		return h, nil, fmt.Errorf("%w: frame of %d bytes; at most %d", errMalformed, h.Length+4, max)
	}
	body := buf[:0]
	if cap(body) < h.BodyLen() {
		body = make([]byte, h.BodyLen())
	}
	body = body[:h.BodyLen()]
	if _, err := io.ReadFull(br, body); err != nil {
		return h, nil, err
	}
	return h, body, nil
}

// readLoop reads frames until the connection ends. Bodies are read into
// one reused buffer: what keeps a body past its handling copies it.
func (c *Client) readLoop(br *bufio.Reader) {
	var err error
	buf := make([]byte, 64<<10)
	for {
		var h Header
		var body []byte
		if h, body, err = readFrame(br, c.maxFrame+HeaderSize, buf); err != nil {
			break
		}
		if cap(body) > cap(buf) && cap(body) <= 1<<20 {
			buf = body // keep the larger buffer, up to 1 MiB
		}
		if err = c.handle(h, body); err != nil {
			break
		}
	}
	c.fail(err)
}

// fail ends the connection with err and fails what waits on it.
func (c *Client) fail(err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = ErrClosed
	}
	c.nc.Close()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	subs := c.subs
	c.pending, c.subs = map[uint64]waiter{}, map[uint32]*Subscription{}
	c.mu.Unlock()
	close(c.done)
	for _, w := range pending {
		w.fail(err)
	}
	for _, s := range subs {
		s.end(err)
	}
}

func (c *Client) handle(h Header, body []byte) error {
	switch h.Type {
	case FrameDeliver, FrameAssignment, FrameSubEnd:
		if h.Type == FrameDeliver {
			// The records are kept past this frame: they get memory of
			// their own (one allocation per delivery).
			body = append([]byte(nil), body...)
		}
		d := NewDecoder(body)
		id := d.U32("sub id")
		c.mu.Lock()
		s := c.subs[id]
		if h.Type == FrameSubEnd {
			delete(c.subs, id)
		}
		c.mu.Unlock()
		if s == nil {
			return nil // unsubscribed meanwhile
		}
		return s.push(h.Type, &d)
	}
	c.mu.Lock()
	w, ok := c.pending[h.Corr]
	delete(c.pending, h.Corr)
	c.mu.Unlock()
	if ok && w.publish != nil {
		<-c.inflight // answered
	}
	if h.Type == FrameError {
		d := NewDecoder(body)
		e := d.ErrorBody()
		e.Fatal = h.Flags&FlagFatal != 0
		if ok {
			w.fail(e)
		}
		if e.Fatal {
			return e
		}
		return nil
	}
	switch {
	case !ok:
		// An answer to a request no one waits for any more.
	case w.publish != nil:
		w.publish(parseAck(h, body, c.caps))
	default:
		w.answer(h, append([]byte(nil), body...), nil)
	}
	return nil
}

// send writes a frame; answer, if not nil, is called with the answer
// (from the reader goroutine) or the connection's failure.
func (c *Client) send(frame []byte, corr uint64, answer func(Header, []byte, error)) error {
	if answer != nil {
		if err := c.await(corr, waiter{answer: answer}); err != nil {
			return err
		}
	}
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, frame...)
	return c.write()
}

// await registers w for the answer to corr.
func (c *Client) await(corr uint64, w waiter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.pending[corr] = w
	return nil
}

// write writes wbuf unless another caller is writing (it takes what was
// appended along). Lock: wmu held; write releases it.
func (c *Client) write() error {
	if c.writing {
		c.wmu.Unlock()
		return nil // the writer takes it along
	}
	c.writing = true
	for len(c.wbuf) > 0 {
		buf := c.wbuf
		c.wbuf = c.spare[:0] // others append here meanwhile
		c.wmu.Unlock()
		_, err := c.nc.Write(buf)
		c.wmu.Lock()
		c.spare = buf[:0]
		if err != nil {
			c.writing = false
			c.wmu.Unlock()
			c.fail(err)
			return err
		}
	}
	c.writing = false
	c.wmu.Unlock()
	return nil
}

// request sends a frame and waits for its answer.
func (c *Client) request(ctx context.Context, frame []byte, corr uint64) (Header, []byte, error) {
	type answer struct {
		h    Header
		body []byte
		err  error
	}
	ch := make(chan answer, 1)
	if err := c.send(frame, corr, func(h Header, b []byte, err error) { ch <- answer{h, b, err} }); err != nil {
		return Header{}, nil, err
	}
	select {
	case a := <-ch:
		return a.h, a.body, a.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, corr)
		c.mu.Unlock()
		return Header{}, nil, ctx.Err()
	}
}

func (c *Client) nextCorr() uint64 { return c.corr.Add(1) }

// Ping measures a round trip to the node.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	corr := c.nextCorr()
	b, at := BeginFrame(nil, FramePing, 0, corr)
	start := time.Now()
	h, _, err := c.request(ctx, FinishFrame(AppendU64(b, uint64(start.UnixNano())), at), corr)
	if err == nil && h.Type != FramePong {
		err = fmt.Errorf("hermes-wire: PING answered with frame type %#02x", h.Type)
	}
	return time.Since(start), err
}

// OpenTopic opens a topic, to publish to it or subscribe to it by id.
// Opening it again refreshes its partition count.
func (c *Client) OpenTopic(ctx context.Context, name string) (Topic, error) {
	corr := c.nextCorr()
	b, at := BeginFrame(nil, FrameOpenTopic, 0, corr)
	h, body, err := c.request(ctx, FinishFrame(AppendStr(b, name), at), corr)
	if err != nil {
		return Topic{}, err
	}
	if h.Type != FrameTopic {
		return Topic{}, fmt.Errorf("hermes-wire: OPEN_TOPIC answered with frame type %#02x", h.Type)
	}
	d := NewDecoder(body)
	t := Topic{Name: name, ID: d.U32("topic id"), Partitions: int(d.U32("partitions")), DefaultMode: d.U8("mode")}
	d.Zero(3, "reserved")
	if err := d.End(); err != nil {
		return Topic{}, err
	}
	c.mu.Lock()
	c.topics[name] = t
	c.mu.Unlock()
	return t, nil
}

// Opened returns the topic of that name as it was last opened on this
// connection.
func (c *Client) Opened(name string) (Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	return t, ok
}

// AppendPublish appends a PUBLISH frame of records to b.
func AppendPublish(b []byte, corr uint64, topicID uint32, partition int32, mode uint8, recs []record.Record) []byte {
	b, at := BeginFrame(b, FramePublish, 0, corr)
	b = AppendU32(b, topicID)
	b = AppendU32(b, uint32(partition))
	b = append(b, mode, FormatRecords, 0, 0)
	b = AppendU32(b, uint32(len(recs)))
	for i := range recs {
		b = AppendRecord(b, &recs[i])
	}
	return FinishFrame(b, at)
}

// AppendPublishBatch appends a PUBLISH frame of a packed batch to b.
func AppendPublishBatch(b []byte, corr uint64, topicID uint32, partition int32, mode uint8, batch []byte) []byte {
	b, at := BeginFrame(b, FramePublish, 0, corr)
	b = AppendU32(b, topicID)
	b = AppendU32(b, uint32(partition))
	b = append(b, mode, FormatBatch, 0, 0)
	return FinishFrame(append(b, batch...), at)
}

// Publish publishes records and waits for their acknowledgement in
// their mode.
func (c *Client) Publish(ctx context.Context, topicID uint32, partition int32, mode uint8, recs []record.Record) (Ack, error) {
	type answer struct {
		ack Ack
		err error
	}
	ch := make(chan answer, 1)
	if err := c.PublishAsync(ctx, topicID, partition, mode, recs, func(a Ack, err error) { ch <- answer{a, err} }); err != nil {
		return Ack{}, err
	}
	select {
	case a := <-ch:
		return a.ack, a.err
	case <-ctx.Done():
		return Ack{}, ctx.Err()
	}
}

// PublishAsync sends a PUBLISH and calls done, from the connection's
// reader goroutine, with its answer. It waits (until ctx ends) while
// MaxInFlight publishes are unanswered. The frame is encoded before it
// returns: recs may be reused at once. It allocates nothing of its own.
func (c *Client) PublishAsync(ctx context.Context, topicID uint32, partition int32, mode uint8, recs []record.Record, done func(Ack, error)) error {
	corr, err := c.beginPublish(ctx, done)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	c.wbuf = AppendPublish(c.wbuf, corr, topicID, partition, mode, recs)
	return c.writeOrCoalesce()
}

// PublishBatchAsync is PublishAsync of a packed batch (pkg/record).
func (c *Client) PublishBatchAsync(ctx context.Context, topicID uint32, partition int32, mode uint8, batch []byte, done func(Ack, error)) error {
	corr, err := c.beginPublish(ctx, done)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	c.wbuf = AppendPublishBatch(c.wbuf, corr, topicID, partition, mode, batch)
	return c.writeOrCoalesce()
}

// coalesceAfter is how many unanswered publishes make the connection
// busy: past it, a publish leaves its frame to the flusher goroutine, so
// that frames published while it writes go out together (one system call
// for many records under load; at once, on the caller's goroutine, when
// the connection is idle).
const coalesceAfter = 8

// writeOrCoalesce writes a publish's frame now, or leaves it to the
// flusher when the connection is busy. Lock: wmu held; it releases it.
func (c *Client) writeOrCoalesce() error {
	if len(c.inflight) <= coalesceAfter || c.writing {
		return c.write()
	}
	kick := !c.flushing
	c.flushing = true
	c.wmu.Unlock()
	if kick {
		select {
		case c.flush <- struct{}{}:
		default:
		}
	}
	return nil
}

// flusher writes what writeOrCoalesce left, until the connection ends.
func (c *Client) flusher() {
	for {
		select {
		case <-c.flush:
		case <-c.done:
			return
		}
		c.wmu.Lock()
		c.flushing = false
		c.write() // a failure fails the connection
	}
}

// beginPublish takes an in-flight slot and registers done.
func (c *Client) beginPublish(ctx context.Context, done func(Ack, error)) (uint64, error) {
	select {
	case c.inflight <- struct{}{}: // a slot free: no three-way select
	default:
		select {
		case c.inflight <- struct{}{}:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-c.done:
			return 0, c.closedErr()
		}
	}
	corr := c.nextCorr()
	if err := c.await(corr, waiter{publish: done}); err != nil {
		<-c.inflight
		return 0, err
	}
	return corr, nil
}

func parseAck(h Header, body []byte, caps uint32) (Ack, error) {
	if h.Type != FramePublishAck {
		return Ack{}, fmt.Errorf("hermes-wire: PUBLISH answered with frame type %#02x", h.Type)
	}
	d := NewDecoder(body)
	a := Ack{Partition: d.I32("partition"), Mode: d.U8("mode")}
	d.Zero(3, "reserved")
	a.BaseOffset = d.I64("base offset")
	a.Count = int(d.U32("count"))
	if a.Partition == -1 && d.Err() == nil {
		// With CapLeader, the leader hint follows the places.
		if n := d.Len(); a.Count*12 > n || caps&CapLeader == 0 && a.Count*12 != n {
			d.Fail("%d places in %d bytes", a.Count, d.Len())
		} else {
			a.Places = make([]Place, a.Count)
			for i := range a.Places {
				a.Places[i] = Place{Partition: d.I32("partition"), Offset: d.I64("offset")}
			}
		}
	}
	if caps&CapLeader != 0 {
		a.Leader = string(d.Str(1<<16-1, "leader"))
	}
	return a, d.End()
}

func (c *Client) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it is open).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; its subscriptions end.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	return nil
}
