package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

func wireCode(err error) string {
	if err == nil {
		return "OK"
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return wire.CodeName(we.Code)
	}
	return err.Error()
}

// TestWireAuthMatrix: the handshake authenticates with a password or an
// API token as the other APIs do, and every frame is authorized by the
// same ACLs: refused handshakes are fatal UNAUTHENTICATED, refused
// requests PERMISSION_DENIED on a connection that goes on, and nothing a
// refusal touched changed.
func TestWireAuthMatrix(t *testing.T) {
	n := startAuthNode(t)
	ctx := ctxT(t, 2*time.Minute)
	admin := authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: "alice", Password: "alicepass1"})
	must(err)
	_, err = admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: "bob", Password: "bobpass123"})
	must(err)
	tok, err := admin.c.CreateToken(ctx, &pb.CreateTokenRequest{Principal: "alice"})
	must(err)
	revoked, err := admin.c.CreateToken(ctx, &pb.CreateTokenRequest{Principal: "alice"})
	must(err)
	_, err = admin.c.RevokeToken(ctx, &pb.RevokeTokenRequest{Id: revoked.Info.Id})
	must(err)
	for _, a := range []*pb.Acl{
		{Principal: "alice", ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC, Name: "wmatrix", Operation: pb.Operation_OPERATION_READ},
		{Principal: "alice", ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC, Name: "wmatrix", Operation: pb.Operation_OPERATION_WRITE},
		{Principal: "alice", ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, Name: "wg", Operation: pb.Operation_OPERATION_READ},
		{Principal: "bob", ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC, Name: "wmatrix", Operation: pb.Operation_OPERATION_DESCRIBE},
	} {
		a.Pattern, a.Permission = pb.PatternType_PATTERN_TYPE_LITERAL, pb.Permission_PERMISSION_ALLOW
		_, err := admin.c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{a}})
		must(err)
	}
	must(admin.CreateTopic(ctx, "wmatrix", cTopicConfig{Partitions: 1}))

	cases := []struct {
		name string
		opts wire.Options
		want string // the handshake's answer, then every request's
	}{
		{"none", wire.Options{}, "UNAUTHENTICATED"},
		{"wrong-password", wire.Options{User: "alice", Password: "nope-nope"}, "UNAUTHENTICATED"},
		{"revoked-token", wire.Options{Token: revoked.Token}, "UNAUTHENTICATED"},
		{"denied", wire.Options{User: "bob", Password: "bobpass123"}, "PERMISSION_DENIED"},
		{"allowed", wire.Options{User: "alice", Password: "alicepass1"}, "OK"},
		{"token", wire.Options{Token: tok.Token}, "OK"},
		{"superuser", wire.Options{User: "admin", Password: "adminpass1"}, "OK"},
	}
	var published []string
	for _, c := range cases {
		id := "wire/" + c.name
		check := func(op string, err error, want string) {
			t.Helper()
			if got := wireCode(err); got != want {
				t.Errorf("%s %s: %s, want %s (%v)", id, op, got, want, err)
			}
		}
		cl, err := wire.Dial(ctx, n.WireAddr, c.opts)
		if c.want == "UNAUTHENTICATED" {
			var we *wire.Error
			if !errors.As(err, &we) || !we.Fatal {
				t.Errorf("%s handshake: %v, want a fatal error", id, err)
			}
			check("handshake", err, c.want)
			if cl != nil {
				cl.Close()
			}
			continue
		}
		must(err)
		top, err := cl.OpenTopic(ctx, "wmatrix") // bob may describe it
		must(err)
		for _, mode := range []uint8{wire.ModeConsistent, wire.ModePerformance} {
			_, err = cl.Publish(ctx, top.ID, 0, mode, []record.Record{{Payload: []byte(id)}})
			check(fmt.Sprint("publish mode ", mode), err, c.want)
			if err == nil && mode == wire.ModeConsistent {
				published = append(published, id)
			}
		}
		_, err = cl.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Start: wire.StartEarliest})
		check("subscribe", err, c.want)
		_, err = cl.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Group: "wg", Start: wire.StartEarliest})
		check("join group", err, c.want)
		if _, err := cl.Ping(ctx); err != nil {
			t.Errorf("%s: the connection ended after the refusals: %v", id, err)
		}
		cl.Close()
	}
	recs, err := admin.Fetch(ctx, "wmatrix", 0, 0, 100)
	must(err)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Payload))
	}
	if !slices.Equal(got, published) {
		t.Errorf("the topic holds %v, want the allowed publishes %v", got, published)
	}
	if log := n.Log(5000); !strings.Contains(log, "authentication failed") || !strings.Contains(log, "request denied") {
		t.Error("refusals over hermes-wire are not in the audit log")
	}
}

