// Package kafka serves Apache Kafka's wire protocol: unchanged Kafka
// clients produce, fetch, join groups and administer topics on the same
// log every other Hermes API reads and writes.
//
// It is one more adapter on the broker interface (broker.API). Requests
// and responses are franz-go's kmsg types; this package only frames them
// (a size, a request header, the body) and maps them onto the broker.
// Each API key has its own file, named after it; handlers lists them and
// the versions served, which is exactly what ApiVersions advertises.
//
// A connection reads requests one after the other and answers them in
// the order they came (as Kafka does), but it does not wait for one
// request's answer before reading the next: produce requests are handed
// to the broker asynchronously, so a client that pipelines its produce
// requests keeps the partition's group commit busy. At most
// maxInFlightPerConn answers may be outstanding on a connection; past
// that it stops reading (back pressure over TCP).
package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/netserve"
	"github.com/hermes-mq/hermes/internal/reqmetrics"
)

// Config configures the Kafka listener.
type Config struct {
	// Advertise is the host:port clients are told to connect to for this
	// node (Metadata); the listen address when empty.
	Advertise string
	// ClusterID is reported in Metadata and DescribeCluster.
	ClusterID string
	// AutoCreateTopics lets Metadata create the unknown topics a client
	// asks for when the client allows it (allow.auto.create.topics);
	// Kafka's auto.create.topics.enable. Off by default.
	AutoCreateTopics bool
	// MaxRequestBytes bounds one request (Kafka's
	// socket.request.max.bytes); DefaultMaxRequestBytes when zero.
	MaxRequestBytes int32
	// TLS, when set, makes the listener TLS; with ClientCAs set, clients
	// may authenticate with a certificate.
	TLS *tls.Config
	// SASLPlainWithoutTLS allows SASL PLAIN on a plaintext listener
	// (passwords in clear); only tests on loopback want it.
	SASLPlainWithoutTLS bool
	Logger              *slog.Logger
	// Requests, when set, counts and times the requests by API.
	Requests *reqmetrics.Metrics
}

const (
	// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes.
	DefaultMaxRequestBytes = 100 << 20
	// maxInFlightPerConn bounds the requests read from a connection and
	// not answered yet.
	maxInFlightPerConn = 64
	// maxUnauthenticatedRequest bounds requests before authentication
	// (ApiVersions and SASL are small).
	maxUnauthenticatedRequest = 64 << 10
)

// Server serves the Kafka protocol for one node.
type Server struct {
	api    broker.API
	cfg    Config
	log    *slog.Logger
	groups *coordinator
	txns   *txnCoordinator
	pids   *producers
	// synced: per partition, the leader term for which this node's
	// metadata was synced (syncedForTerm).
	syncMu   sync.Mutex
	synced   map[tp]uint64
	sessions *fetchSessions
	ctx      context.Context
	cancel   context.CancelFunc
	ns       netserve.Server
	reqs     *apiMetrics
}

// New returns a server of the Kafka protocol on api.
func New(api broker.API, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "hermes"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{api: api, cfg: cfg, log: cfg.Logger.With("component", "kafka"), ctx: ctx, cancel: cancel}
	s.groups = newCoordinator(s)
	s.txns = newTxnCoordinator(s)
	s.synced = map[tp]uint64{}
	s.pids = newProducers()
	s.sessions = newFetchSessions()
	s.reqs = newAPIMetrics(cfg.Requests)
	return s
}

// Serve accepts connections on ln until Close. It returns nil after
// Close, else the error that stopped it.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	if s.cfg.Advertise == "" {
		s.cfg.Advertise = ln.Addr().String()
	}
	if !s.ns.Go(func() { s.txns.run(s.ctx) }) {
		return nil // closed already
	}
	return s.ns.Serve(ln, func(nc net.Conn) { s.newConn(nc).serve() })
}

// Close stops accepting connections, closes every connection and waits
// for their goroutines.
func (s *Server) Close() error {
	if s.ns.Close() {
		s.cancel()
		s.groups.close()
		s.ns.Wait()
	}
	return nil
}

