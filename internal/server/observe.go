package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/reqmetrics"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// registerBuildInfo exports hermes_build_info{version, commit, go_version} 1.
func registerBuildInfo(reg prometheus.Registerer, version string) {
	commit := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && commit != "unknown" {
			commit += "-dirty"
		}
	}
	if version == "" {
		version = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "hermes_build_info",
		Help:        "Always 1; its labels say which build of Hermes runs.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "go_version": runtime.Version()},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// grpcMetrics times and counts the public gRPC server's calls. methods is
// filled once every service is registered, before the server serves, and
// only read afterwards.
type grpcMetrics struct {
	m       *reqmetrics.Metrics
	methods map[string]*reqmetrics.Method
	other   *reqmetrics.Method
}

func grpcCodeName(c int) string { return codes.Code(c).String() }

func newGRPCMetrics(m *reqmetrics.Metrics) *grpcMetrics {
	return &grpcMetrics{m: m, methods: map[string]*reqmetrics.Method{},
		other: m.Method(reqmetrics.GRPC, "unknown", grpcCodeName)}
}

// learn looks up the series of every method srv serves.
func (g *grpcMetrics) learn(srv *grpc.Server) {
	for svc, info := range srv.GetServiceInfo() {
		for _, mi := range info.Methods {
			full := "/" + svc + "/" + mi.Name
			g.methods[full] = g.m.Method(reqmetrics.GRPC, full, grpcCodeName)
		}
	}
}

func (g *grpcMetrics) method(full string) *reqmetrics.Method {
	if h := g.methods[full]; h != nil {
		return h
	}
	return g.other
}

// options are the interceptors; they go first, so that calls refused by
// authentication count too.
func (g *grpcMetrics) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			start := time.Now()
			resp, err := h(ctx, req)
			g.method(info.FullMethod).Done(int(status.Code(err)), time.Since(start))
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			m := g.method(info.FullMethod)
			m.StreamOpened()
			err := h(srv, ss)
			m.StreamClosed()
			m.Count(int(status.Code(err)))
			return err
		}),
	}
}

// healthServices are the services the grpc.health.v1 service reports on
// ("" is the server as a whole).
var healthServices = []string{"", pb.Hermes_ServiceDesc.ServiceName}

// registerHealth registers grpc.health.v1 and server reflection on srv.
func registerHealth(srv *grpc.Server) *health.Server {
	hs := health.NewServer()
	for _, svc := range healthServices {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return hs
}

// healthEvery is how often the health service's status follows readiness.
const healthEvery = 250 * time.Millisecond

// followReadiness sets the health service's status from the broker's
// readiness (Broker.NotReady, as /readyz) until stop is closed.
func (s *Server) followReadiness(stop <-chan struct{}) {
	t := time.NewTicker(healthEvery)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if why := s.broker.NotReady(); why != "" {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if st != last {
			for _, svc := range healthServices {
				s.health.SetServingStatus(svc, st)
			}
			s.log.Info("gRPC health status", "status", st.String())
			last = st
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// httpMetrics times and counts the HTTP requests by route (the ServeMux
// pattern that matched: bounded by the routes served).
type httpMetrics struct {
	m      *reqmetrics.Metrics
	routes sync.Map // pattern → *reqmetrics.Method
}

func (h *httpMetrics) route(pattern string) *reqmetrics.Method {
	if r, ok := h.routes.Load(pattern); ok {
		return r.(*reqmetrics.Method)
	}
	api := reqmetrics.HTTP
	switch {
	case strings.Contains(pattern, "/graphql"):
		api = reqmetrics.GraphQL
	case strings.Contains(pattern, "/v1/"):
		api = reqmetrics.REST
	}
	name := pattern
	if name == "" {
		name = "unmatched"
	}
	r := h.m.Method(api, name, nil)
	h.routes.Store(pattern, r)
	return r
}

// wrap counts and times what mux answers. Long-lived answers (server-sent
// events, WebSocket upgrades) are counted but not timed.
func (h *httpMetrics) wrap(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		mux.ServeHTTP(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m := h.route(r.Pattern)
		if sw.hijacked || strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			m.Count(code)
			return
		}
		m.Done(code, time.Since(start))
	})
}

// statusWriter remembers the status code of an answer.
type statusWriter struct {
	http.ResponseWriter
	code     int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
		if w.code == 0 {
			w.code = http.StatusSwitchingProtocols
		}
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
