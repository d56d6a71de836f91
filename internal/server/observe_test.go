package server

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/wire"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

func startNode(t *testing.T, opts ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Broker:   broker.Config{DataDir: t.TempDir()},
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Version: "v9.9.9-test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestHealthReflectionAndBuildInfo calls the standard gRPC health service
// and server reflection over a real connection, and checks the build info
// and request metrics.
func TestHealthReflectionAndBuildInfo(t *testing.T) {
	s := startNode(t)
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "hermes.v1.Hermes"} {
		for {
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil {
				t.Fatalf("health check %q: %v", svc, err)
			}
			if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	rc, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{"hermes.v1.Hermes", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Fatalf("reflection lists %v, not %s", names, want)
		}
	}
	if err := rc.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "hermes.v1.Hermes"}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := rc.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("reflection has no descriptor of hermes.v1.Hermes: %v %v", resp, err)
	}
	rc.CloseSend()

	if _, err := pb.NewHermesClient(conn).Health(ctx, &pb.HealthRequest{}); err != nil {
		t.Fatal(err)
	}
	if r, err := http.Get("http://" + s.HTTPAddr() + "/readyz"); err == nil {
		r.Body.Close()
	}
	text := scrape(t, s)
	for _, want := range []string{
		`hermes_build_info{commit="`, `go_version="go`, `version="v9.9.9-test"} 1`,
		`hermes_requests_total{api="grpc",code="OK",method="/hermes.v1.Hermes/Health"} 1`,
		`hermes_request_duration_seconds_count{api="grpc",method="/hermes.v1.Hermes/Health"} 1`,
		`hermes_requests_total{api="grpc",code="OK",method="/grpc.health.v1.Health/Check"}`,
		`hermes_requests_total{api="http",code="200",method="GET /readyz"} 1`,
		`hermes_raft_is_leader{partition="",topic=""} 1`,
		`hermes_raft_leader_changes_total{partition="",topic=""} 1`,
		`hermes_metadata_quorum 1`,
		`hermes_ready 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// After Shutdown the health service says NOT_SERVING (or the
	// connection is gone): load balancers stop sending calls.
	close(s.healthStop)
	s.healthStop = make(chan struct{})
	s.health.Shutdown()
	if resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after shutdown: %v %v", resp, err)
	}
}

// TestPartitionAndGroupMetrics checks the per-partition gauges and that
// a group's lag has a series for every partition of its topic, those it
// has not committed on too.
func TestPartitionAndGroupMetrics(t *testing.T) {
	s := startNode(t)
	b := s.Broker()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b.CreateTopic(ctx, "lagged", broker.TopicConfig{Partitions: 3}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.CommitOffsets(ctx, "g", "", []broker.Offset{{Group: "g", Topic: "lagged", Partition: 1, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		text := scrape(t, s)
		var missing []string
		for _, want := range []string{
			`hermes_partition_high_watermark{partition="2",topic="lagged"} 0`,
			`hermes_partition_log_start_offset{partition="0",topic="lagged"} 0`,
			`hermes_partition_log_size_bytes{partition="1",topic="lagged"}`,
			`hermes_raft_is_leader{partition="1",topic="lagged"} 1`,
			`hermes_raft_term{partition="0",topic="lagged"}`,
			`hermes_consumer_lag_records{group="g",partition="0",topic="lagged"} 0`,
			`hermes_consumer_lag_records{group="g",partition="1",topic="lagged"} 0`,
			`hermes_consumer_lag_records{group="g",partition="2",topic="lagged"} 0`,
		} {
			if !strings.Contains(text, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %v", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.DeleteTopic(ctx, "lagged"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for strings.Contains(scrape(t, s), `topic="lagged"`) {
		if time.Now().After(deadline) {
			t.Fatal("series of a deleted topic remain")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDashboardUsesExportedMetrics checks that the Grafana dashboard
// parses and that each of its queries names metrics Hermes exports (seen
// in a scrape, or declared in the code: some appear only with traffic or
// followers).
func TestDashboardUsesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/hermes-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	s := startNode(t)
	known := map[string]bool{}
	for _, line := range strings.Split(scrape(t, s), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			known[f[2]] = true
		}
	}
	name := regexp.MustCompile(`"(hermes_[a-z_]+)"`)
	filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			src, _ := os.ReadFile(path)
			for _, m := range name.FindAllStringSubmatch(string(src), -1) {
				known[m[1]] = true
			}
		}
		return nil
	})
	metric := regexp.MustCompile(`\bhermes_[a-z_]+`)
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := m
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					base = strings.TrimSuffix(base, suf)
				}
				if !known[m] && !known[base] {
					t.Errorf("panel %q uses %s, which Hermes does not export", p.Title, m)
				}
			}
		}
	}
	if exprs == 0 {
		t.Fatal("the dashboard has no queries")
	}
}

// TestKafkaAndWireRequestsAreCounted: requests over the Kafka protocol
// (a real Kafka client) and hermes-wire (the Go client) land in the
// request metrics under their API, method and code.
func TestKafkaAndWireRequestsAreCounted(t *testing.T) {
	s := startNode(t, func(c *Config) { c.KafkaAddr, c.WireAddr = "127.0.0.1:0", "127.0.0.1:0" })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	kc, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, kc); err != nil {
		t.Fatalf("Kafka metadata: %v", err)
	}

	wc, err := wire.Dial(ctx, s.WireAddr(), wire.Options{ClientName: "metrics-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	for range 3 {
		if _, err := wc.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}

	text := scrape(t, s)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`hermes_requests_total\{api="kafka",code="answered",method="ApiVersions"\} [1-9]`),
		regexp.MustCompile(`hermes_requests_total\{api="kafka",code="answered",method="Metadata"\} [1-9]`),
		regexp.MustCompile(`hermes_request_duration_seconds_count\{api="kafka",method="Metadata"\} [1-9]`),
		regexp.MustCompile(`hermes_requests_total\{api="wire",code="ok",method="PING"\} 3`),
	} {
		if !want.MatchString(text) {
			t.Errorf("/metrics lacks %s; it has:\n%s", want, grepMetric(text, `api="kafka"`, `api="wire"`))
		}
	}
}

// grepMetric returns the lines of a scrape that contain any of subs.
func grepMetric(text string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
