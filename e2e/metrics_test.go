package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
)

// TestMetricsAndHealthEndpoints checks /healthz, /readyz and that the
// metrics the README promises are exported and move with traffic.
func TestMetricsAndHealthEndpoints(t *testing.T) {
	node := testcluster.StartNode(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + node.HTTPAddr + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, node.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "metered", client.WithPartitionCount(2)); err != nil {
		t.Fatal(err)
	}
	msgs := []*client.Message{{Payload: []byte("one")}, {Payload: []byte("two")}}
	if _, err := c.Publish(ctx, "metered", msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "metered", msgs, client.WithMode(client.ModePerformance)); err != nil {
		t.Fatal(err)
	}
	cons, err := c.Subscribe(ctx, "metered", client.WithGroup("meters"), client.FromBeginning(), client.WithAckMode(client.AckManual))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		m, err := cons.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()

	want := []string{
		`hermes_published_records_total{mode="consistent",topic="metered"} 2`,
		`hermes_published_records_total{mode="performance",topic="metered"} 2`,
		`hermes_consumed_records_total{topic="metered"}`,
		`hermes_publish_latency_seconds_bucket{mode="consistent"`,
		`hermes_fsync_latency_seconds_count`,
		`hermes_group_commit_records_bucket`,
		`hermes_consumer_lag_records{group="meters",partition=`,
		`hermes_ring_evicted_total`,
		`hermes_publish_rejected_total`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		text := node.Metrics()
		var missing []string
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics missing: %q", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGCHeadroom checks that a node paces its garbage collector by
// --gc-headroom: above Go's default percent with the default headroom,
// Go's own 100 with --gc-headroom 0 or with GOGC in the environment.
func TestGCHeadroom(t *testing.T) {
	gogc := func(n *testcluster.Node) float64 {
		t.Helper()
		for _, line := range strings.Split(n.Metrics(), "\n") {
			if v, ok := strings.CutPrefix(line, "go_gc_gogc_percent "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("go_gc_gogc_percent %q: %v", v, err)
				}
				return f
			}
		}
		t.Fatal("no go_gc_gogc_percent on /metrics")
		return 0
	}
	t.Setenv("GOGC", "")
	if p := gogc(testcluster.StartNode(t)); p <= 100 {
		t.Errorf("default --gc-headroom: GC percent %v, want above 100 (a live heap of tens of MiB and 64 MiB of headroom)", p)
	}
	if p := gogc(testcluster.StartNode(t, "--gc-headroom", "0")); p != 100 {
		t.Errorf("--gc-headroom 0: GC percent %v, want Go's default 100", p)
	}
	t.Setenv("GOGC", "100")
	if p := gogc(testcluster.StartNode(t)); p != 100 {
		t.Errorf("GOGC=100 in the environment: GC percent %v, want 100", p)
	}
}
