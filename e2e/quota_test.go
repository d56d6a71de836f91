package e2e

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// A principal with a produce quota publishes at most its rate (within
// 10%, plus the one second of burst a quota allows), retrying as the
// retry hints say, while a principal without a quota, publishing at the
// same time, is never throttled. HERMES_QUOTA_SECONDS sets the run's
// length (default 10).
func TestProduceQuota(t *testing.T) {
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("HERMES_QUOTA_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	n := startAuthNode(t)
	admin := authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	ctx := ctxT(t, time.Duration(secs+60)*time.Second)
	for _, u := range []string{"alice", "bob"} {
		if _, err := admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: u, Password: u + "pass123"}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{{Principal: u, ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC,
			Name: "q-" + u, Operation: pb.Operation_OPERATION_WRITE, Permission: pb.Permission_PERMISSION_ALLOW}}}); err != nil {
			t.Fatal(err)
		}
		createTopic(t, admin.c, "q-"+u, 1)
	}
	const quota = 256 << 10
	if _, err := admin.c.SetQuota(ctx, &pb.SetQuotaRequest{Quota: &pb.Quota{Principal: "alice", ProduceBytesPerSecond: quota}}); err != nil {
		t.Fatal(err)
	}
	batch := packed(newIDs(16), 1000) // about 16 KB
	type result struct {
		bytes, throttled int64
	}
	run := func(user string, out *result, wg *sync.WaitGroup) {
		defer wg.Done()
		c := authDriver(t, "grpc", n, basic(user, user+"pass123")).(*grpcDriver).c
		end := time.Now().Add(time.Duration(secs) * time.Second)
		p0 := int32(0)
		for time.Now().Before(end) {
			_, err := c.Publish(ctx, &pb.PublishRequest{Topic: "q-" + user, Partition: &p0, Batch: batch})
			if err == nil {
				out.bytes += int64(len(batch))
				continue
			}
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("%s: %v", user, err)
				return
			}
			out.throttled++
			wait := 10 * time.Millisecond
			for _, d := range status.Convert(err).Details() {
				if info, ok := d.(*pb.ErrorInfo); ok && info.RetryAfterMs > 0 {
					wait = time.Duration(info.RetryAfterMs) * time.Millisecond
				}
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
		}
	}
	var alice, bob result
	var wg sync.WaitGroup
	wg.Add(2)
	go run("alice", &alice, &wg)
	go run("bob", &bob, &wg)
	wg.Wait()
	limit := float64(quota) * (float64(secs)*1.1 + 1)
	rate := float64(alice.bytes) / float64(secs)
	t.Logf("alice (quota %d B/s): %.0f B/s, throttled %d times; bob (no quota): %.0f B/s", quota, rate, alice.throttled, float64(bob.bytes)/float64(secs))
	if float64(alice.bytes) > limit {
		t.Errorf("alice published %d bytes in %d s: over her quota of %d B/s (limit with burst and 10%%: %.0f)", alice.bytes, secs, quota, limit)
	}
	if float64(alice.bytes) < float64(quota)*float64(secs)*0.7 {
		t.Errorf("alice published %d bytes in %d s: far below her quota of %d B/s", alice.bytes, secs, quota)
	}
	if alice.throttled == 0 {
		t.Error("alice was never throttled")
	}
	if bob.throttled != 0 || bob.bytes <= alice.bytes {
		t.Errorf("bob (no quota) was throttled %d times, published %d bytes (alice %d)", bob.throttled, bob.bytes, alice.bytes)
	}
}
