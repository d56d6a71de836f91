// Package server wires a Hermes node together: the broker, the gRPC API,
// the HTTP endpoints (/metrics, /healthz, /readyz), and their lifecycle.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"

	grpcapi "github.com/hermes-mq/hermes/internal/api/grpc"
	"github.com/hermes-mq/hermes/internal/api/kafka"
	"github.com/hermes-mq/hermes/internal/api/wire"
	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/internal/reqmetrics"
	"github.com/hermes-mq/hermes/internal/tlsconf"
	"github.com/hermes-mq/hermes/pkg/bufpool"
)

// Config is a node's configuration.
type Config struct {
	Broker   broker.Config
	GRPCAddr string // default 127.0.0.1:50051
	HTTPAddr string // default 127.0.0.1:8080
	Version  string
	Logger   *slog.Logger
	Limits   grpcapi.StreamLimits
	// Pprof serves net/http/pprof under /debug/pprof/ on the HTTP address.
	Pprof bool
	// HTTPBodyTimeout bounds how long a client may take to send an HTTP
	// request's body (default DefaultHTTPBodyTimeout): a client that
	// sends it slowly, or stops, gets its connection closed instead of
	// holding it.
	HTTPBodyTimeout time.Duration
	// AdvertiseGRPCAddr and AdvertiseHTTPAddr are the addresses other
	// nodes and clients reach this node at, when they differ from the
	// listen addresses (e.g. listening on 0.0.0.0 in a container).
	AdvertiseGRPCAddr, AdvertiseHTTPAddr string
	// KafkaAddr is the Kafka protocol's listen address ("": no Kafka
	// listener); AdvertiseKafkaAddr what Kafka clients are told to
	// connect to (default: the listener's address).
	KafkaAddr, AdvertiseKafkaAddr string
	// KafkaAutoCreateTopics lets Kafka clients create topics by asking
	// for their metadata (Kafka's auto.create.topics.enable).
	KafkaAutoCreateTopics bool
	// WireAddr is the hermes-wire listen address ("": none);
	// AdvertiseWireAddr what hermes-wire clients are told to connect to
	// for this node (default: the listener's address); WireSpin makes its
	// connections busy-poll their sockets (wire.Config.Spin).
	WireAddr, AdvertiseWireAddr string
	WireSpin                    bool
	// TLS is the certificate of the client listeners (gRPC and HTTP);
	// with its CA, clients may authenticate with certificates it signed.
	// Not enabled: plaintext.
	TLS tlsconf.Files
	// NodeTLS makes node-to-node traffic mutual TLS with the cluster's CA
	// (NodeTLS.CA); the certificate must name this node. Not enabled:
	// plaintext.
	NodeTLS tlsconf.Files
	// CORSOrigins may call the HTTP APIs from their pages (browsers'
	// cross-origin requests); none by default.
	CORSOrigins []string
	// AllowInsecure lets a listener on an address other than loopback run
	// without TLS (and, for clients, without authentication); it is
	// logged as a warning. Without it Start refuses to.
	AllowInsecure bool
}

// HTTPAdapter mounts one HTTP API (REST, GraphQL, ...) on the node's HTTP
// server. Each adapter package's file in this package appends its own.
type HTTPAdapter func(mux *http.ServeMux, b broker.API, log *slog.Logger)

// httpAdapters are the HTTP APIs this binary serves.
var httpAdapters []HTTPAdapter

// Server is a running node.
type Server struct {
	cfg      Config
	log      *slog.Logger
	broker   *broker.Broker
	grpc     *grpc.Server
	http     *http.Server
	grpcLis  net.Listener
	httpLis  net.Listener
	kafkaLis net.Listener
	kafka    *kafka.Server
	wireLis  net.Listener
	wire     *wire.Server
	serveErr chan error
	// health is the grpc.health.v1 service, following readiness until
	// healthStop is closed; reqs the request metrics of every API.
	health     *health.Server
	healthStop chan struct{}
	reqs       *reqmetrics.Metrics
	httpReqs   *httpMetrics
}

