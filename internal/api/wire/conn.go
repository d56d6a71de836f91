package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// readBufSize is a connection's read buffer: frames up to it are handled
// in place, larger ones are copied out.
const readBufSize = 64 << 10

// maxCommits bounds the COMMITs of a connection waiting for replication;
// past it the reader waits for one to finish.
const maxCommits = 16

// conn is one client connection.
type conn struct {
	s    *Server
	nc   net.Conn
	addr string
	log  *slog.Logger
	// raw is the socket for non-blocking writes (nil over TLS).
	raw syscall.RawConn

	// ctx carries the principal once the handshake is done; it ends with
	// the connection.
	ctx    context.Context
	cancel context.CancelFunc

	// The reader's own state (only its goroutine touches it).
	br        *bufio.Reader
	topics    []string // topic id i+1 names topics[i]
	topicIDs  map[string]uint32
	recs      []record.Record // decoded records, reused
	dirty     []*conn         // connections to flush after this read batch
	out       []byte          // frames the reader builds before queueing
	inflight  chan struct{}   // a token per unanswered PUBLISH
	commits   chan struct{}   // a token per COMMIT waiting for replication
	subsMu    sync.Mutex      // guards subs: subscriptions end on their own goroutines
	subs      map[uint32]*sub //
	subsWG    sync.WaitGroup
	handshake bool
	// caps are the capabilities accepted in the handshake; clientName
	// the HELLO's.
	caps       uint32
	clientName string

	// The output buffer: frames wait in wbuf until written, by the
	// writer goroutine or by a reader flushing without blocking. At most
	// one goroutine writes at a time (writing).
	wmu     sync.Mutex
	wbuf    []byte
	spare   []byte
	writing bool
	wclosed bool
	wake    chan struct{} // to the writer goroutine
	drained chan struct{} // from the writer goroutine, when wbuf empties
	// live is the DELIVER of performance records last appended to wbuf,
	// which Live extends while it is the last frame there (see Live).
	live liveFrame
	// rawWrite writes wpend without blocking into wn, werr; made once so
	// flushing allocates nothing.
	rawWrite func(fd uintptr) bool
	wpend    []byte
	wn       int
	werr     error
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s: s, nc: nc, addr: nc.RemoteAddr().String(),
		topicIDs: map[string]uint32{}, subs: map[uint32]*sub{},
		inflight: make(chan struct{}, wire.MaxInFlight), commits: make(chan struct{}, maxCommits),
		wake: make(chan struct{}, 1), drained: make(chan struct{}, 1),
		wbuf: make([]byte, 0, 64<<10), spare: make([]byte, 0, 64<<10),
	}
	c.log = s.log.With("client", c.addr)
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		if raw, err := tc.SyscallConn(); err == nil {
			c.raw = raw
			c.rawWrite = func(fd uintptr) bool {
				c.wn, c.werr = syscall.Write(int(fd), c.wpend)
				return true // never wait: a full socket is the writer goroutine's
			}
		}
	}
	return c
}

// serve runs the connection: the handshake, then frames until it fails.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	defer func() {
		c.cancel()
		c.closeSubs()
		c.wmu.Lock()
		c.wclosed = true
		c.wmu.Unlock()
		c.kick()
		<-writerDone
		c.nc.Close()
	}()
	c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := tc.HandshakeContext(c.ctx); err != nil {
			c.log.Debug("TLS handshake failed", "err", err)
			return
		}
	}
	var src io.Reader = c.nc
	if c.s.cfg.Spin && c.raw != nil {
		src = &spinReader{c: c}
	}
	c.br = bufio.NewReaderSize(src, readBufSize)
	for {
		if err := c.readFrame(); err != nil {
			var fe *fatalError
			if errors.As(err, &fe) {
				c.log.Info("closing connection", "err", fe.err.Message)
				c.queueError(fe.corr, fe.err)
				c.flushDirty()
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("connection ended", "err", err)
			}
			return
		}
		// Flush once no complete frame is buffered: one write per
		// connection per read batch.
		if !c.frameBuffered() {
			c.flushDirty()
			c.awaitBacklog()
		}
	}
}

// fatalError ends the connection after an ERROR frame.
type fatalError struct {
	corr uint64
	err  *wire.Error
}

func (e *fatalError) Error() string { return e.err.Error() }

func protocolError(corr uint64, format string, args ...any) error {
	return &fatalError{corr: corr, err: &wire.Error{Code: wire.CodeProtocolError, Message: fmt.Sprintf(format, args...), Fatal: true}}
}

// frameBuffered reports whether a whole frame is in the read buffer.
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < wire.HeaderSize {
		return false
	}
	b, _ := c.br.Peek(4)
	return n >= 4+int(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24)
}

