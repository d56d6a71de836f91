package e2e

import (
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestPublishStreamAnswersEveryRequest closes the sending side right
// after many requests: the stream must answer every one of them before it
// ends, since an unanswered publish leaves the client unsure.
func TestPublishStreamAnswersEveryRequest(t *testing.T) {
	node := testcluster.StartNode(t)
	c, _ := dial(t, node)
	createTopic(t, c, "answers", 2)
	for round := 0; round < 5; round++ {
		stream, err := c.PublishStream(ctxT(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		for i := uint64(1); i <= n; i++ {
			p := int32(i % 2)
			if err := stream.Send(&pb.PublishRequest{RequestId: i, Topic: "answers", Partition: &p, Batch: packed(newIDs(10), 50)}); err != nil {
				t.Fatal(err)
			}
		}
		stream.CloseSend()
		seen := map[uint64]bool{}
		for {
			resp, err := stream.Recv()
			if err != nil {
				break
			}
			if resp.Error != nil {
				t.Fatalf("request %d failed: %v", resp.RequestId, resp.Error)
			}
			seen[resp.RequestId] = true
		}
		if len(seen) != n {
			t.Fatalf("round %d: %d of %d requests answered before the stream ended", round, len(seen), n)
		}
	}
}