// Start opens the broker (recovering its data) and starts serving.
func Start(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:50051"
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:8080"
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg, cfg.Version)
	reqs := reqmetrics.New(reg)
	cfg.Broker.Registerer = reg
	cfg.Broker.Logger = cfg.Logger
	started := time.Now()
	s := &Server{cfg: cfg, log: cfg.Logger, serveErr: make(chan error, 4),
		healthStop: make(chan struct{}), reqs: reqs, httpReqs: &httpMetrics{m: reqs}}
	if err := cfg.checkExposure(); err != nil {
		return nil, err
	}
	var clientTLS *tls.Config
	if cfg.TLS.Enabled() {
		auth := tlsconf.NoClientCert
		if cfg.TLS.CA != "" {
			auth = tlsconf.VerifyClientCertIfGiven
		}
		var err error
		if clientTLS, err = tlsconf.Server(cfg.TLS, auth, cfg.Logger); err != nil {
			return nil, fmt.Errorf("client TLS: %w", err)
		}
	}
	if cfg.NodeTLS.Enabled() {
		c := &cfg.Broker.Cluster
		id := c.NodeID
		if id == 0 {
			id = 1
		}
		var err error
		if c.TLS, err = replication.NewNodeTLS(id, cfg.NodeTLS, cfg.Logger.With("component", "node-tls")); err != nil {
			return nil, err
		}
	}
	var err error
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("listen gRPC on %s: %w", cfg.GRPCAddr, err)
	}
	if s.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		s.grpcLis.Close()
		return nil, fmt.Errorf("listen HTTP on %s: %w", cfg.HTTPAddr, err)
	}
	if cfg.KafkaAddr != "" {
		if s.kafkaLis, err = net.Listen("tcp", cfg.KafkaAddr); err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("listen Kafka on %s: %w", cfg.KafkaAddr, err)
		}
	}
	if cfg.WireAddr != "" {
		if s.wireLis, err = net.Listen("tcp", cfg.WireAddr); err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("listen hermes-wire on %s: %w", cfg.WireAddr, err)
		}
	}
	c := &cfg.Broker.Cluster // advertise what clients can reach
	c.GRPCAddr, c.HTTPAddr = s.grpcLis.Addr().String(), s.httpLis.Addr().String()
	if s.kafkaLis != nil {
		c.KafkaAddr = s.kafkaLis.Addr().String()
		if cfg.AdvertiseKafkaAddr != "" {
			c.KafkaAddr = cfg.AdvertiseKafkaAddr
		}
	}
	if s.wireLis != nil {
		c.WireAddr = s.wireLis.Addr().String()
		if cfg.AdvertiseWireAddr != "" {
			c.WireAddr = cfg.AdvertiseWireAddr
		}
	}
	if cfg.AdvertiseGRPCAddr != "" {
		c.GRPCAddr = cfg.AdvertiseGRPCAddr
	}
	if cfg.AdvertiseHTTPAddr != "" {
		c.HTTPAddr = cfg.AdvertiseHTTPAddr
	}
	b, err := broker.Open(cfg.Broker)
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	s.broker = b
	svc := grpcapi.New(b, cfg.Logger, cfg.Version, cfg.Limits)
	grpcReqs := newGRPCMetrics(reqs)
	pool := bufpool.New()
	creds := append([]grpc.ServerOption{experimental.BufferPool(pool)}, grpcReqs.options()...)
	creds = append(creds, svc.ServerOptions()...)
	if clientTLS != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(clientTLS)))
	}
	s.grpc = grpc.NewServer(append(creds,
		grpcapi.ServerCodec(bufpool.Codec(pool)),
		grpc.MaxRecvMsgSize(grpcapi.MaxMessageBytes),
		grpc.MaxSendMsgSize(grpcapi.MaxMessageBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)...)
	grpcapi.Register(s.grpc, svc)
	s.health = registerHealth(s.grpc)
	grpcReqs.learn(s.grpc)
	go s.followReadiness(s.healthStop)
	bodyTimeout := cmp.Or(cfg.HTTPBodyTimeout, DefaultHTTPBodyTimeout)
	s.http = &http.Server{Handler: bodyDeadline(s.httpHandler(reg), bodyTimeout), ReadHeaderTimeout: 10 * time.Second, TLSConfig: clientTLS}
	go func() { s.serveErr <- s.grpc.Serve(s.grpcLis) }()
	go func() {
		var err error
		if clientTLS != nil {
			err = s.http.ServeTLS(s.httpLis, "", "")
		} else {
			err = s.http.Serve(s.httpLis)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			s.serveErr <- err
		}
	}()
	if s.kafkaLis != nil {
		s.kafka = kafka.New(b, kafka.Config{Advertise: c.KafkaAddr, AutoCreateTopics: cfg.KafkaAutoCreateTopics,
			TLS: clientTLS, Logger: cfg.Logger, Requests: s.reqs})
		go func() {
			if err := s.kafka.Serve(s.kafkaLis); err != nil {
				s.serveErr <- err
			}
		}()
	}
	if s.wireLis != nil {
		s.wire = wire.New(b, wire.Config{TLS: clientTLS, Spin: cfg.WireSpin, ServerName: "hermes " + cfg.Version, GRPCAddress: c.GRPCAddr, Logger: cfg.Logger, Requests: s.reqs})
		go func() {
			if err := s.wire.Serve(s.wireLis); err != nil {
				s.serveErr <- err
			}
		}()
	}
	topics, _ := b.Topics(context.Background())
	s.log.Info("hermes started", "node", b.NodeID(), "version", cfg.Version,
		"grpc", s.grpcLis.Addr().String(), "http", s.httpLis.Addr().String(), "kafka", s.KafkaAddr(), "wire", s.WireAddr(),
		"tls", cfg.TLS.Enabled(), "node_tls", cfg.NodeTLS.Enabled(),
		"data_dir", cfg.Broker.DataDir, "topics", len(topics), "startup", time.Since(started))
	return s, nil
}

