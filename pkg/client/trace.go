package client

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Trace context propagation (OpenTelemetry, W3C Trace Context): when the
// context given to Client.Publish or Producer.Publish carries a span (one
// started with an OpenTelemetry tracer), each published record gets the
// headers TraceparentHeader and, when the span has one, TracestateHeader,
// naming that span. The broker makes its spans of the publish, its
// replication and its deliveries children of the trace context of a
// batch's first record, and a consumer continues the trace from a
// received message with MessageContext. A record that has a traceparent
// header already keeps it (the caller propagates its own context).
//
// This uses only OpenTelemetry's API packages (no SDK, no exporter): a
// program that does not trace pays one context lookup per publish call
// (a Producer given the same context again pays one comparison: spanless).

// The record headers of the W3C trace context.
const (
	TraceparentHeader = "traceparent"
	TracestateHeader  = "tracestate"
)

var traceContext propagation.TraceContext

// MessageContext returns ctx with the remote span context that m's
// producer propagated in its headers (TraceparentHeader,
// TracestateHeader), for a span that continues the producer's trace:
//
//	ctx, span := tracer.Start(client.MessageContext(ctx, msg), "process "+msg.Topic,
//		trace.WithSpanKind(trace.SpanKindConsumer))
//	defer span.End()
//
// It returns ctx itself when m carries no valid trace context.
func MessageContext(ctx context.Context, m *Message) context.Context {
	if m == nil || !hasHeader(m.Headers, TraceparentHeader) {
		return ctx
	}
	return traceContext.Extract(ctx, (*messageCarrier)(&m.Headers))
}

// MessageCarrier returns m's headers as an OpenTelemetry TextMapCarrier,
// for other propagators (baggage, say) than the trace context this
// package injects and MessageContext extracts. Set replaces the first
// header of that key or appends one: on a Message being published, call
// it before Publish.
func MessageCarrier(m *Message) propagation.TextMapCarrier {
	return (*messageCarrier)(&m.Headers)
}

type messageCarrier []Header

func (c *messageCarrier) Get(key string) string {
	for _, h := range *c {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c *messageCarrier) Set(key, value string) {
	for i := range *c {
		if (*c)[i].Key == key {
			(*c)[i].Value = []byte(value)
			return
		}
	}
	*c = append(*c, Header{Key: key, Value: []byte(value)})
}

func (c *messageCarrier) Keys() []string {
	keys := make([]string, len(*c))
	for i, h := range *c {
		keys[i] = h.Key
	}
	return keys
}

// traceHeaders are the trace context headers of one publish call's span.
type traceHeaders struct{ parent, state string }

func (h *traceHeaders) Get(key string) string {
	switch key {
	case TraceparentHeader:
		return h.parent
	case TracestateHeader:
		return h.state
	}
	return ""
}

func (h *traceHeaders) Set(key, value string) {
	switch key {
	case TraceparentHeader:
		h.parent = value
	case TracestateHeader:
		h.state = value
	}
}

func (h *traceHeaders) Keys() []string { return []string{TraceparentHeader, TracestateHeader} }

// traceOf returns the trace context headers of ctx's span; ok is false
// when ctx carries none (the cost then: one context lookup).
func traceOf(ctx context.Context) (traceHeaders, bool) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return traceHeaders{}, false
	}
	return injectTrace(ctx)
}

// injectTrace is traceOf's work once ctx has a span: the carrier escapes
// (an interface), so it is allocated only here.
func injectTrace(ctx context.Context) (traceHeaders, bool) {
	h := new(traceHeaders)
	traceContext.Inject(ctx, h)
	return *h, h.parent != ""
}

// spanless remembers the last context found to carry no span. A context's
// values never change, so a Producer given the same ctx for every record
// (the usual loop) looks it up once: a lookup walks the context's chain
// of parents, about 25 ns a record through a few layers. Only a context of a
// comparable type is remembered: comparing others would panic.
type spanless struct {
	last atomic.Pointer[context.Context]
}

// traceOf is traceOf(ctx), remembering ctx when it has no span.
func (s *spanless) traceOf(ctx context.Context) (traceHeaders, bool) {
	if last := s.last.Load(); last != nil && *last == ctx {
		return traceHeaders{}, false
	}
	h, ok := traceOf(ctx)
	if !ok && ctx != nil && reflect.TypeOf(ctx).Comparable() {
		c := ctx // a copy: taking ctx's own address would move it to the heap on every call
		s.last.Store(&c)
	}
	return h, ok
}

// withTrace returns m, or, when ctx carries a span (h, ok from traceOf)
// and m has no traceparent header yet, a copy of m with the trace
// context headers added (m itself is left as the caller made it).
func withTrace(h traceHeaders, ok bool, m *Message) *Message {
	if !ok || hasHeader(m.Headers, TraceparentHeader) || len(m.Headers)+2 > record.MaxRecordHeaders {
		return m
	}
	c := *m
	c.Headers = make([]Header, len(m.Headers), len(m.Headers)+2)
	copy(c.Headers, m.Headers)
	c.Headers = append(c.Headers, Header{Key: TraceparentHeader, Value: []byte(h.parent)})
	if h.state != "" {
		c.Headers = append(c.Headers, Header{Key: TracestateHeader, Value: []byte(h.state)})
	}
	return &c
}

// addTrace adds ctx's trace context headers to the records of a unary
// publish that have no traceparent header (msgs[i] became recs[i]).
func addTrace(ctx context.Context, msgs []*Message, recs []*hermesv1.Record) {
	h, ok := traceOf(ctx)
	if !ok {
		return
	}
	// Shared by the records: they are only marshalled.
	add := []*hermesv1.Header{{Key: TraceparentHeader, Value: []byte(h.parent)}}
	if h.state != "" {
		add = append(add, &hermesv1.Header{Key: TracestateHeader, Value: []byte(h.state)})
	}
	for i, r := range recs {
		if !hasHeader(msgs[i].Headers, TraceparentHeader) && len(r.Headers)+len(add) <= record.MaxRecordHeaders {
			r.Headers = append(r.Headers, add...)
		}
	}
}

func hasHeader(hs []Header, key string) bool {
	for i := range hs {
		if hs[i].Key == key {
			return true
		}
	}
	return false
}
