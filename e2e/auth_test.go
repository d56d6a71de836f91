package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// authHeader sends an authorization header with every gRPC call.
type authHeader string

func (a authHeader) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if a == "" {
		return nil, nil
	}
	return map[string]string{"authorization": string(a)}, nil
}

func (a authHeader) RequireTransportSecurity() bool { return false }

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// authDriver is a driver of protocol proto calling node with authz.
func authDriver(t *testing.T, proto string, node *testcluster.Node, authz string) driver {
	switch proto {
	case "grpc":
		conn, err := grpc.NewClient(node.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(authHeader(authz)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return &grpcDriver{c: pb.NewHermesClient(conn)}
	case "rest":
		return &restDriver{base: "http://" + node.HTTPAddr, authz: authz}
	case "graphql":
		return &graphqlDriver{addr: node.HTTPAddr, authz: authz}
	}
	t.Fatalf("no protocol %s", proto)
	return nil
}

// addACL allows principal to read topic, through d's protocol (an ACL
// administration request).
func addACL(ctx context.Context, d driver, principal, topic string) error {
	switch d := d.(type) {
	case *grpcDriver:
		_, err := d.c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{{Principal: principal, ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC,
			Name: topic, Pattern: pb.PatternType_PATTERN_TYPE_LITERAL, Operation: pb.Operation_OPERATION_READ, Permission: pb.Permission_PERMISSION_ALLOW}}})
		return grpcErr(err)
	case *restDriver:
		return d.do(ctx, "POST", "/v1/acls", map[string]any{"acls": []any{map[string]any{
			"principal": principal, "resource_type": "topic", "name": topic, "operation": "read", "permission": "allow"}}}, nil)
	case *graphqlDriver:
		return d.op(ctx, `mutation($p: String!, $n: String!) { createAcls(acls: [{principal: $p, resourceType: TOPIC, name: $n, operation: READ, permission: ALLOW}]) }`,
			map[string]any{"p": principal, "n": topic}, nil)
	}
	return errors.New("unknown driver")
}

// describeGroup describes group through d's protocol.
func describeGroup(ctx context.Context, d driver, group string) error {
	switch d := d.(type) {
	case *grpcDriver:
		_, err := d.c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: group})
		return grpcErr(err)
	case *restDriver:
		return d.do(ctx, "GET", "/v1/groups/"+group, nil, nil)
	case *graphqlDriver:
		return d.op(ctx, `query($g: String!) { group(id: $g) { partitions { partition committed } } }`, map[string]any{"g": group}, nil)
	}
	return errors.New("unknown driver")
}

func codeOf(err error) string {
	if err == nil {
		return "OK"
	}
	var ce codeError
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return "ERROR(" + err.Error() + ")"
}

