package rest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
)

// benchPublishBody is the e2e benchmark's request (BenchmarkPublishProtocols).
var benchPublishBody = `{"mode":"consistent","records":[{"payload":"` + strings.Repeat("x", 100) + `"}]}`

// BenchmarkDecodePublish measures decoding a publish body alone.
func BenchmarkDecodePublish(b *testing.B) {
	body := []byte(benchPublishBody)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodePublishBytes(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishHandler serves the e2e benchmark's request in process,
// without a network: decoding, the broker (in eventual mode, so that fsync
// does not dominate) and the answer.
func BenchmarkPublishHandler(b *testing.B) {
	br, err := broker.Open(broker.Config{DataDir: b.TempDir(), Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	if _, err := br.CreateTopic(context.Background(), "bench", broker.TopicConfig{Partitions: 1}, false); err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	New(br, quietLog(), Options{}).Mount(mux)
	body := strings.Replace(benchPublishBody, "consistent", "eventual", 1)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/topics/bench/records", strings.NewReader(body))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("HTTP %d: %s", w.Code, w.Body)
		}
	}
}