// checkExposure refuses listeners that anyone on the network could use
// freely: a client listener on an address other than loopback without
// TLS and authentication, a node-to-node listener there without node
// TLS, unless AllowInsecure (then it warns).
func (cfg *Config) checkExposure() error {
	var open []string
	for _, l := range []struct{ name, addr string }{{"--grpc-addr", cfg.GRPCAddr}, {"--http-addr", cfg.HTTPAddr}, {"--kafka-addr", cfg.KafkaAddr}, {"--wire-addr", cfg.WireAddr}} {
		if l.addr != "" && !loopback(l.addr) {
			if !cfg.Broker.Auth.Required {
				open = append(open, fmt.Sprintf("%s %s: clients are not authenticated (--auth)", l.name, l.addr))
			}
			if !cfg.TLS.Enabled() {
				open = append(open, fmt.Sprintf("%s %s: no TLS (--tls-cert, --tls-key)", l.name, l.addr))
			}
		}
	}
	raft := cfg.Broker.Cluster.RaftAddr
	if raft == "" {
		raft = cfg.Broker.Cluster.Peers[cfg.Broker.Cluster.NodeID]
	}
	if raft != "" && !loopback(raft) && !cfg.NodeTLS.Enabled() {
		open = append(open, fmt.Sprintf("--raft-addr %s: nodes are not authenticated (--node-tls-cert, --node-tls-key, --node-tls-ca)", raft))
	}
	if len(open) == 0 {
		return nil
	}
	if !cfg.AllowInsecure {
		return fmt.Errorf("refusing to listen beyond loopback without security: %s; secure these listeners, listen on 127.0.0.1, or start with --allow-insecure", strings.Join(open, "; "))
	}
	for _, o := range open {
		cfg.Logger.Warn("INSECURE: listening beyond loopback without security (--allow-insecure)", "listener", o)
	}
	return nil
}

// loopback reports whether a listen address is on the loopback interface
// only (an empty or unspecified host listens on every interface).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) httpHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.requireHTTP(broker.ActionDescribe, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := s.broker.NotReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	for _, mount := range httpAdapters {
		mount(mux, s.broker, s.log)
	}
	if s.cfg.Pprof {
		mux.Handle("/debug/pprof/", s.requireHTTP(broker.ActionAlter, http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", s.requireHTTP(broker.ActionAlter, http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", s.requireHTTP(broker.ActionAlter, http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", s.requireHTTP(broker.ActionAlter, http.HandlerFunc(pprof.Trace)))
	}
	return s.guard(s.httpReqs.wrap(mux))
}

// GRPCAddr and HTTPAddr are the bound addresses (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// KafkaAddr is the bound Kafka listener address ("" without one).
func (s *Server) KafkaAddr() string {
	if s.kafkaLis == nil {
		return ""
	}
	return s.kafkaLis.Addr().String()
}

// WireAddr is the bound hermes-wire listener address ("" without one).
func (s *Server) WireAddr() string {
	if s.wireLis == nil {
		return ""
	}
	return s.wireLis.Addr().String()
}

// closeListeners closes the listeners opened so far (Start failed).
func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.grpcLis, s.httpLis, s.kafkaLis, s.wireLis} {
		if l != nil {
			l.Close()
		}
	}
}

// RaftAddr is the address other nodes reach this node at.
func (s *Server) RaftAddr() string { return s.broker.RaftAddr() }

// Broker returns the node's broker.
func (s *Server) Broker() *broker.Broker { return s.broker }

// Err is closed with a value when a listener fails.
func (s *Server) Err() <-chan error { return s.serveErr }

// handOverTimeout bounds how long a stopping node waits for caught-up
// replicas to take over the groups it leads.
const handOverTimeout = 2 * time.Second

// Shutdown hands the node's leaderships over, ends its streams (clients
// go on with other nodes), stops accepting requests, lets running calls
// finish until ctx ends (then cuts them off), and closes the broker so
// every acknowledged write is on disk.
func (s *Server) Shutdown(ctx context.Context) error {
	s.log.Info("hermes shutting down")
	start := time.Now()
	close(s.healthStop)
	s.health.Shutdown() // NOT_SERVING: load balancers stop sending calls here
	hctx, hcancel := context.WithTimeout(ctx, handOverTimeout)
	s.broker.Drain(hctx)
	hcancel()
	drained := time.Now()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("gRPC calls still running at the shutdown timeout are cut off")
		s.grpc.Stop()
	}
	s.http.Shutdown(ctx)
	if s.kafka != nil {
		s.kafka.Close()
	}
	if s.wire != nil {
		s.wire.Close()
	}
	callsDone := time.Now()
	err := s.broker.Close()
	// How long each step took: a slow stop says where it waited.
	s.log.Info("hermes stopped", "took", time.Since(start).Round(time.Millisecond),
		"hand_over", drained.Sub(start).Round(time.Millisecond),
		"calls", callsDone.Sub(drained).Round(time.Millisecond),
		"close", time.Since(callsDone).Round(time.Millisecond))
	return err
}