// readFrame reads and handles one frame.
func (c *conn) readFrame() error {
	hb, err := c.br.Peek(wire.HeaderSize)
	if err != nil {
		if len(hb) > 0 && errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	h, err := wire.ParseHeader(hb)
	if err != nil {
		return protocolError(0, "%v", err)
	}
	limit := wire.MaxFrame
	if !c.handshake {
		limit = wire.MaxHandshakeFrame
	}
	if int(h.Length) > limit-4 {
		return protocolError(h.Corr, "frame of %d bytes; at most %d", h.Length+4, limit)
	}
	if h.Flags != 0 {
		return protocolError(h.Corr, "frame flags %#02x: clients send 0", h.Flags)
	}
	total := 4 + int(h.Length)
	var body []byte
	if total <= readBufSize {
		frame, err := c.br.Peek(total)
		if err != nil {
			return err
		}
		body = frame[wire.HeaderSize:]
		defer c.br.Discard(total)
	} else {
		// Larger than the read buffer: a packed batch, up to MaxFrame;
		// not kept past the frame, so an idle connection holds no such
		// buffer.
		c.br.Discard(wire.HeaderSize)
		body = make([]byte, h.BodyLen())
		if _, err := io.ReadFull(c.br, body); err != nil {
			return err
		}
	}
	if !c.handshake {
		if h.Type != wire.FrameHello {
			return protocolError(h.Corr, "the first frame must be HELLO, not type %#02x", h.Type)
		}
		return c.hello(h, body)
	}
	if c.s.reqs == nil {
		return c.dispatch(h, body)
	}
	start := time.Now()
	derr := c.dispatch(h, body)
	c.s.reqs.done(h.Type, start, derr)
	return derr
}

// dispatch handles one frame after the handshake.
func (c *conn) dispatch(h wire.Header, body []byte) error {
	d := wire.NewDecoder(body)
	var err error
	switch h.Type {
	case wire.FramePing:
		err = c.ping(h, body)
	case wire.FrameOpenTopic:
		err = c.openTopic(h, &d)
	case wire.FramePublish:
		err = c.publish(h, &d)
	case wire.FrameSubscribe:
		err = c.subscribe(h, &d)
	case wire.FrameCredit:
		err = c.credit(h, &d)
	case wire.FrameAck, wire.FrameNack:
		err = c.ack(h, &d)
	case wire.FrameCommit:
		err = c.commit(h, &d)
	case wire.FrameUnsubscribe:
		err = c.unsubscribe(h, &d)
	case wire.FrameHello:
		return protocolError(h.Corr, "HELLO twice")
	default:
		return protocolError(h.Corr, "unknown frame type %#02x", h.Type)
	}
	if err != nil && wire.IsMalformed(err) {
		return protocolError(h.Corr, "frame type %#02x: %v", h.Type, err)
	}
	return err
}

// hello performs the handshake.
func (c *conn) hello(h wire.Header, body []byte) error {
	d := wire.NewDecoder(body)
	magic := d.Take(4, "magic")
	minV, maxV := d.U16("min version"), d.U16("max version")
	caps := d.U32("capabilities") & (wire.CapGRPCAddress | wire.CapClientID | wire.CapLeader) // the ones this server knows
	if c.s.cfg.GRPCAddress == "" {
		caps &^= wire.CapGRPCAddress
	}
	name := d.Str(wire.MaxClientName, "client name")
	method := d.U8("auth")
	creds := broker.Credentials{Addr: c.addr}
	switch method {
	case wire.AuthNone:
	case wire.AuthPassword:
		creds.User = string(d.Str(wire.MaxSecret, "user"))
		creds.Password = string(d.Str(wire.MaxSecret, "password"))
	case wire.AuthToken:
		creds.Token = string(d.Str(wire.MaxSecret, "token"))
	default:
		d.Fail("unknown auth method %d", method)
	}
	if err := d.End(); err != nil {
		return protocolError(h.Corr, "HELLO: %v", err)
	}
	if [4]byte(magic) != wire.Magic {
		return protocolError(h.Corr, "HELLO: magic %q is not %q", magic, wire.Magic[:])
	}
	if minV > wire.Version || maxV < wire.Version || minV > maxV {
		return &fatalError{corr: h.Corr, err: &wire.Error{Code: wire.CodeUnsupportedVersion, Fatal: true,
			Message: fmt.Sprintf("the client speaks versions %d to %d; this server speaks %d", minV, maxV, wire.Version)}}
	}
	if creds.User == "" && creds.Token == "" {
		if tc, ok := c.nc.(*tls.Conn); ok {
			if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 {
				creds.CertName = st.VerifiedChains[0][0].Subject.CommonName
			}
		}
	}
	p := broker.Principal{Addr: c.addr}
	if creds.User != "" || creds.Token != "" || creds.CertName != "" {
		var err error
		if p, err = c.s.api.Authenticate(c.ctx, creds); err != nil {
			return &fatalError{corr: h.Corr, err: c.s.toWire(err, true)}
		}
	} else if c.s.api.AuthRequired() {
		return &fatalError{corr: h.Corr, err: &wire.Error{Code: wire.CodeUnauthenticated, Fatal: true,
			Message: "authentication required: HELLO with a password or a token, or a TLS client certificate"}}
	}
	c.ctx = broker.WithPrincipal(c.ctx, p)
	c.handshake = true
	c.caps, c.clientName = caps, string(name)
	c.nc.SetDeadline(time.Time{})
	c.log = c.log.With("client_name", string(name), "principal", p.Name)
	b, at := wire.BeginFrame(c.out[:0], wire.FrameHelloOK, 0, h.Corr)
	b = wire.AppendU16(b, wire.Version)
	b = wire.AppendU16(b, 0)
	b = wire.AppendU32(b, caps)
	b = wire.AppendU64(b, c.s.api.NodeID())
	b = wire.AppendU32(b, wire.MaxFrame)
	b = wire.AppendU32(b, wire.MaxInFlight)
	b = wire.AppendStr(b, p.Name)
	b = wire.AppendStr(b, c.s.cfg.ServerName)
	if caps&wire.CapGRPCAddress != 0 {
		b = wire.AppendStr(b, c.s.cfg.GRPCAddress)
	}
	c.out = wire.FinishFrame(b, at)
	c.queue(c.out)
	c.markDirty(c)
	return nil
}

func (c *conn) ping(h wire.Header, body []byte) error {
	if len(body) > wire.MaxPingBody {
		return protocolError(h.Corr, "PING body of %d bytes; at most %d", len(body), wire.MaxPingBody)
	}
	c.subsMu.Lock()
	for _, s := range c.subs {
		s.heartbeat()
	}
	c.subsMu.Unlock()
	b, at := wire.BeginFrame(c.out[:0], wire.FramePong, 0, h.Corr)
	c.out = wire.FinishFrame(append(b, body...), at)
	c.queue(c.out)
	c.markDirty(c)
	return nil
}

func (c *conn) openTopic(h wire.Header, d *wire.Decoder) error {
	name := d.Str(wire.MaxName, "topic")
	if err := d.End(); err != nil {
		return err
	}
	info, err := c.s.api.Topic(c.ctx, string(name))
	if err != nil {
		c.answerError(h.Corr, err)
		return nil
	}
	id, ok := c.topicIDs[info.Name]
	if !ok {
		if len(c.topics) >= wire.MaxTopics {
			c.answerError(h.Corr, broker.Errorf(broker.ErrInvalidArgument, "a connection may open at most %d topics", wire.MaxTopics))
			return nil
		}
		c.topics = append(c.topics, info.Name)
		id = uint32(len(c.topics))
		c.topicIDs[info.Name] = id
	}
	b, at := wire.BeginFrame(c.out[:0], wire.FrameTopic, 0, h.Corr)
	b = wire.AppendU32(b, id)
	b = wire.AppendU32(b, uint32(len(info.Partitions)))
	b = append(b, uint8(info.Config.DefaultMode), 0, 0, 0)
	c.out = wire.FinishFrame(b, at)
	c.queue(c.out)
	c.markDirty(c)
	return nil
}

// topic returns the name of a topic id, or answers the error.
func (c *conn) topic(corr uint64, id uint32) (string, bool) {
	if id == 0 || int(id) > len(c.topics) {
		c.answerError(corr, broker.Errorf(broker.ErrInvalidArgument, "topic id %d was not opened on this connection", id))
		return "", false
	}
	return c.topics[id-1], true
}

// answerError queues an ERROR for the request corr.
func (c *conn) answerError(corr uint64, err error) {
	c.queueError(corr, c.s.toWire(err, false))
	c.markDirty(c)
}

func (c *conn) queueError(corr uint64, e *wire.Error) {
	flags := uint8(0)
	if e.Fatal {
		flags = wire.FlagFatal
	}
	b, at := wire.BeginFrame(nil, wire.FrameError, flags, corr)
	c.queue(wire.FinishFrame(wire.AppendErrorBody(b, e), at))
}

// queue appends a whole frame (or frames) to the output buffer; the
// caller then flushes (markDirty on a reader, kick elsewhere).
func (c *conn) queue(frame []byte) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, frame...)
	c.wmu.Unlock()
}

