package broker

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/pkg/record"
)

func TestParseTraceparent(t *testing.T) {
	cases := []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // version 00 has no more fields
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",   // nor reserved flags
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"",
	}
	for _, c := range cases {
		got, ok := parseTraceparent([]byte(c))
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{"traceparent": c}))
		if ok != want.IsValid() {
			t.Errorf("%q: valid %v, the OpenTelemetry propagator says %v", c, ok, want.IsValid())
			continue
		}
		if ok && (got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || got.IsSampled() != want.IsSampled() || !got.IsRemote()) {
			t.Errorf("%q: %v, want %v", c, got, want)
		}
	}
	v := []byte(cases[0])
	if n := testing.AllocsPerRun(100, func() { parseTraceparent(v) }); n != 0 {
		t.Errorf("parseTraceparent allocates %.1f times", n)
	}
}

// traced opens a broker whose spans go to the returned recorder, sampling
// every trace (its parent's decision first).
func traced(t *testing.T) (*Broker, *tracetest.SpanRecorder, trace.Tracer) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	b := openTest(t, t.TempDir(), func(c *Config) { c.Tracer = tp.Tracer("broker") })
	return b, rec, tp.Tracer("test")
}

// traceHeaders are the headers propagating span s.
func traceHeaders(ctx context.Context) []record.Header {
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, m)
	hs := []record.Header{{Key: TraceparentHeader, Value: []byte(m["traceparent"])}}
	if st := m["tracestate"]; st != "" {
		hs = append(hs, record.Header{Key: TracestateHeader, Value: []byte(st)})
	}
	return hs
}

func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestPublishAndDeliverySpans: a publish's span is a child of its first
// record's trace context and links the other records' traces; its
// commit span is its child; the delivery's span is a child of the first
// delivered record's trace context. Records and packed batches alike.
func TestPublishAndDeliverySpans(t *testing.T) {
	b, rec, tr := traced(t)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "tr", TopicConfig{Partitions: 1}, false); err != nil {
		t.Fatal(err)
	}
	ts, _ := trace.ParseTraceState("vendor=x")
	a := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xa}, SpanID: trace.SpanID{0xa}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	actx := trace.ContextWithSpanContext(ctx, a)
	bctx, bspan := tr.Start(ctx, "producer-b")
	in := recs("r", 4)
	in[0].Headers = traceHeaders(actx)
	in[1].Headers = traceHeaders(bctx)
	in[2].Headers = traceHeaders(actx) // same trace as the parent: no link
	for _, packed := range []bool{false, true} {
		rec.Reset()
		req := &PublishRequest{Topic: "tr", Partition: 0, Records: append([]record.Record(nil), in...), Mode: ModeConsistent}
		if packed {
			req = &PublishRequest{Topic: "tr", Partition: 0, Batch: record.AppendBatch(nil, 0, in), Mode: ModeConsistent}
		}
		mustPublish(t, b, req)
		pubs, commits := ended(rec, spanPublish), ended(rec, spanCommit)
		if len(pubs) != 1 || len(commits) != 1 {
			t.Fatalf("packed %v: %d publish and %d commit spans, want 1 each", packed, len(pubs), len(commits))
		}
		pub, commit := pubs[0], commits[0]
		if pub.Parent().SpanID() != a.SpanID() || pub.SpanContext().TraceID() != a.TraceID() || !pub.Parent().IsRemote() {
			t.Errorf("packed %v: publish span's parent %v, want the first record's %v", packed, pub.Parent(), a)
		}
		if got := pub.Parent().TraceState().Get("vendor"); got != "x" {
			t.Errorf("packed %v: parent trace state vendor=%q, want x", packed, got)
		}
		if l := pub.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != bspan.SpanContext().SpanID() {
			t.Errorf("packed %v: links %v, want one, to %v", packed, l, bspan.SpanContext())
		}
		if commit.Parent().SpanID() != pub.SpanContext().SpanID() {
			t.Errorf("packed %v: commit span's parent %v, want the publish span", packed, commit.Parent())
		}
		for _, c := range []struct {
			s    sdktrace.ReadOnlySpan
			k    attribute.Key
			want any
		}{
			{pub, attrTopic, "tr"}, {pub, attrPartition, "0"}, {pub, attrCount, int64(4)}, {pub, attrMode, "consistent"},
			{pub, attrPacked, packed}, {pub, attrLast, attrOf(pub, attrFirst).AsInt64() + 3},
			{commit, attrCount, int64(4)}, {commit, attrAck, "committed"}, {commit, attrFirst, attrOf(pub, attrFirst).AsInt64()},
		} {
			if got := attrOf(c.s, c.k).AsInterface(); got != c.want {
				t.Errorf("packed %v: %s %s = %v, want %v", packed, c.s.Name(), c.k, got, c.want)
			}
		}
		if commit.StartTime().Before(pub.StartTime()) || commit.EndTime().After(pub.EndTime()) {
			t.Errorf("packed %v: the commit span is not within the publish span", packed)
		}
	}

	for _, packed := range []bool{false, true} {
		rec.Reset()
		sub, err := b.Subscribe(ctx, SubscribeOptions{Topic: "tr", Start: StartPosition{Kind: StartEarliest}, Packed: packed})
		if err != nil {
			t.Fatal(err)
		}
		d := poll(t, sub, 4)
		sub.Close()
		if d.Count() != 4 {
			t.Fatalf("delivered %d records, want 4", d.Count())
		}
		ds := ended(rec, spanDeliver)
		if len(ds) != 1 {
			t.Fatalf("packed %v: %d delivery spans, want 1", packed, len(ds))
		}
		if ds[0].Parent().SpanID() != a.SpanID() || len(ds[0].Links()) != 1 {
			t.Errorf("packed %v: delivery span parent %v links %v", packed, ds[0].Parent(), ds[0].Links())
		}
		if got := attrOf(ds[0], attrCount).AsInt64(); got != 4 {
			t.Errorf("packed %v: delivery count %d", packed, got)
		}
	}
}

