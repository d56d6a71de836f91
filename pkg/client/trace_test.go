package client

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

func spanCtx(t *testing.T) (context.Context, trace.SpanContext) {
	ts, err := trace.ParseTraceState("vendor=v")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, TraceState: ts,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// A record published under a span carries its trace context, which
// MessageContext gives back on the consumer's side; the caller's Message
// is not changed and a traceparent it set itself is kept.
func TestTraceContextRoundTrip(t *testing.T) {
	ctx, sc := spanCtx(t)
	m := &Message{Payload: []byte("p"), Headers: []Header{{Key: "k", Value: []byte("v")}}}
	sent := tracedCopy(ctx, m)
	if sent == m || len(m.Headers) != 1 {
		t.Fatalf("withTrace changed the caller's message: %+v", m.Headers)
	}
	if len(sent.Headers) != 3 || sent.Headers[1].Key != TraceparentHeader || sent.Headers[2].Key != TracestateHeader {
		t.Fatalf("headers sent: %+v", sent.Headers)
	}
	if want := "00-01020300000000000000000000000000-0405000000000000-01"; string(sent.Headers[1].Value) != want {
		t.Errorf("traceparent %s, want %s", sent.Headers[1].Value, want)
	}
	got := trace.SpanContextFromContext(MessageContext(context.Background(), sent))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || !got.IsRemote() || got.TraceState().Get("vendor") != "v" {
		t.Errorf("MessageContext: %v, want %v", got, sc)
	}
	if again := tracedCopy(ctx, sent); again != sent {
		t.Error("a message with a traceparent got another")
	}
	if tracedCopy(context.Background(), m) != m {
		t.Error("a message published without a span was copied")
	}
	if c := context.Background(); MessageContext(c, m) != c {
		t.Error("MessageContext of an untraced message changed the context")
	}

	recs := []*hermesv1.Record{m.toProto(), (&Message{}).toProto()}
	own := &Message{Headers: []Header{{Key: TraceparentHeader, Value: []byte("mine")}}}
	recs = append(recs, own.toProto())
	addTrace(ctx, []*Message{m, {}, own}, recs)
	if len(recs[0].Headers) != 3 || len(recs[1].Headers) != 2 || len(recs[2].Headers) != 1 {
		t.Errorf("unary headers: %d %d %d; want 3 2 1", len(recs[0].Headers), len(recs[1].Headers), len(recs[2].Headers))
	}
}

// tracedCopy is what Publish does with its ctx and a message.
func tracedCopy(ctx context.Context, m *Message) *Message {
	h, ok := traceOf(ctx)
	return withTrace(h, ok, m)
}

// uncomparableCtx is a context of a type == cannot compare.
type uncomparableCtx struct {
	context.Context
	tags []string
}

// spanless remembers a context without a span, never one with a span,
// and never a context whose type cannot be compared.
func TestSpanlessRemembersOnlyWhatItMay(t *testing.T) {
	var s spanless
	plain := context.Background()
	if _, ok := s.traceOf(plain); ok {
		t.Fatal("a context without a span has trace headers")
	}
	if s.last.Load() == nil || *s.last.Load() != plain {
		t.Fatal("the context without a span was not remembered")
	}
	if n := testing.AllocsPerRun(100, func() { s.traceOf(plain) }); n != 0 {
		t.Errorf("%.1f allocations for a remembered context", n)
	}
	spanned, _ := spanCtx(t)
	for range 2 {
		if h, ok := s.traceOf(spanned); !ok || h.parent == "" {
			t.Fatal("a context with a span lost its trace headers")
		}
	}
	if *s.last.Load() != plain {
		t.Error("a context with a span replaced the remembered one")
	}
	odd := uncomparableCtx{Context: plain, tags: []string{"x"}}
	for range 2 {
		if _, ok := s.traceOf(odd); ok { // must not panic comparing
			t.Fatal("trace headers from a context without a span")
		}
	}
	if *s.last.Load() != plain {
		t.Error("a context of an uncomparable type was remembered")
	}
}

// Publishing without a span costs no allocation for tracing.
func TestNoTraceNoAllocation(t *testing.T) {
	m := &Message{Payload: []byte("p")}
	ctx := context.Background()
	recs := []*hermesv1.Record{m.toProto()}
	msgs := []*Message{m}
	if n := testing.AllocsPerRun(100, func() {
		tracedCopy(ctx, m)
		addTrace(ctx, msgs, recs)
	}); n != 0 {
		t.Errorf("%.1f allocations without a span", n)
	}
}

func TestMessageCarrier(t *testing.T) {
	m := &Message{}
	c := MessageCarrier(m)
	c.Set("baggage", "a=1")
	c.Set("baggage", "a=2")
	if len(m.Headers) != 1 || c.Get("baggage") != "a=2" || len(c.Keys()) != 1 {
		t.Errorf("carrier: %+v", m.Headers)
	}
}
