package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
)

// otlpCollector is an OTLP/gRPC trace collector that keeps what it is
// sent.
type otlpCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []collected
}

type collected struct {
	service string
	span    *tracepb.Span
}

func (c *otlpCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, collected{svc, s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// trace returns the spans collected of one trace.
func (c *otlpCollector) trace(id trace.TraceID) []collected {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []collected
	for _, s := range c.spans {
		if string(s.span.GetTraceId()) == string(id[:]) {
			out = append(out, s)
		}
	}
	return out
}

// startCollector serves an otlpCollector over OTLP/gRPC and OTLP/HTTP
// (protobuf) and returns their addresses.
func startCollector(t *testing.T) (col *otlpCollector, grpcAddr, httpAddr string) {
	t.Helper()
	col = &otlpCollector{}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(gl)
	t.Cleanup(srv.Stop)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
			return
		}
		resp, _ := col.Export(r.Context(), req)
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })
	return col, gl.Addr().String(), hl.Addr().String()
}

func findSpan(spans []collected, service, name string) *tracepb.Span {
	for _, s := range spans {
		if s.service == service && s.span.GetName() == name {
			return s.span
		}
	}
	return nil
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			switch v := kv.GetValue().GetValue().(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue)
			case *commonpb.AnyValue_BoolValue:
				return fmt.Sprint(v.BoolValue)
			}
			return kv.GetValue().String()
		}
	}
	return ""
}

// TestTracingProducerBrokerConsumer: a real `hermes serve` exporting to
// an OTLP collector (configured by the OTEL_* environment only) puts its
// publish, replication commit and delivery spans into the trace of the
// producer's span, carried in the records' traceparent header by the Go
// SDK, and a consumer's span started from the received message
// (client.MessageContext) joins that trace too: for a Producer (packed
// batches) and a unary Client.Publish (records). The broker samples with
// parentbased_traceidratio at ratio 0: it records exactly the traces its
// callers sampled.
func TestTracingProducerBrokerConsumer(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) { testTracing(t, protocol) })
	}
}

func testTracing(t *testing.T, protocol string) {
	col, addr, httpAddr := startCollector(t)
	endpoint := "http://" + addr
	if protocol != "grpc" {
		endpoint = "http://" + httpAddr
	}
	for k, v := range map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0",
		"OTEL_SERVICE_NAME":           "hermes-e2e",
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
	} {
		t.Setenv(k, v) // inherited by the hermes process
	}
	node := testcluster.StartNode(t, "--log-level", "warn")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "e2e-app"))
	// The application samples everything (the OTEL_* variables above are the broker's).
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("e2e")

	c, err := client.Dial(ctx, node.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "traced", client.WithPartitionCount(1)); err != nil {
		t.Fatal(err)
	}
	cons, err := c.Subscribe(ctx, "traced", client.WithGroup("tracers"), client.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := c.NewProducer(ctx, "traced")
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(ctx)

	// consume reads the next message and records a consumer span that
	// continues its producer's trace.
	consume := func(want string) {
		t.Helper()
		m, err := cons.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload) != want {
			t.Fatalf("consumed %q, want %q", m.Payload, want)
		}
		_, span := tracer.Start(client.MessageContext(ctx, m), "consume", trace.WithSpanKind(trace.SpanKindConsumer))
		span.End()
	}

	// A Producer: packed batches.
	pctx, produce := tracer.Start(ctx, "produce", trace.WithSpanKind(trace.SpanKindProducer))
	if _, err := prod.Publish(pctx, &client.Message{Payload: []byte("one")}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	produce.End()
	consume("one")

	// A unary publish: records.
	uctx, unary := tracer.Start(ctx, "produce-unary", trace.WithSpanKind(trace.SpanKindProducer))
	if _, err := c.Publish(uctx, "traced", []*client.Message{{Payload: []byte("two")}}, client.WithMode(client.ModeConsistent)); err != nil {
		t.Fatal(err)
	}
	unary.End()
	consume("two")

	// An untraced publish: the broker samples no trace of its own.
	if _, err := c.Publish(ctx, "traced", []*client.Message{{Payload: []byte("three")}}); err != nil {
		t.Fatal(err)
	}
	consume("three")

	checkTrace(t, col, produce.SpanContext(), "produce")
	checkTrace(t, col, unary.SpanContext(), "produce-unary")
	// Every span the broker exported belongs to one of the two traces.
	col.mu.Lock()
	defer col.mu.Unlock()
	want := map[string]bool{hex.EncodeToString(tid(produce)): true, hex.EncodeToString(tid(unary)): true}
	for _, s := range col.spans {
		if s.service == "hermes-e2e" && !want[hex.EncodeToString(s.span.GetTraceId())] {
			t.Errorf("the broker exported %s in trace %x, sampled by no caller", s.span.GetName(), s.span.GetTraceId())
		}
	}
}

func tid(s trace.Span) []byte {
	id := s.SpanContext().TraceID()
	return id[:]
}