// TestWireTLSClientCertificate: over TLS, a client certificate names the
// connection's principal; without one (and without credentials) the
// handshake is refused when authentication is required.
func TestWireTLSClientCertificate(t *testing.T) {
	certs := testcluster.Certs(t)
	n := startAuthNode(t, serverTLSArgs(t)...)
	ctx := ctxT(t, 30*time.Second)
	admin, err := wire.Dial(ctx, n.WireAddr, wire.Options{TLS: clientTLS(t, certs, "admin")})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if admin.Principal != "admin" {
		t.Fatalf("principal %q, want admin (from the certificate)", admin.Principal)
	}
	if _, err := wire.Dial(ctx, n.WireAddr, wire.Options{TLS: clientTLS(t, certs, "")}); wireCode(err) != "UNAUTHENTICATED" {
		t.Fatalf("TLS without a client certificate: %v, want UNAUTHENTICATED", err)
	}
	if _, err := wire.Dial(context.Background(), n.WireAddr, wire.Options{DialTimeout: 3 * time.Second}); err == nil {
		t.Fatal("a plaintext client got through the TLS listener")
	}
}

// TestSDKOverWireAuthenticates: the Go SDK dialled with wire:// sends its
// credentials in the handshake and with every gRPC call it makes for
// administration; wrong ones fail Dial at once with UNAUTHENTICATED.
func TestSDKOverWireAuthenticates(t *testing.T) {
	n := startAuthNode(t)
	ctx := ctxT(t, time.Minute)
	admin := authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	if _, err := admin.c.CreateUser(ctx, &pb.CreateUserRequest{Name: "carol", Password: "carolpass1"}); err != nil {
		t.Fatal(err)
	}
	for _, op := range []pb.Operation{pb.Operation_OPERATION_READ, pb.Operation_OPERATION_WRITE, pb.Operation_OPERATION_DESCRIBE} {
		a := &pb.Acl{Principal: "carol", ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC, Name: "sdkwire", Operation: op,
			Pattern: pb.PatternType_PATTERN_TYPE_LITERAL, Permission: pb.Permission_PERMISSION_ALLOW}
		if _, err := admin.c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{a}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.CreateTopic(ctx, "sdkwire", cTopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if _, err := client.Dial(ctx, "wire://"+n.WireAddr, client.WithCredentials("carol", "wrong-password")); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("wrong password: %v, want UNAUTHENTICATED", err)
	} else if time.Since(start) > 5*time.Second {
		t.Errorf("a refused handshake took %v: it was retried", time.Since(start))
	}

	c, err := client.Dial(ctx, "wire://"+n.WireAddr, client.WithCredentials("carol", "carolpass1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acks, err := c.Publish(ctx, "sdkwire", []*client.Message{{Payload: []byte("by carol")}})
	if err != nil || len(acks) != 1 {
		t.Fatalf("publish: %v %v", acks, err)
	}
	info, err := c.DescribeTopic(ctx, "sdkwire") // over gRPC, as carol
	if err != nil || info.Partitions[0].EndOffset != 1 {
		t.Fatalf("describe: %+v %v", info, err)
	}
	if _, err := c.CreateTopic(ctx, "not-carols"); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("create a topic carol may not: %v, want PERMISSION_DENIED", err)
	}
	cs, err := c.Subscribe(ctx, "sdkwire", client.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	m, err := cs.Next(ctx)
	if err != nil || string(m.Payload) != "by carol" {
		t.Fatalf("next: %v %v", m, err)
	}
}
