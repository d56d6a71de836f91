package graphql

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"

	"github.com/hermes-mq/hermes/internal/broker"
)

// BenchmarkPublish is e2e's BenchmarkPublishProtocols/graphql without the
// network: one publish mutation of one 100-byte record per request, served
// by the handler directly, so that a CPU profile shows this adapter's cost
// and not the socket's. The records are performance-mode (no fsync) and
// 30 goroutines per core publish, so that the broker is not the bottleneck.
func BenchmarkPublish(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"literal", `{"query":"mutation { publish(topic: \"bench\", mode: PERFORMANCE, record: {payload: \"` + strings.Repeat("x", 100) + `\"}) { offset } }"}`},
		{"variables", `{"query":"mutation($r: RecordInput!) { publish(topic: \"bench\", mode: PERFORMANCE, record: $r) { offset } }","variables":{"r":{"payload":"` + strings.Repeat("x", 100) + `"}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := benchHandler(b)
			b.ReportAllocs()
			b.SetParallelism(30)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					r := postRequest(ctx, bc.body)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"errors"`) {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}

// postRequest is a POST of body to /graphql as net/http's server makes
// it (httptest.NewRequest would add a bufio.Reader of its own to each).
func postRequest(ctx context.Context, body string) *http.Request {
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: "/graphql"},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Host: "hermes", RemoteAddr: "127.0.0.1:1",
	}
	return r.WithContext(ctx)
}

// benchHandler returns the /graphql handler over a broker with topic
// "bench" of one partition.
func benchHandler(b *testing.B) http.Handler {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	br, err := broker.Open(broker.Config{DataDir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	h := NewHandler(br, log)
	r := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(`{"query":"mutation { createTopic(name: \"bench\", config: {partitions: 1}) { name } }"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"errors"`) {
		b.Fatalf("createTopic: status %d: %s", w.Code, w.Body)
	}
	return h
}

// BenchmarkDecodeParams compares decodeParams with gqlgen's encoding/json
// decoding on the bodies BenchmarkPublish sends.
func BenchmarkDecodeParams(b *testing.B) {
	bodies := map[string]string{
		"literal":   `{"query":"mutation { publish(topic: \"bench\", mode: CONSISTENT, record: {payload: \"` + strings.Repeat("x", 100) + `\"}) { offset } }"}`,
		"variables": `{"query":"mutation($r: RecordInput!) { publish(topic: \"bench\", record: $r) { offset } }","variables":{"r":{"payload":"` + strings.Repeat("x", 100) + `"}}}`,
	}
	for name, body := range bodies {
		for _, dec := range []struct {
			name string
			f    func([]byte, *graphql.RawParams) error
		}{{"fast", decodeParams}, {"encoding-json", decodeParamsJSON}} {
			b.Run(name+"/"+dec.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var p graphql.RawParams
					if err := dec.f([]byte(body), &p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
