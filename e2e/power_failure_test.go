package e2e

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestPowerFailureNeverTopicNotFound kills every node of a cluster at
// once and restarts them. A node that has not caught up with the metadata
// group is not ready, and never answers "topic not found" (final, for
// clients) for a topic it cannot know about: it answers UNAVAILABLE
// (retriable). Once ready, every node knows every topic.
func TestPowerFailureNeverTopicNotFound(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3)
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "pf",
			Config: &pb.TopicConfig{Partitions: 3, ReplicationFactor: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	publishToLeader(t, cs, live, "pf", newIDs(10))

	for _, n := range nodes {
		n.Kill()
	}
	// One node alone: no metadata quorum.
	nodes[0].Launch()
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if nodes[0].Ready() {
			t.Fatal("a node alone of three (no metadata quorum) says it is ready")
		}
		for _, name := range []string{"pf", "never-created"} {
			_, err := cs[0].DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: name})
			if status.Code(err) == codes.NotFound {
				t.Fatalf("topic %q, asked of a node that cannot reach the metadata leader: %v (want UNAVAILABLE)", name, err)
			}
			if name == "never-created" && status.Code(err) != codes.Unavailable {
				t.Fatalf("topic %q, asked of a node that cannot reach the metadata leader: %v (want UNAVAILABLE)", name, err)
			}
		}
	}
	nodes[1].Launch()
	nodes[2].Launch()
	for _, n := range nodes {
		n.WaitReady()
	}
	// Ready: every node knows every topic at once, and knows which do not
	// exist.
	for i, c := range cs {
		if _, err := c.DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: "pf"}); err != nil {
			t.Errorf("node %d, ready, describing an existing topic: %v", i+1, err)
		}
		_, err := c.DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: "never-created"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("node %d, ready, describing a topic never created: %v (want NOT_FOUND)", i+1, err)
		}
	}
	publishToLeader(t, cs, live, "pf", newIDs(10))
}