// markDirty notes, on the reader's goroutine, that d must be flushed at
// the end of this read batch.
func (c *conn) markDirty(d *conn) {
	for _, x := range c.dirty {
		if x == d {
			return
		}
	}
	c.dirty = append(c.dirty, d)
}

// flushDirty flushes the connections marked dirty, without blocking.
func (c *conn) flushDirty() {
	for i, d := range c.dirty {
		d.flushNow()
		c.dirty[i] = nil
	}
	c.dirty = c.dirty[:0]
}

// acquire takes a token of sem (a bound of the connection's); when it
// must wait, it first sends the answers ready, then waits for a token or
// the connection's end: back pressure on the client.
func (c *conn) acquire(sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	c.flushDirty()
	select {
	case sem <- struct{}{}:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// kick asks the writer goroutine to write what is buffered.
func (c *conn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// flushNow writes the output buffer with one non-blocking write, unless
// another goroutine is writing; what the socket does not take is left to
// the writer goroutine.
func (c *conn) flushNow() {
	if c.raw == nil {
		c.kick()
		return
	}
	c.wmu.Lock()
	if c.writing || c.wclosed || len(c.wbuf) == 0 {
		c.wmu.Unlock()
		return
	}
	buf := c.wbuf
	c.wbuf, c.writing = c.spare[:0], true
	c.live = liveFrame{}
	c.wmu.Unlock()
	c.wpend = buf
	err := c.raw.Write(c.rawWrite)
	n, werr := c.wn, c.werr
	c.wpend = nil
	if n < 0 {
		n = 0
	}
	if err == nil && werr != nil && werr != syscall.EAGAIN && werr != syscall.EINTR {
		err = werr
	}
	c.wmu.Lock()
	c.writing = false
	if err != nil {
		c.wclosed = true
		c.wmu.Unlock()
		c.nc.Close()
		c.kick()
		return
	}
	// The writer goroutine left to us what was queued while we wrote
	// (and may be waiting to finish).
	kick := c.wclosed || len(c.wbuf) > 0
	if n < len(buf) {
		// The socket is full: the writer goroutine writes the rest,
		// before what was queued meanwhile.
		queued := c.wbuf
		c.wbuf = append(append(buf[:0], buf[n:]...), queued...)
		c.spare = queued[:0]
		c.live = liveFrame{}
		kick = true
	} else {
		c.spare = buf[:0]
	}
	c.wmu.Unlock()
	if kick {
		c.kick()
	}
}

// writeLoop writes the output buffer whenever kicked, until the
// connection closes.
func (c *conn) writeLoop() {
	for range c.wake {
		for {
			c.wmu.Lock()
			if c.writing {
				c.wmu.Unlock()
				break // the flusher kicks again if it leaves anything
			}
			if len(c.wbuf) == 0 {
				closed := c.wclosed
				c.wmu.Unlock()
				select {
				case c.drained <- struct{}{}:
				default:
				}
				if closed {
					return
				}
				break
			}
			buf := c.wbuf
			c.wbuf, c.writing = c.spare[:0], true
			c.live = liveFrame{}
			c.wmu.Unlock()
			c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			_, err := c.nc.Write(buf)
			c.wmu.Lock()
			c.writing = false
			c.spare = buf[:0]
			if err != nil {
				c.wclosed = true
				c.wbuf = c.wbuf[:0]
				c.live = liveFrame{}
				c.wmu.Unlock()
				c.nc.Close()
				return
			}
			c.wmu.Unlock()
		}
		c.wmu.Lock()
		closed := c.wclosed && len(c.wbuf) == 0
		c.wmu.Unlock()
		if closed {
			return
		}
	}
}

// awaitBacklog stops reading while more than maxOutBacklog bytes wait to
// be written (a client that does not read its answers).
func (c *conn) awaitBacklog() {
	for {
		c.wmu.Lock()
		n := len(c.wbuf)
		c.wmu.Unlock()
		if n <= maxOutBacklog {
			return
		}
		c.kick()
		select {
		case <-c.drained:
		case <-time.After(100 * time.Millisecond):
		case <-c.ctx.Done():
			return
		}
	}
}

// spinReader reads the socket by polling it without blocking, for up to
// spinIdle after the last data, before sleeping in the network poller.
type spinReader struct {
	c    *conn
	p    []byte
	n    int
	err  error
	read func(fd uintptr) bool
}

const spinIdle = 100 * time.Millisecond

func (r *spinReader) Read(p []byte) (int, error) {
	if r.read == nil {
		r.read = func(fd uintptr) bool {
			r.n, r.err = syscall.Read(int(fd), r.p)
			return true
		}
	}
	r.p = p
	start := time.Now()
	for i := 0; ; i++ {
		if err := r.c.raw.Read(r.read); err != nil {
			return 0, err
		}
		if r.n > 0 {
			return r.n, nil
		}
		if r.n == 0 && r.err == nil {
			return 0, io.EOF
		}
		if r.err != syscall.EAGAIN && r.err != syscall.EINTR {
			return 0, r.err
		}
		if i&1023 == 1023 && time.Since(start) > spinIdle {
			return r.c.nc.Read(p)
		}
	}
}