// startAuthNode starts a node that requires authentication, with the
// superuser admin (password adminpass1) created at start.
func startAuthNode(t *testing.T, extra ...string) *testcluster.Node {
	pwf := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(pwf, []byte("adminpass1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testcluster.StartNode(t, append([]string{"--auth", "--superusers", "admin", "--bootstrap-user", "admin",
		"--bootstrap-password-file", pwf, "--log-level", "info"}, extra...)...)
	creds := insecure.NewCredentials()
	if slices.Contains(extra, "--tls-cert") {
		creds = credentials.NewTLS(clientTLS(t, testcluster.Certs(t), ""))
	}
	conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(creds), grpc.WithPerRPCCredentials(authHeader(basic("admin", "adminpass1"))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := &grpcDriver{c: pb.NewHermesClient(conn)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := admin.c.WhoAmI(ctxT(t, 5*time.Second), &pb.WhoAmIRequest{})
		if err == nil && r.Principal == "admin" && r.AuthRequired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bootstrap user cannot log in: %+v, %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// One matrix over every protocol: each API × {no credentials, a wrong
// password, a revoked token, a principal no ACL allows, a principal ACLs
// allow (by password and by token), a superuser}. Refusals carry the
// protocol's code for UNAUTHENTICATED or PERMISSION_DENIED, and change
// nothing: afterwards the topic holds exactly the records of the allowed
// publishes, and topics, deletions and ACLs are exactly the allowed ones.
func TestAuthMatrix(t *testing.T) {
	n := startAuthNode(t)
	ctx := ctxT(t, 5*time.Minute)
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
	tok, err := admin.c.CreateToken(ctx, &pb.CreateTokenRequest{Principal: "alice", Description: "matrix"})
	must(err)
	revoked, err := admin.c.CreateToken(ctx, &pb.CreateTokenRequest{Principal: "alice"})
	must(err)
	_, err = admin.c.RevokeToken(ctx, &pb.RevokeTokenRequest{Id: revoked.Info.Id})
	must(err)
	allow := func(p string, rt pb.ResourceType, name string, prefix bool, ops ...pb.Operation) {
		for _, op := range ops {
			pat := pb.PatternType_PATTERN_TYPE_LITERAL
			if prefix {
				pat = pb.PatternType_PATTERN_TYPE_PREFIX
			}
			_, err := admin.c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{{Principal: p, ResourceType: rt, Name: name, Pattern: pat,
				Operation: op, Permission: pb.Permission_PERMISSION_ALLOW}}})
			must(err)
		}
	}
	topic, group := pb.ResourceType_RESOURCE_TYPE_TOPIC, pb.ResourceType_RESOURCE_TYPE_GROUP
	allow("alice", topic, "matrix", false, pb.Operation_OPERATION_READ, pb.Operation_OPERATION_WRITE)
	allow("alice", topic, "m-", true, pb.Operation_OPERATION_CREATE, pb.Operation_OPERATION_DELETE)
	allow("alice", group, "g1", false, pb.Operation_OPERATION_READ)
	allow("bob", topic, "matrix", false, pb.Operation_OPERATION_DESCRIBE)

	must(admin.CreateTopic(ctx, "matrix", cTopicConfig{Partitions: 1}))
	_, err = admin.Publish(ctx, "matrix", "consistent", []cRecord{{Payload: []byte("seed")}})
	must(err)
	must(admin.Commit(ctx, "g1", "", "matrix", 0, 1))

	cases := []struct {
		name  string
		authz string
		want  string // what every operation answers, but ACL administration
		acl   string // what ACL administration answers
	}{
		{"none", "", "UNAUTHENTICATED", "UNAUTHENTICATED"},
		{"wrong-password", basic("alice", "not-the-password"), "UNAUTHENTICATED", "UNAUTHENTICATED"},
		{"revoked-token", "Bearer " + revoked.Token, "UNAUTHENTICATED", "UNAUTHENTICATED"},
		{"denied", basic("bob", "bobpass123"), "PERMISSION_DENIED", "PERMISSION_DENIED"},
		{"allowed", basic("alice", "alicepass1"), "OK", "PERMISSION_DENIED"},
		{"token", "Bearer " + tok.Token, "OK", "PERMISSION_DENIED"},
		{"superuser", basic("admin", "adminpass1"), "OK", "OK"},
	}
	protos := []string{"grpc", "rest", "graphql"}
	for _, proto := range protos {
		for _, c := range cases {
			must(admin.CreateTopic(ctx, "m-del-"+proto+"-"+c.name, cTopicConfig{Partitions: 1}))
		}
	}
	var published []string
	for _, proto := range protos {
		for _, c := range cases {
			d := authDriver(t, proto, n, c.authz)
			id := proto + "/" + c.name
			check := func(op string, err error, want string) {
				t.Helper()
				if got := codeOf(err); got != want {
					t.Errorf("%s %s: %s, want %s (%v)", id, op, got, want, err)
				}
			}
			_, err := d.Publish(ctx, "matrix", "consistent", []cRecord{{Payload: []byte(id)}})
			check("publish", err, c.want)
			if err == nil {
				published = append(published, id)
			}
			_, err = d.Fetch(ctx, "matrix", 0, 0, 10)
			check("fetch", err, c.want)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			sub, err := d.Subscribe(sctx, "matrix", cSubOpts{AckMode: "manual", Start: "earliest"})
			if err == nil {
				_, err = sub.Next(sctx)
				sub.Close()
			}
			cancel()
			check("subscribe", err, c.want)
			check("commit", d.Commit(ctx, "g1", "", "matrix", 0, 1), c.want)
			check("create topic", d.CreateTopic(ctx, "m-new-"+proto+"-"+c.name, cTopicConfig{Partitions: 1}), c.want)
			check("delete topic", d.DeleteTopic(ctx, "m-del-"+proto+"-"+c.name), c.want)
			check("describe group", describeGroup(ctx, d, "g1"), c.want)
			check("ACL administration", addACL(ctx, d, "p-"+proto+"-"+c.name, "matrix"), c.acl)
		}
	}

	// Nothing a refusal touched changed.
	recs, err := admin.Fetch(ctx, "matrix", 0, 0, 1000)
	must(err)
	var got []string
	for _, r := range recs[1:] {
		got = append(got, string(r.Payload))
	}
	if !slices.Equal(got, published) {
		t.Errorf("the topic holds %v, want the allowed publishes %v", got, published)
	}
	topics, err := admin.c.ListTopics(ctx, &pb.ListTopicsRequest{})
	must(err)
	exists := map[string]bool{}
	for _, ti := range topics.Topics {
		exists[ti.Name] = true
	}
	acls, err := admin.c.ListAcls(ctx, &pb.ListAclsRequest{})
	must(err)
	principals := map[string]bool{}
	for _, a := range acls.Acls {
		principals[a.Principal] = true
	}
	for _, proto := range protos {
		for _, c := range cases {
			allowed := c.want == "OK"
			if exists["m-new-"+proto+"-"+c.name] != allowed {
				t.Errorf("%s/%s: topic created = %v, want %v", proto, c.name, exists["m-new-"+proto+"-"+c.name], allowed)
			}
			if exists["m-del-"+proto+"-"+c.name] == allowed {
				t.Errorf("%s/%s: topic deleted = %v, want %v", proto, c.name, !exists["m-del-"+proto+"-"+c.name], allowed)
			}
			if principals["p-"+proto+"-"+c.name] != (c.acl == "OK") {
				t.Errorf("%s/%s: ACL added = %v, want %v", proto, c.name, principals["p-"+proto+"-"+c.name], c.acl == "OK")
			}
		}
	}
	// Refusals are in the audit log, and counted.
	log := n.Log(5000)
	for _, want := range []string{"authentication failed", "request denied", "acls added", "user created", "token revoked"} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the log", want)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+n.HTTPAddr+"/metrics", nil)
	req.Header.Set("Authorization", basic("admin", "adminpass1"))
	resp, err := http.DefaultClient.Do(req)
	must(err)
	body := new(strings.Builder)
	fmt.Fprint(body, resp.Status)
	buf := make([]byte, 1<<20)
	for {
		k, err := resp.Body.Read(buf)
		body.Write(buf[:k])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	for _, m := range []string{"hermes_authentication_failures_total", "hermes_authorization_denials_total"} {
		if !strings.Contains(body.String(), m) || strings.Contains(body.String(), m+" 0\n") {
			t.Errorf("metric %s missing or zero", m)
		}
	}
	// /metrics needs a principal that may describe the cluster.
	req, _ = http.NewRequest("GET", "http://"+n.HTTPAddr+"/metrics", nil)
	req.Header.Set("Authorization", basic("alice", "alicepass1"))
	resp, err = http.DefaultClient.Do(req)
	must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/metrics as alice: %s, want 403", resp.Status)
	}
}