// TestUnsampledPublishRecordsNothing: a publish whose first record's
// trace is not sampled records no span (the default parent-based
// sampler), and neither does its commit.
func TestUnsampledPublishRecordsNothing(t *testing.T) {
	b, rec, _ := traced(t)
	ctx := context.Background()
	b.CreateTopic(ctx, "tr", TopicConfig{Partitions: 1}, false)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	in := recs("r", 2)
	in[0].Headers = traceHeaders(trace.ContextWithSpanContext(ctx, sc))
	mustPublish(t, b, &PublishRequest{Topic: "tr", Partition: AnyPartition, Records: in})
	if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
		t.Fatalf("%d spans recorded of an unsampled trace", n)
	}
}

// publishBench publishes one 100-byte record per op, in mode (the
// performance mode touches no disk: what is measured is the request
// path).
func publishBench(b *testing.B, br *Broker, mode Mode) {
	ctx := context.Background()
	br.CreateTopic(ctx, "bench", TopicConfig{Partitions: 1}, false)
	recs := make([]record.Record, 1)
	payload := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs[0] = record.Record{Payload: payload}
		if _, err := br.Publish(ctx, &PublishRequest{Topic: "bench", Partition: 0, Mode: mode, Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkPublishTracing: the request path of a publish with tracing
// off, and on at a 1% sample rate (parentbased_traceidratio 0.01) with
// records that carry no trace context (the broker's own sampling) and
// with records whose producer did not sample, and on for every trace.
func BenchmarkPublishTracing(b *testing.B) {
	open := func(b *testing.B, s sdktrace.Sampler) *Broker {
		cfg := Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if s != nil {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s), sdktrace.WithBatcher(discard{}))
			b.Cleanup(func() { tp.Shutdown(context.Background()) })
			cfg.Tracer = tp.Tracer("bench")
		}
		br, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		return br
	}
	for _, mode := range []Mode{ModePerformance, ModeConsistent} {
		b.Run(mode.String()+"/off", func(b *testing.B) { publishBench(b, open(b, nil), mode) })
		b.Run(mode.String()+"/ratio0.01", func(b *testing.B) {
			publishBench(b, open(b, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))), mode)
		})
		b.Run(mode.String()+"/always", func(b *testing.B) { publishBench(b, open(b, sdktrace.AlwaysSample()), mode) })
	}
}

// TestTracingOffAddsNoAllocation: with Config.Tracer nil a publish
// allocates what it did before tracing existed (trace.go's hooks are
// behind one nil check each). publishAllocsUntraced is what
// BenchmarkPublishTracing/off measured at the commit before tracing
// (git archive of it, same Go); a change of the publish path that adds
// or removes allocations updates it.
// publishAllocsUntraced: see TestTracingOffAddsNoAllocation.
const publishAllocsUntraced = 12

func TestTracingOffAddsNoAllocation(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	b.CreateTopic(ctx, "bench", TopicConfig{Partitions: 1}, false)
	recs := make([]record.Record, 1)
	payload := make([]byte, 100)
	publish := func() {
		recs[0] = record.Record{Payload: payload}
		if _, err := b.Publish(ctx, &PublishRequest{Topic: "bench", Partition: 0, Mode: ModePerformance, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	if n := testing.AllocsPerRun(2000, publish); n > publishAllocsUntraced {
		t.Fatalf("a performance publish allocates %.1f times with tracing off; %d before tracing", n, publishAllocsUntraced)
	}
}
