// Package server wires a Hermes node together: the broker, the gRPC API,
// the HTTP endpoints (/metrics, /healthz, /readyz), and their lifecycle.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	grpcapi "github.com/hermes-mq/hermes/internal/api/grpc"
	"github.com/hermes-mq/hermes/internal/broker"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
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
	// AdvertiseGRPCAddr and AdvertiseHTTPAddr are the addresses other
	// nodes and clients reach this node at, when they differ from the
	// listen addresses (e.g. listening on 0.0.0.0 in a container).
	AdvertiseGRPCAddr, AdvertiseHTTPAddr string
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
	serveErr chan error
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
	cfg.Broker.Registerer = reg
	cfg.Broker.Logger = cfg.Logger
	started := time.Now()
	s := &Server{cfg: cfg, log: cfg.Logger, serveErr: make(chan error, 2)}
	var err error
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("listen gRPC on %s: %w", cfg.GRPCAddr, err)
	}
	if s.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		s.grpcLis.Close()
		return nil, fmt.Errorf("listen HTTP on %s: %w", cfg.HTTPAddr, err)
	}
	c := &cfg.Broker.Cluster // advertise what clients can reach
	c.GRPCAddr, c.HTTPAddr = s.grpcLis.Addr().String(), s.httpLis.Addr().String()
	if cfg.AdvertiseGRPCAddr != "" {
		c.GRPCAddr = cfg.AdvertiseGRPCAddr
	}
	if cfg.AdvertiseHTTPAddr != "" {
		c.HTTPAddr = cfg.AdvertiseHTTPAddr
	}
	b, err := broker.Open(cfg.Broker)
	if err != nil {
		s.grpcLis.Close()
		s.httpLis.Close()
		return nil, err
	}
	s.broker = b
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(grpcapi.MaxMessageBytes),
		grpc.MaxSendMsgSize(grpcapi.MaxMessageBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	pb.RegisterHermesServer(s.grpc, grpcapi.New(b, cfg.Logger, cfg.Version, cfg.Limits))
	s.http = &http.Server{Handler: s.httpHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.serveErr <- s.grpc.Serve(s.grpcLis) }()
	go func() {
		if err := s.http.Serve(s.httpLis); !errors.Is(err, http.ErrServerClosed) {
			s.serveErr <- err
		}
	}()
	topics, _ := b.Topics(context.Background())
	s.log.Info("hermes started", "node", b.NodeID(), "version", cfg.Version,
		"grpc", s.grpcLis.Addr().String(), "http", s.httpLis.Addr().String(),
		"data_dir", cfg.Broker.DataDir, "topics", len(topics), "startup", time.Since(started))
	return s, nil
}

func (s *Server) httpHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.broker.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	for _, mount := range httpAdapters {
		mount(mux, s.broker, s.log)
	}
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// GRPCAddr and HTTPAddr are the bound addresses (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// RaftAddr is the address other nodes reach this node at.
func (s *Server) RaftAddr() string { return s.broker.RaftAddr() }

// Broker returns the node's broker.
func (s *Server) Broker() *broker.Broker { return s.broker }

// Err is closed with a value when a listener fails.
func (s *Server) Err() <-chan error { return s.serveErr }

// Shutdown stops accepting requests, lets running calls finish until ctx
// ends (then cuts them off), and closes the broker so every acknowledged
// write is on disk.
func (s *Server) Shutdown(ctx context.Context) error {
	s.log.Info("hermes shutting down")
	s.broker.EndSubscriptions()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	s.http.Shutdown(ctx)
	err := s.broker.Close()
	s.log.Info("hermes stopped")
	return err
}