func splitHostPort(addr string) (string, int32) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// conn is one client connection.
type conn struct {
	s    *Server
	nc   net.Conn
	addr string
	log  *slog.Logger

	// base is cancelled when the connection ends.
	base   context.Context
	cancel context.CancelFunc
	// ctx carries the connection's principal once authenticated; SASL
	// sets it while handlers of earlier requests may read it.
	ctx atomic.Pointer[context.Context]
	// authenticated: requests other than ApiVersions and SASL may run.
	authenticated bool
	sasl          saslState
	clientID      string

	// answers are the requests in the order read, answered in that order
	// by the writer.
	answers chan *answer
}

// answer is a request's place in its connection's order of answers.
type answer struct {
	corr    int32
	key     int16
	version int16
	done    chan struct{}
	resp    kmsg.Response
	// close: close the connection after writing this answer (or, with a
	// nil resp, instead of it).
	close bool
	// none: the request takes no answer (produce with acks=0).
	none bool
	// start is when the request was read (for the request metrics).
	start time.Time
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, addr: nc.RemoteAddr().String(), answers: make(chan *answer, maxInFlightPerConn)}
	c.log = s.log.With("client", c.addr)
	c.base, c.cancel = context.WithCancel(s.ctx)
	c.ctx.Store(&c.base)
	if !s.api.AuthRequired() {
		c.authenticated = true
	}
	return c
}

// serve reads and dispatches requests until the connection fails or a
// request cannot be parsed.
func (c *conn) serve() {
	defer c.nc.Close()
	if tc, ok := c.nc.(*tls.Conn); ok {
		c.nc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.HandshakeContext(c.s.ctx); err != nil {
			c.log.Debug("TLS handshake failed", "err", err)
			return
		}
		c.nc.SetDeadline(time.Time{})
		st := tc.ConnectionState()
		if len(st.VerifiedChains) > 0 {
			// A verified client certificate authenticates the
			// connection; SASL may still name another principal.
			p, err := c.s.api.Authenticate(c.s.ctx, broker.Credentials{CertName: st.VerifiedChains[0][0].Subject.CommonName, Addr: c.addr})
			if err == nil {
				ctx := broker.WithPrincipal(c.base, p)
				c.ctx.Store(&ctx)
				c.authenticated = true
			}
		}
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeAnswers()
	}()
	defer func() {
		// Requests still being answered (a fetch waiting, a join
		// waiting for its group) end with the connection.
		c.cancel()
		close(c.answers)
		<-writerDone
	}()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		limit := c.s.cfg.MaxRequestBytes
		if !c.authenticated {
			limit = min(limit, maxUnauthenticatedRequest)
		}
		if size < 8 || size > limit {
			// Kafka closes a connection whose request size is out
			// of bounds (InvalidReceiveException).
			c.log.Info("closing connection: request size out of bounds", "size", size, "max", limit)
			return
		}
		// A Produce is read into a pooled buffer, given back once
		// dispatched: its handler converts the records into memory of
		// their own and keeps nothing of the request once it returns
		// (the largest requests, and most of a producer's bytes). Any
		// other request gets memory of its own: handlers that answer
		// later may keep parts of it.
		key, err := r.Peek(2)
		if err != nil {
			return
		}
		produce := int16(binary.BigEndian.Uint16(key)) == kmsg.Produce.Int16()
		var buf []byte
		if produce {
			buf = slices.Grow(getBuf(), int(size))[:size]
		} else {
			buf = make([]byte, size)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		ok := c.dispatch(buf)
		if produce {
			putBuf(buf)
		}
		if !ok {
			return
		}
	}
}

