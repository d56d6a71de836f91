package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// metricValue returns the value of one series (its name with its labels,
// as exported, e.g. `hermes_raft_term{partition="0",topic="t"}`) in a
// scrape; ok false when the series is not there.
func metricValue(text, series string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestMetricsFollowLeaderFailover scrapes /metrics of a three-node
// cluster, kills a partition's leader, and sees the leader-change
// counter and the new leader's gauges move.
func TestMetricsFollowLeaderFailover(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	live := []bool{true, true, true}
	if err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "observed", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old, _ := publishToLeader(t, cs, live, "observed", newIDs(50))
	const isLeader = `hermes_raft_is_leader{partition="0",topic="observed"}`
	const changes = `hermes_raft_leader_changes_total{partition="0",topic="observed"}`
	const term = `hermes_raft_term{partition="0",topic="observed"}`
	waitFor(t, 10*time.Second, "the leader's metrics say it leads", func() bool {
		v, ok := metricValue(nodes[old].Metrics(), isLeader)
		return ok && v == 1
	})
	before := make([]float64, len(nodes))
	terms := make([]float64, len(nodes))
	for i, n := range nodes {
		// A follower learns of the leader when the leader's first
		// message reaches it, which the quorum's acknowledgement of the
		// publishes above need not have waited for.
		var text string
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d counts the leader it learned of", i+1), func() bool {
			text = n.Metrics()
			v, ok := metricValue(text, changes)
			before[i] = v
			return ok && v >= 1
		})
		terms[i], _ = metricValue(text, term)
		if i != old {
			if v, _ := metricValue(text, isLeader); v != 0 {
				t.Fatalf("node %d, a follower, says it leads", i+1)
			}
		}
	}
	lag := fmt.Sprintf(`hermes_raft_follower_lag_entries{partition="0",peer="%d",topic="observed"}`, (old+1)%3+1)
	if _, ok := metricValue(nodes[old].Metrics(), lag); !ok {
		t.Fatalf("the leader exports no %s", lag)
	}

	nodes[old].Kill()
	live[old] = false
	nl, _ := publishToLeader(t, cs, live, "observed", newIDs(50))
	if nl == old {
		t.Fatal("the killed node still leads")
	}
	// The dead node falls behind as the new leader publishes.
	publishToLeader(t, cs, live, "observed", newIDs(50))
	deadLag := fmt.Sprintf(`hermes_raft_follower_lag_entries{partition="0",peer="%d",topic="observed"}`, old+1)
	waitFor(t, 15*time.Second, "the new leader's metrics move", func() bool {
		text := nodes[nl].Metrics()
		lead, _ := metricValue(text, isLeader)
		ch, _ := metricValue(text, changes)
		tm, _ := metricValue(text, term)
		hw, _ := metricValue(text, `hermes_partition_high_watermark{partition="0",topic="observed"}`)
		dl, _ := metricValue(text, deadLag)
		return lead == 1 && ch > before[nl] && tm > terms[nl] && hw >= 150 && dl > 0
	})
}

// TestGRPCHealthFollowsQuorum calls the standard gRPC health service of a
// node over a real connection: SERVING in a healthy cluster, NOT_SERVING
// (and /readyz 503 with the reason) once the two other nodes of three
// are gone and the metadata group has no quorum, SERVING again when they
// are back.
func TestGRPCHealthFollowsQuorum(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	_, conn := dial(t, nodes[0])
	hc := healthpb.NewHealthClient(conn)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(ctxT(t, 5*time.Second), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			if status.Code(err) == codes.Unavailable {
				return healthpb.HealthCheckResponse_UNKNOWN
			}
			t.Fatalf("health check %q: %v", svc, err)
		}
		return resp.GetStatus()
	}
	serving := func(want healthpb.HealthCheckResponse_ServingStatus) func() bool {
		return func() bool { return check("") == want && check("hermes.v1.Hermes") == want }
	}
	waitFor(t, 10*time.Second, "SERVING", serving(healthpb.HealthCheckResponse_SERVING))

	nodes[1].Kill()
	nodes[2].Kill()
	waitFor(t, 20*time.Second, "NOT_SERVING without a quorum", serving(healthpb.HealthCheckResponse_NOT_SERVING))
	resp, err := http.Get(nodes[0].HTTPURL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "quorum") {
		t.Fatalf("/readyz without a quorum: %d %q", resp.StatusCode, body)
	}
	if v, ok := metricValue(nodes[0].Metrics(), "hermes_metadata_quorum"); !ok || v != 0 {
		t.Fatalf("hermes_metadata_quorum = %v (present %v) without a quorum", v, ok)
	}

	nodes[1].Launch()
	nodes[2].Launch()
	nodes[1].WaitReady()
	nodes[2].WaitReady()
	waitFor(t, 20*time.Second, "SERVING again", serving(healthpb.HealthCheckResponse_SERVING))
}
