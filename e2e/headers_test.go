package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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
		// Random ids make batches differ by a few bytes (their deltas
		// vary); the credit is two of the largest.
		batchBytes = max(batchBytes, int64(len(b)))
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
	// The first delivery spends the whole initial credit (two batches are
	// waiting); later ones depend on when each credit arrives, so only
	// their bound is the same.
	if local[0] != 2 || remote[0] != 2 || slices.Max(local) > 2 || slices.Max(remote) > 2 {
		t.Fatalf("batches per delivery at the coordinator %v, relayed %v; want 2 first and at most 2 (the byte credit) in each", local, remote)
	}
}

// spoofedHeaders are names a node might once have trusted from another
// node or a proxy: the relay marks, a principal, a forwarded user.
var spoofedHeaders = map[string]string{
	"hermes-forwarded": "1", "x-hermes-forwarded": "true", "hermes-node": "1", "hermes-relayed": "1",
	"hermes-principal": "admin", "x-hermes-principal": "admin", "x-forwarded-user": "admin",
	"x-remote-user": "admin", "remote-user": "admin", "x-forwarded-for": "127.0.0.1",
}

// TestClientHeadersCannotSkipAuthorization: with authentication on, on
// every node of a cluster and over gRPC, REST and GraphQL, a client that
// sets any of those headers is still who its credentials say: a reader
// cannot publish and no credentials are refused, whatever it claims; its
// allowed reads still work; nothing it tried is stored.
func TestClientHeadersCannotSkipAuthorization(t *testing.T) {
	pwf := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(pwf, []byte("adminpass1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := testcluster.StartCluster(t, 3, "--auth", "--superusers", "admin", "--bootstrap-user", "admin",
		"--bootstrap-password-file", pwf, "--log-level", "warn")
	ctx := ctxT(t, 3*time.Minute)
	admin := authDriver(t, "grpc", nodes[0], basic("admin", "adminpass1")).(*grpcDriver)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: "bob", Password: "bobpass123"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(ctx, "guarded", cTopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := addACL(ctx, admin, "bob", "guarded"); err != nil {
		t.Fatal(err)
	}
	// A record bob may read.
	if _, err := admin.Publish(ctx, "guarded", "", []cRecord{{Payload: []byte("first")}}); err != nil {
		t.Fatal(err)
	}
	httpHeaders := http.Header{}
	var md []string
	for k, v := range spoofedHeaders {
		httpHeaders.Set(k, v)
		md = append(md, k, v)
	}
	spoofing := func(proto string, n *testcluster.Node, authz string) driver {
		switch proto {
		case "grpc":
			add := func(ctx context.Context) context.Context { return metadata.AppendToOutgoingContext(ctx, md...) }
			conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithPerRPCCredentials(authHeader(authz)),
				grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
					return invoker(add(ctx), method, req, reply, cc, opts...)
				}),
				grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
					return streamer(add(ctx), desc, cc, method, opts...)
				}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return &grpcDriver{c: pb.NewHermesClient(conn)}
		case "rest":
			return &restDriver{base: "http://" + n.HTTPAddr, authz: authz, extra: httpHeaders}
		}
		return &graphqlDriver{addr: n.HTTPAddr, authz: authz, extra: httpHeaders}
	}
	for i, n := range nodes {
		for _, proto := range []string{"grpc", "rest", "graphql"} {
			bob := spoofing(proto, n, basic("bob", "bobpass123"))
			var got []cRecord
			err := retryUnavailable(t, 20*time.Second, func() error {
				var err error
				got, err = bob.Fetch(ctx, "guarded", 0, 0, 10)
				return err
			})
			if err != nil || len(got) != 1 {
				t.Fatalf("%s on node %d: bob's allowed read under the headers: %v, %d records", proto, i+1, err, len(got))
			}
			if _, err := bob.Publish(ctx, "guarded", "", []cRecord{{Payload: []byte("bob")}}); codeOf(err) != "PERMISSION_DENIED" {
				t.Errorf("%s on node %d: bob's publish under the headers: %s, want PERMISSION_DENIED", proto, i+1, codeOf(err))
			}
			if err := bob.CreateTopic(ctx, fmt.Sprintf("bobs-%s-%d", proto, i), cTopicConfig{Partitions: 1}); codeOf(err) != "PERMISSION_DENIED" {
				t.Errorf("%s on node %d: bob's topic creation under the headers: %s, want PERMISSION_DENIED", proto, i+1, codeOf(err))
			}
			anon := spoofing(proto, n, "")
			if _, err := anon.Publish(ctx, "guarded", "", []cRecord{{Payload: []byte("nobody")}}); codeOf(err) != "UNAUTHENTICATED" {
				t.Errorf("%s on node %d: a publish without credentials under the headers: %s, want UNAUTHENTICATED", proto, i+1, codeOf(err))
			}
		}
	}
	got, err := admin.Fetch(ctx, "guarded", 0, 0, 100)
	if err != nil || len(got) != 1 {
		t.Fatalf("the topic holds %d records (%v), want only the admin's", len(got), err)
	}
	topics, err := admin.c.ListTopics(ctx, &pb.ListTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(topics.Topics) != 1 {
		t.Fatalf("topics %v: bob created some", topics.Topics)
	}
}