// dispatch parses one request and starts answering it. False: the
// connection must close (after the answers queued so far).
func (c *conn) dispatch(buf []byte) bool {
	key := int16(binary.BigEndian.Uint16(buf))
	version := int16(binary.BigEndian.Uint16(buf[2:]))
	corr := int32(binary.BigEndian.Uint32(buf[4:]))
	a := &answer{corr: corr, key: key, version: version, done: make(chan struct{})}
	if c.s.reqs != nil {
		a.start = time.Now()
	}
	h, ok := handlers[key]
	if !ok || version < h.min || version > h.max {
		if key == kmsg.ApiVersions.Int16() {
			// ApiVersions of a version we do not know: answer in
			// v0 with UNSUPPORTED_VERSION and our versions, as
			// Kafka does, so the client can pick one.
			resp := apiVersionsResponse(0)
			resp.ErrorCode = errUnsupportedVersion
			a.resp = resp
			a.version = 0
			close(a.done)
			c.answers <- a
			return true
		}
		c.log.Info("closing connection: unsupported request", "api_key", key, "version", version)
		return false
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	rd := kbin.Reader{Src: buf[8:]}
	if !(key == kmsg.ControlledShutdown.Int16() && version == 0) {
		if id := rd.NullableString(); id != nil {
			c.clientID = *id
		}
	}
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		c.log.Info("closing connection: truncated request header", "api_key", key)
		return false
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		c.log.Info("closing connection: malformed request", "api", kmsg.NameForKey(key), "version", version, "err", err)
		return false
	}
	if !c.authenticated && !h.beforeAuth {
		c.log.Info("closing connection: request before SASL authentication", "api", kmsg.NameForKey(key))
		c.s.auditUnauthenticated(c, key)
		return false
	}
	c.answers <- a
	h.fn(c, req, a)
	return true
}

// context is the connection's context, with its principal.
func (c *conn) context() context.Context { return *c.ctx.Load() }

// respond completes a with resp (nil: no answer).
func (a *answer) respond(resp kmsg.Response) {
	a.resp = resp
	if resp == nil {
		a.none = true
	}
	close(a.done)
}

// writeAnswers writes the answers in request order.
func (c *conn) writeAnswers() {
	w := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	failed := false
	for a := range c.answers {
		select {
		case <-a.done:
			c.s.reqs.done(a)
		case <-c.base.Done():
			failed = true
			continue
		}
		if failed || (a.resp == nil && !a.close) || a.none {
			continue
		}
		if a.resp != nil {
			a.resp.SetVersion(a.version)
			buf = appendResponse(buf[:0], a)
			if f, ok := a.resp.(*kmsg.FetchResponse); ok {
				releaseFetch(f) // encoded into buf: its batches are free
			}
			if _, err := w.Write(buf); err != nil {
				failed = true
				c.nc.Close()
				continue
			}
		}
		if len(c.answers) == 0 || a.close {
			if err := w.Flush(); err != nil {
				failed = true
				c.nc.Close()
				continue
			}
		}
		if a.close {
			failed = true
			c.nc.Close()
		}
	}
	if !failed {
		w.Flush()
	}
}

// appendResponse frames a response: size, correlation id, the header's
// tagged fields for flexible versions (never for ApiVersions), the body.
func appendResponse(dst []byte, a *answer) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, a.corr)
	if a.resp.IsFlexible() && a.key != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0)
	}
	dst = a.resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// handler serves one API key in the versions [min, max].
type handler struct {
	min, max int16
	// beforeAuth: served before SASL authentication completes.
	beforeAuth bool
	// fn answers req through a (at once or later, from any goroutine).
	fn func(c *conn, req kmsg.Request, a *answer)
}

// handlers are the API keys served; each file named after an API key
// registers its own in init.
var handlers = map[int16]handler{}

func register(key kmsg.Key, min, max int16, fn func(c *conn, req kmsg.Request, a *answer)) {
	if _, dup := handlers[key.Int16()]; dup {
		panic(fmt.Sprintf("kafka: %s registered twice", kmsg.NameForKey(key.Int16())))
	}
	handlers[key.Int16()] = handler{min: min, max: max, fn: fn}
}

// now adapts a handler that answers at once.
func now[Req kmsg.Request](fn func(c *conn, req Req) kmsg.Response) func(c *conn, req kmsg.Request, a *answer) {
	return func(c *conn, req kmsg.Request, a *answer) { a.respond(fn(c, req.(Req))) }
}

// async runs a handler that may wait (fetch, joins) on its own goroutine;
// later requests of the connection are read meanwhile, answered after it.
func async[Req kmsg.Request](fn func(c *conn, req Req) kmsg.Response) func(c *conn, req kmsg.Request, a *answer) {
	return func(c *conn, req kmsg.Request, a *answer) {
		go func() { a.respond(fn(c, req.(Req))) }()
	}
}