// checkTrace waits until the trace of the producer span root holds the
// producer's, the broker's and the consumer's spans, linked as parent and
// child.
func checkTrace(t *testing.T, col *otlpCollector, root trace.SpanContext, rootName string) {
	t.Helper()
	const broker = "hermes-e2e"
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans := col.trace(root.TraceID())
		prod := findSpan(spans, "e2e-app", rootName)
		pub := findSpan(spans, broker, "hermes.publish")
		commit := findSpan(spans, broker, "hermes.replication.commit")
		deliver := findSpan(spans, broker, "hermes.deliver")
		cons := findSpan(spans, "e2e-app", "consume")
		if prod != nil && pub != nil && commit != nil && deliver != nil && cons != nil {
			sid := root.SpanID()
			if string(pub.GetParentSpanId()) != string(sid[:]) {
				t.Errorf("%s: hermes.publish's parent is %x, want the producer span %x", rootName, pub.GetParentSpanId(), sid[:])
			}
			if string(commit.GetParentSpanId()) != string(pub.GetSpanId()) {
				t.Errorf("%s: hermes.replication.commit's parent is %x, want hermes.publish %x", rootName, commit.GetParentSpanId(), pub.GetSpanId())
			}
			if string(deliver.GetParentSpanId()) != string(sid[:]) || string(cons.GetParentSpanId()) != string(sid[:]) {
				t.Errorf("%s: hermes.deliver's parent %x, consume's %x: want the producer span %x", rootName, deliver.GetParentSpanId(), cons.GetParentSpanId(), sid[:])
			}
			for _, kv := range [][2]string{{"messaging.destination.name", "traced"}, {"messaging.destination.partition.id", "0"}, {"messaging.batch.message_count", "1"}} {
				if got := spanAttr(pub, kv[0]); got != kv[1] {
					t.Errorf("%s: hermes.publish %s = %q, want %q", rootName, kv[0], got, kv[1])
				}
			}
			if got := spanAttr(deliver, "messaging.consumer.group.name"); got != "tracers" {
				t.Errorf("%s: hermes.deliver group %q, want tracers", rootName, got)
			}
			if commit.GetStartTimeUnixNano() < pub.GetStartTimeUnixNano() || commit.GetEndTimeUnixNano() > pub.GetEndTimeUnixNano() {
				t.Errorf("%s: the commit span is not within the publish span", rootName)
			}
			for _, s := range spans {
				t.Logf("trace %s: %s/%s span %x parent %x", root.TraceID(), s.service, s.span.GetName(), s.span.GetSpanId(), s.span.GetParentSpanId())
			}
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range spans {
				names = append(names, s.service+"/"+s.span.GetName())
			}
			t.Fatalf("trace of %s has spans [%s]; want the producer's, hermes.publish, hermes.replication.commit, hermes.deliver and consume", rootName, strings.Join(names, " "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTracingRelayedPublish: on a cluster, a publish sent to a node that
// does not lead the partition is relayed to the leader; the leader's
// commit span still joins the producer's trace (a child of the record's
// traceparent, marked hermes.relayed), beside the publish span of the
// node that relayed it.
func TestTracingRelayedPublish(t *testing.T) {
	col, addr, _ := startCollector(t)
	for k, v := range map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0",
		"OTEL_SERVICE_NAME":           "hermes-e2e",
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
	} {
		t.Setenv(k, v)
	}
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "e2e-app"))))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("e2e")

	clients := make([]*client.Client, len(nodes))
	for i, n := range nodes {
		c, err := client.Dial(ctx, n.GRPCAddr, client.WithLeaderRouting(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	if _, err := clients[0].CreateTopic(ctx, "relayed", client.WithPartitionCount(1), client.WithReplicationFactor(3)); err != nil {
		t.Fatal(err)
	}
	// One traced publish through each node: at least two are relayed.
	var roots []trace.SpanContext
	relayed := 0
	for i, c := range clients {
		pctx, span := tracer.Start(ctx, fmt.Sprintf("produce-%d", i), trace.WithSpanKind(trace.SpanKindProducer))
		if _, err := c.Publish(pctx, "relayed", []*client.Message{{Payload: []byte{byte(i)}}}, client.WithPartition(0)); err != nil {
			t.Fatal(err)
		}
		span.End()
		roots = append(roots, span.SpanContext())
	}
	for i, root := range roots {
		deadline := time.Now().Add(20 * time.Second)
		for {
			spans := col.trace(root.TraceID())
			pub := findSpan(spans, "hermes-e2e", "hermes.publish")
			commit := findSpan(spans, "hermes-e2e", "hermes.replication.commit")
			if pub != nil && commit != nil {
				sid := root.SpanID()
				if spanAttr(commit, "hermes.relayed") == "true" {
					relayed++
					if string(commit.GetParentSpanId()) != string(sid[:]) || spanAttr(pub, "hermes.leader") == "" {
						t.Errorf("publish %d: a relayed commit with parent %x (want the producer span %x), a publish span naming leader %q",
							i, commit.GetParentSpanId(), sid[:], spanAttr(pub, "hermes.leader"))
					}
				} else if string(commit.GetParentSpanId()) != string(pub.GetSpanId()) {
					t.Errorf("publish %d: the leader's commit span's parent is %x, want its publish span %x", i, commit.GetParentSpanId(), pub.GetSpanId())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("publish %d through node %d: trace without hermes.publish and hermes.replication.commit (%d spans)", i, i+1, len(spans))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if relayed < 2 {
		t.Errorf("%d of 3 publishes were relayed, want at least 2", relayed)
	}
}
