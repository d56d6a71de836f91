package e2e

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestKafkaACLs: ACLs created with Kafka's CreateAcls are the cluster's
// ACLs (gRPC lists them) and the core enforces them on the Kafka
// listener; DescribeAcls and DeleteAcls see and remove them; only a
// principal with alter on the cluster may change them; operations Hermes
// does not have are refused with a message.
func TestKafkaACLs(t *testing.T) {
	n := startAuthNode(t)
	ctx := ctxT(t, 2*time.Minute)
	admin := authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	if _, err := admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: "alice", Password: "alicepass1"}); err != nil {
		t.Fatal(err)
	}
	as := func(user, pass string) *kgo.Client {
		return kafkaClient(t, []string{n.KafkaAddr}, kgo.RetryTimeout(3*time.Second),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	}
	kadmin := kadm.NewClient(as("admin", "adminpass1"))
	alice := as("alice", "alicepass1")
	for _, topic := range []string{"acl-open", "acl-closed"} {
		if _, err := kadmin.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(topic string) error {
		return alice.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("acl-open"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produced with no ACL: %v", err)
	}

	b := kadm.NewACLs().Allow("User:alice").Topics("acl-open").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := kadmin.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateAcls: %v", r.Err)
		}
	}
	list, err := admin.c.ListAcls(ctx, &pb.ListAclsRequest{Filter: &pb.Acl{Principal: "alice"}})
	if err != nil || len(list.Acls) != 2 {
		t.Fatalf("gRPC lists alice's ACLs as %v (%v), want 2", list.GetAcls(), err)
	}
	if err := produce("acl-open"); err != nil {
		t.Fatalf("alice may write acl-open: %v", err)
	}
	if err := produce("acl-closed"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produced to acl-closed: %v", err)
	}

	// DescribeAcls: a MATCH filter by resource name finds them.
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourceName, dreq.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("acl-open"), kmsg.ACLResourcePatternTypeMatch
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	desc, err := dreq.RequestWith(ctx, as("admin", "adminpass1"))
	if err != nil {
		t.Fatal(err)
	}
	if desc.ErrorCode != 0 || len(desc.Resources) != 1 || len(desc.Resources[0].ACLs) != 2 || desc.Resources[0].ACLs[0].Principal != "User:alice" ||
		desc.Resources[0].ACLs[0].Host != "*" {
		t.Fatalf("DescribeAcls: %+v", desc)
	}

	// Alice may not change ACLs; an operation Hermes lacks is refused.
	if res, err := kadm.NewClient(alice).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("acl-closed").Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral)); err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice created an ACL: %v %v", res, err)
	}
	res, err = kadmin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpIdempotentWrite).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || !errors.Is(res[0].Err, kerr.InvalidRequest) || res[0].ErrMessage == "" {
		t.Fatalf("IDEMPOTENT_WRITE: %+v %v", res, err)
	}

	// DeleteAcls removes exactly what it matches, and the core stops
	// allowing it.
	del, err := kadmin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("acl-open").Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls: %+v %v", del, err)
	}
	list, err = admin.c.ListAcls(ctx, &pb.ListAclsRequest{Filter: &pb.Acl{Principal: "alice"}})
	if err != nil || len(list.Acls) != 1 || list.Acls[0].Operation != pb.Operation_OPERATION_DESCRIBE {
		t.Fatalf("after DeleteAcls gRPC lists %v (%v), want describe only", list.GetAcls(), err)
	}
	if err := produce("acl-open"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produced after her ACL was deleted: %v", err)
	}
}

// throttleHook counts the responses whose ThrottleMillis was set.
type throttleHook struct{ n atomic.Int32 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestKafkaProduceQuota: a principal over its produce quota is told to
// back off (ThrottleMillis) and its client gets every record through at
// the quota's rate.
func TestKafkaProduceQuota(t *testing.T) {
	n := startAuthNode(t)
	ctx := ctxT(t, 2*time.Minute)
	admin := authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	if _, err := admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: "alice", Password: "alicepass1"}); err != nil {
		t.Fatal(err)
	}
	const quota = 20000 // bytes/s
	if _, err := admin.c.SetQuota(ctx, &pb.SetQuotaRequest{Quota: &pb.Quota{Principal: "alice", ProduceBytesPerSecond: quota}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{{Principal: "alice", ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC,
		Name: "q", Pattern: pb.PatternType_PATTERN_TYPE_LITERAL, Operation: pb.Operation_OPERATION_WRITE, Permission: pb.Permission_PERMISSION_ALLOW}}}); err != nil {
		t.Fatal(err)
	}
	kadmin := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr}, kgo.SASL(scram.Auth{User: "admin", Pass: "adminpass1"}.AsSha256Mechanism())))
	if _, err := kadmin.CreateTopic(ctx, 1, -1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	hook := &throttleHook{}
	alice := kafkaClient(t, []string{n.KafkaAddr}, kgo.SASL(scram.Auth{User: "alice", Pass: "alicepass1"}.AsSha256Mechanism()),
		kgo.WithHooks(hook), kgo.DefaultProduceTopic("q"), kgo.RetryTimeout(time.Minute))
	start := time.Now()
	const records, size = 20, 5000
	for i := range records {
		if err := alice.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte{'x'}, size)}).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	took := time.Since(start)
	if hook.n.Load() == 0 {
		t.Fatal("no response carried a throttle time")
	}
	// 100 KB at 20 KB/s, less the quota's initial burst.
	if min := time.Duration(records*size-2*quota) * time.Second / quota; took < min {
		t.Fatalf("%d bytes took %v at a quota of %d B/s (at least %v expected)", records*size, took, quota, min)
	}
	t.Logf("%d records of %d bytes in %v, %d throttled responses", records, size, took, hook.n.Load())
}