// Users, tokens and ACLs live in the metadata group: created through one
// node, they hold on every node; a token revoked on one is refused by
// all. The nodes also talk mutual TLS (the cluster tests' default).
func TestAuthCluster(t *testing.T) {
	pwf := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(pwf, []byte("adminpass1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := testcluster.StartCluster(t, 3, "--auth", "--superusers", "admin", "--bootstrap-user", "admin",
		"--bootstrap-password-file", pwf, "--log-level", "warn")
	ctx := ctxT(t, 2*time.Minute)
	admins := make([]*grpcDriver, 3)
	for i, n := range nodes {
		admins[i] = authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	}
	eventually := func(what string, f func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := f()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	eventually("the bootstrap user on node 1", func() error {
		_, err := admins[0].c.CreateUser(ctx, &pb.CreateUserRequest{Name: "alice", Password: "alicepass1"})
		return err
	})
	tok, err := admins[1].c.CreateToken(ctx, &pb.CreateTokenRequest{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admins[0].c.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: []*pb.Acl{{Principal: "alice", ResourceType: pb.ResourceType_RESOURCE_TYPE_TOPIC,
		Name: "*", Operation: pb.Operation_OPERATION_ALL, Permission: pb.Permission_PERMISSION_ALLOW}}}); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		for _, authz := range []string{basic("alice", "alicepass1"), "Bearer " + tok.Token} {
			d := authDriver(t, "grpc", n, authz).(*grpcDriver)
			eventually(fmt.Sprintf("alice on node %d", i+1), func() error {
				r, err := d.c.WhoAmI(ctx, &pb.WhoAmIRequest{})
				if err != nil {
					return err
				}
				if r.Principal != "alice" {
					return fmt.Errorf("principal %q", r.Principal)
				}
				return d.CreateTopic(ctx, fmt.Sprintf("t-%d-%d", i, len(authz)), cTopicConfig{Partitions: 1})
			})
		}
	}
	if _, err := admins[2].c.RevokeToken(ctx, &pb.RevokeTokenRequest{Id: tok.Info.Id}); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		d := authDriver(t, "grpc", n, "Bearer "+tok.Token).(*grpcDriver)
		eventually(fmt.Sprintf("the revoked token on node %d", i+1), func() error {
			_, err := d.c.WhoAmI(ctx, &pb.WhoAmIRequest{})
			if codeOf(grpcErr(err)) != "UNAUTHENTICATED" {
				return fmt.Errorf("still accepted: %v", err)
			}
			return nil
		})
	}
}

