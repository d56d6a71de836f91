package e2e

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Nodes talk to each other over their own service, never through the
// public API: no metadata header a client sets changes what a node does.
// A publish marked as "already relayed" (the header relays once used) on
// a node that does not lead the partition is still relayed to the leader,
// a bad batch under the same headers is still refused, and a group member
// so marked on a node that does not coordinate groups is still relayed
// to the coordinator.
func TestClientHeadersChangeNothing(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	live := []bool{true, true, true}
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "marked", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	leader, _ := publishToLeader(t, cs, live, "marked", newIDs(1))
	follower := (leader + 1) % 3
	marked := func() []string {
		return []string{"hermes-forwarded", "1", "x-hermes-forwarded", "true", "hermes-node", "3", "hermes-relayed", "1", "hermes-principal", "admin"}
	}
	p0 := int32(0)
	ctx := metadata.AppendToOutgoingContext(ctxT(t, 10*time.Second), marked()...)
	resp, err := cs[follower].Publish(ctx, &pb.PublishRequest{Topic: "marked", Partition: &p0, Batch: packed(newIDs(5), 16)})
	if err != nil {
		t.Fatalf("a marked publish on a follower was not relayed: %v", err)
	}
	if resp.LeaderAddress != nodes[leader].GRPCAddr || resp.BaseOffset != 1 {
		t.Fatalf("a marked publish on a follower: %+v; want it stored at offset 1 by the leader %s", resp, nodes[leader].GRPCAddr)
	}
	bad := packed(newIDs(2), 16)
	bad[len(bad)-1] ^= 0xff // the CRC no longer matches
	ctx = metadata.AppendToOutgoingContext(ctxT(t, 10*time.Second), marked()...)
	_, err = cs[follower].Publish(ctx, &pb.PublishRequest{Topic: "marked", Partition: &p0, Batch: bad})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a corrupt batch under the headers: %v; want InvalidArgument", err)
	}
	for i := range cs {
		if got := readAll(t, cs[i], "marked", 0); len(got) < 6 && i == leader {
			t.Fatalf("the leader holds %d records, want 6", len(got))
		}
	}

	// A group member marked the same way, on a node that does not
	// coordinate groups.
	desc, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	other := 0
	for other+1 == int(desc.MetadataLeader) {
		other++
	}
	sctx := metadata.AppendToOutgoingContext(ctxT(t, 20*time.Second), marked()...)
	stream, err := cs[other].Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: &pb.SubscribeOptions{
		Topic: "marked", Group: "readers", Start: &pb.StartPosition{Position: &pb.StartPosition_Earliest{Earliest: true}}, CreditRecords: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetSubscribed() == nil {
		t.Fatalf("a marked member on node %d: %v, %v", other+1, first, err)
	}
	if got := first.GetSubscribed().GetCoordinatorAddress(); got != nodes[desc.MetadataLeader-1].GRPCAddr {
		t.Fatalf("a marked member on node %d was not relayed to the coordinator (node %d): coordinator %q", other+1, desc.MetadataLeader, got)
	}
	received := 0
	for received < 6 {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d records: %v", received, err)
		}
		received += len(msg.GetDeliveries().GetRecords())
	}
}

// A group member relayed to the coordinator gets what a member on the
// coordinator gets: the same packed batches, within the same byte credit.
func TestRelayedMemberKeepsCreditAndPacking(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "credit", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var batchBytes int64
	for i := 0; i < 10; i++ {
		b := packed(newIDs(5), 100)
		batchBytes = int64(len(b))
		p0 := int32(0)
		if _, err := cs[0].Publish(ctxT(t, 10*time.Second), &pb.PublishRequest{Topic: "credit", Partition: &p0, Batch: b}); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	coordinator := int(desc.MetadataLeader) - 1
	relayed := (coordinator + 1) % 3
	deliveries := func(node int, group string) []int {
		t.Helper()
		stream, err := cs[node].Subscribe(ctxT(t, 20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		err = stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: &pb.SubscribeOptions{Topic: "credit", Group: group, Packed: true,
			Start: &pb.StartPosition{Position: &pb.StartPosition_Earliest{Earliest: true}}, CreditRecords: 1000, CreditBytes: 2 * batchBytes}}})
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		received := 0
		for received < 50 {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("node %d: after %d records: %v", node+1, received, err)
			}
			d := resp.GetDeliveries()
			if d == nil {
				continue
			}
			if len(d.Records) > 0 {
				t.Fatalf("node %d: unpacked records in a packed subscription", node+1)
			}
			n := 0
			for _, b := range d.Batches {
				recs, err := record.DecodeRecords(nil, b.Data)
				if err != nil {
					t.Fatal(err)
				}
				n += len(recs)
			}
			received += n
			sizes = append(sizes, len(d.Batches))
			// Credit for what was delivered, as a client gives it back.
			var bytes int64
			for _, b := range d.Batches {
				bytes += int64(len(b.Data))
			}
			stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Credit{Credit: &pb.Credit{Records: int32(n), Bytes: bytes}}})
		}
		stream.CloseSend()
		return sizes
	}
	local := deliveries(coordinator, "at-the-coordinator")
	remote := deliveries(relayed, "relayed")
	if !slices.Equal(local, remote) || slices.Max(local) > 2 {
		t.Fatalf("batches per delivery at the coordinator %v, relayed %v; want the same, at most 2 (the byte credit)", local, remote)
	}
}
