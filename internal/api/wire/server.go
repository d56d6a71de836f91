// Package wire serves hermes-wire, Hermes' binary protocol for low
// latency (docs/PROTOCOL.md; the frames are in pkg/wire). It is one more
// adapter on the broker interface: durable publishes, subscriptions,
// groups, credits, acks and commits are the broker's, as over every other
// API.
//
// What is its own is the performance path. A connection's goroutine reads
// frames from a buffered reader and handles each where it lies (no copy);
// a performance-mode PUBLISH goes to the broker's PublishLive, which hands
// the records, on this same goroutine, to the sinks of the live
// subscriptions of the partition (a subscriber's connection): each encodes
// a DELIVER into its connection's output buffer and marks it dirty. When
// the reader has no complete frame left, it flushes every dirty
// connection, itself included (the PUBLISH_ACKs), with one write system
// call each, made without blocking (as nats-server's readLoop flushes the
// clients its messages went to). A socket that cannot take it all leaves
// the rest to its own connection's writer goroutine; nothing waits on a
// slow subscriber, whose credit bounds what it is sent. Nothing on this
// path allocates per record.
//
// Everything else a connection sends (acks of durable publishes, durable
// deliveries, errors) is appended to its output buffer by whichever
// goroutine has it, and written by the connection's writer goroutine.
package wire

import (
	"context"
	"crypto/tls"
	"github.com/hermes-mq/hermes/internal/reqmetrics"
	"log/slog"
	"net"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/netserve"
)

// Config configures the hermes-wire listener.
type Config struct {
	// TLS, when set, makes the listener TLS; with ClientCAs set, a client
	// certificate authenticates the connection.
	TLS *tls.Config
	// Spin makes a connection's reader poll its socket instead of
	// sleeping in the network poller while waiting for the next frame
	// (busy polling): lower latency on machines with cores to spare, a
	// whole core per busy connection.
	Spin bool
	// ServerName is sent in HELLO_OK; GRPCAddress too, to clients that
	// ask for it (CapGRPCAddress): the node's advertised gRPC address.
	ServerName  string
	GRPCAddress string
	Logger      *slog.Logger
	// Requests, when set, counts and times the request frames.
	Requests *reqmetrics.Metrics
}

// handshakeTimeout bounds the time from connecting to HELLO_OK.
const handshakeTimeout = 10 * time.Second

// maxOutBacklog is how many bytes of answers may wait to be written to a
// connection before its reader stops reading more requests.
const maxOutBacklog = 8 << 20

// Server serves hermes-wire for one node.
type Server struct {
	api    broker.API
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	ns     netserve.Server
	reqs   *frameMetrics
	nodes  nodeAddrs
}

// New returns a hermes-wire server on api.
func New(api broker.API, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "hermes"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{api: api, cfg: cfg, log: cfg.Logger.With("component", "wire"), ctx: ctx, cancel: cancel,
		reqs: newFrameMetrics(cfg.Requests)}
}

// Serve accepts connections on ln until Close. It returns nil after
// Close, else the error that stopped it.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	return s.ns.Serve(ln, func(nc net.Conn) { newConn(s, nc).serve() })
}

// Close stops accepting connections, closes every connection and waits
// for their goroutines.
func (s *Server) Close() error {
	if s.ns.Close() {
		s.cancel()
		s.ns.Wait()
	}
	return nil
}