// A client certificate names its principal: with --auth, alice's
// certificate is alice, and ACLs apply to her as to a password login.
func TestAuthClientCertificate(t *testing.T) {
	certs := testcluster.Certs(t)
	n := startAuthNode(t, serverTLSArgs(t)...)
	adminTLS := clientTLS(t, certs, "admin")
	admin, err := client.Dial(ctxT(t, 10*time.Second), n.GRPCAddr, client.WithTLS(adminTLS))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateTopic(ctxT(t, 10*time.Second), "certs", client.WithPartitionCount(1)); err != nil {
		t.Fatalf("the superuser by certificate: %v", err)
	}
	alice, err := client.Dial(ctxT(t, 10*time.Second), n.GRPCAddr, client.WithTLS(clientTLS(t, certs, "alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if _, err := alice.Publish(ctxT(t, 10*time.Second), "certs", []*client.Message{{Payload: []byte("x")}}); !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("alice by certificate, no ACL: %v, want PERMISSION_DENIED", err)
	}
	anon, err := client.Dial(ctxT(t, 10*time.Second), n.GRPCAddr, client.WithTLS(clientTLS(t, certs, "")), client.WithRetry(1, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.ListTopics(ctxT(t, 10*time.Second)); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("TLS without a client certificate or credentials: %v, want UNAUTHENTICATED", err)
	}
}

// A node refuses to listen beyond loopback without TLS and
// authentication, unless told to accept it.
func TestServeRefusesOpenListeners(t *testing.T) {
	bin := testcluster.Binary(t)
	out, err := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--grpc-addr", "0.0.0.0:0", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to listen beyond loopback") || !strings.Contains(string(out), "--allow-insecure") {
		t.Fatalf("serve on 0.0.0.0 without security: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "0.0.0.0:0", "--peers", "1=0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--raft-addr") {
		t.Fatalf("serve with a node listener on 0.0.0.0 without node TLS: %v\n%s", err, out)
	}
}

// TestAuthExemptsHealthNotReflection: on a node that requires
// authentication, probes call the health services without credentials;
// server reflection and the API answer only an authenticated caller.
func TestAuthExemptsHealthNotReflection(t *testing.T) {
	n := startAuthNode(t)
	anon, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	ctx := ctxT(t, 10*time.Second)
	// The health service follows readiness; answered at all, it was
	// exempt. It says SERVING once the node's readiness was looked at.
	waitFor(t, 10*time.Second, "grpc.health.v1 says SERVING without credentials", func() bool {
		r, err := healthpb.NewHealthClient(anon).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("grpc.health.v1 Check without credentials: %v", err)
		}
		return r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	if _, err := pb.NewHermesClient(anon).Health(ctx, &pb.HealthRequest{}); err != nil {
		t.Fatalf("Health without credentials: %v", err)
	}
	if _, err := pb.NewHermesClient(anon).ListTopics(ctx, &pb.ListTopicsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListTopics without credentials: %v, want Unauthenticated", err)
	}
	listServices := func(conn *grpc.ClientConn) error {
		rc, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		defer rc.CloseSend()
		if err := rc.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		// io.EOF from Send: the server ended the stream first (a
		// refusal), and Recv returns its status.
		resp, err := rc.Recv()
		if err == nil && len(resp.GetListServicesResponse().GetService()) == 0 {
			err = errors.New("no services listed")
		}
		return err
	}
	if err := listServices(anon); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("reflection without credentials: %v, want Unauthenticated", err)
	}
	authed, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(authHeader(basic("admin", "adminpass1"))))
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Close()
	if err := listServices(authed); err != nil {
		t.Fatalf("reflection with credentials: %v", err)
	}
}
