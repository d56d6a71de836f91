// Package reqmetrics counts the requests every API serves and times them:
// hermes_requests_total{api, method, code} and
// hermes_request_duration_seconds{api, method}. Handles are looked up
// once per method (and code) and cached, so a request costs two atomic
// loads, an Inc and an Observe: no label slice, no allocation, no lock.
package reqmetrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The APIs (the api label).
const (
	GRPC    = "grpc"
	REST    = "rest"
	GraphQL = "graphql"
	HTTP    = "http" // the operational endpoints: /metrics, /healthz, /readyz, pprof
	Kafka   = "kafka"
	Wire    = "wire"
)

// Metrics are the request metric families of one node.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  *prometheus.GaugeVec

	mu      sync.Mutex
	methods sync.Map // api + "\x00" + method → *Method
}

// New registers the request metric families on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_requests_total",
			Help: "Requests answered, by API, method and result code (gRPC status code name, HTTP status, Kafka or hermes-wire result). Streams count when they end.",
		}, []string{"api", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermes_request_duration_seconds",
			Help:    "Time to answer a request, by API and method (streams are not timed: see hermes_streams_open).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 14), // 50µs .. ~7.5 min
		}, []string{"api", "method"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hermes_streams_open", Help: "Streaming calls in progress (gRPC streams, by method).",
		}, []string{"api", "method"}),
	}
	reg.MustRegister(m.requests, m.duration, m.streams)
	return m
}

// maxCodes bounds the code slots of a method; codes are small integers
// (gRPC codes 0-16, HTTP statuses 100-599 are folded below).
const maxCodes = 600

// Method holds the cached series of one API method.
type Method struct {
	m           *Metrics
	api, method string
	duration    atomic.Pointer[prometheus.Observer]
	open        atomic.Pointer[prometheus.Gauge]
	codes       [maxCodes]atomic.Pointer[prometheus.Counter]
	// name turns a code into its label (nil: the decimal number).
	name func(int) string
}

// Method returns the cached handle of api's method, creating it on first
// use. Call it once per method (at wiring time) where the methods are
// known, or per request where they are not: a lookup in a sync.Map.
func (m *Metrics) Method(api, method string, codeName func(int) string) *Method {
	if m == nil {
		return nil
	}
	key := api + "\x00" + method
	if h, ok := m.methods.Load(key); ok {
		return h.(*Method)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.methods.Load(key); ok {
		return h.(*Method)
	}
	h := &Method{m: m, api: api, method: method, name: codeName}
	m.methods.Store(key, h)
	return h
}

// Done counts one answered request with its result code and duration.
// Nil-safe.
func (h *Method) Done(code int, d time.Duration) {
	if h == nil {
		return
	}
	h.Count(code)
	o := h.duration.Load()
	if o == nil {
		obs := h.m.duration.WithLabelValues(h.api, h.method)
		h.duration.CompareAndSwap(nil, &obs)
		o = h.duration.Load()
	}
	(*o).Observe(d.Seconds())
}

// Count counts one answered request (a stream's end) without timing it.
func (h *Method) Count(code int) {
	if h == nil {
		return
	}
	if code < 0 || code >= maxCodes {
		code = maxCodes - 1
	}
	c := h.codes[code].Load()
	if c == nil {
		label := strconv.Itoa(code)
		if h.name != nil {
			label = h.name(code)
		}
		ctr := h.m.requests.WithLabelValues(h.api, h.method, label)
		h.codes[code].CompareAndSwap(nil, &ctr)
		c = h.codes[code].Load()
	}
	(*c).Inc()
}

// StreamOpened and StreamClosed track a stream in progress. Nil-safe.
func (h *Method) StreamOpened() {
	if h == nil {
		return
	}
	h.gauge().Inc()
}

func (h *Method) StreamClosed() {
	if h == nil {
		return
	}
	h.gauge().Dec()
}

func (h *Method) gauge() prometheus.Gauge {
	if g := h.open.Load(); g != nil {
		return *g
	}
	g := h.m.streams.WithLabelValues(h.api, h.method)
	h.open.CompareAndSwap(nil, &g)
	return *h.open.Load()
}
