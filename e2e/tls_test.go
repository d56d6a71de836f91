package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/cluster"
	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/internal/tlsconf"
	"github.com/hermes-mq/hermes/pkg/client"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// clientTLS is a client configuration trusting the test CA in dir, with
// the client certificate of name when not "".
func clientTLS(t *testing.T, dir, name string) *tls.Config {
	t.Helper()
	f := tlsconf.Files{CA: tlsconf.CAFile(dir)}
	if name != "" {
		f = tlsconf.ClientFiles(dir, name)
	}
	c, err := tlsconf.Client(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// otherCA writes a second, unrelated CA with its own node and client
// certificates.
func otherCA(t *testing.T) string {
	dir := t.TempDir()
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: dir, Nodes: 4, Clients: []string{"mallory"}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serverTLSArgs serves the client listeners with node 1's certificate,
// taking client certificates of the test CA.
func serverTLSArgs(t *testing.T) []string {
	dir := testcluster.Certs(t)
	f := tlsconf.NodeFiles(dir, 1)
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-client-ca", f.CA}
}

// A node started with --tls-cert serves gRPC, REST and GraphQL over TLS
// only: a client trusting its CA publishes and reads back, with or
// without a client certificate; a plaintext client and a client trusting
// another CA get nothing; the CLI and hermes bench connect with --tls-ca.
func TestTLSClientListeners(t *testing.T) {
	dir := testcluster.Certs(t)
	n := testcluster.StartNode(t, append(serverTLSArgs(t), "--log-level", "warn")...)
	ctx := ctxT(t, 60*time.Second)

	for _, name := range []string{"", "alice"} {
		c, err := client.Dial(ctx, n.GRPCAddr, client.WithTLS(clientTLS(t, dir, name)))
		if err != nil {
			t.Fatalf("dial over TLS (client certificate %q): %v", name, err)
		}
		topic := "tls-" + name
		if name == "" {
			topic = "tls-anonymous"
		}
		if _, err := c.CreateTopic(ctx, topic, client.WithPartitionCount(1)); err != nil {
			t.Fatalf("create topic over TLS: %v", err)
		}
		if _, err := c.Publish(ctx, topic, []*client.Message{{Payload: []byte("over tls")}}); err != nil {
			t.Fatalf("publish over TLS: %v", err)
		}
		sub, err := c.Subscribe(ctx, topic, client.FromBeginning())
		if err != nil {
			t.Fatalf("subscribe over TLS: %v", err)
		}
		m, err := sub.Next(ctx)
		if err != nil || string(m.Payload) != "over tls" {
			t.Fatalf("consume over TLS: %+v, %v", m, err)
		}
		sub.Close()
		c.Close()
	}

	// Plaintext: refused (the handshake fails).
	plain, err := client.Dial(ctxT(t, 5*time.Second), n.GRPCAddr, client.WithDialTimeout(2*time.Second), client.WithRetry(1, 10*time.Millisecond))
	if err == nil {
		_, err = plain.ListTopics(ctxT(t, 3*time.Second))
		plain.Close()
	}
	if err == nil {
		t.Fatal("a plaintext client was served by a TLS listener")
	}
	// A client trusting another CA does not trust the node.
	foreign, err := client.Dial(ctxT(t, 5*time.Second), n.GRPCAddr, client.WithTLS(clientTLS(t, otherCA(t), "")),
		client.WithDialTimeout(2*time.Second), client.WithRetry(1, 10*time.Millisecond))
	if err == nil {
		_, err = foreign.ListTopics(ctxT(t, 3*time.Second))
		foreign.Close()
	}
	if err == nil {
		t.Fatal("a client trusting another CA accepted the node's certificate")
	}
	// A client certificate from another CA is refused by the node.
	m := tlsconf.ClientFiles(otherCA(t), "mallory")
	m.CA = tlsconf.CAFile(dir) // trusts the node; the node does not trust it
	mc, err := tlsconf.Client(m, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := client.Dial(ctxT(t, 5*time.Second), n.GRPCAddr, client.WithTLS(mc),
		client.WithDialTimeout(2*time.Second), client.WithRetry(1, 10*time.Millisecond))
	if err == nil {
		_, err = mallory.ListTopics(ctxT(t, 3*time.Second))
		mallory.Close()
	}
	if err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}

	// REST and GraphQL over HTTPS.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t, dir, "")}}
	resp, err := hc.Post("https://"+n.HTTPAddr+"/v1/topics/tls-anonymous/records", "application/json",
		strings.NewReader(`{"records":[{"payload":"aGk="}]}`))
	if err != nil {
		t.Fatalf("REST publish over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("REST publish over TLS: status %d", resp.StatusCode)
	}
	resp, err = hc.Post("https://"+n.HTTPAddr+"/graphql", "application/json",
		strings.NewReader(`{"query":"{ topics { name } }"}`))
	if err != nil {
		t.Fatalf("GraphQL over TLS: %v", err)
	}
	var gq struct {
		Data struct{ Topics []struct{ Name string } }
	}
	json.NewDecoder(resp.Body).Decode(&gq)
	resp.Body.Close()
	if len(gq.Data.Topics) != 2 {
		t.Fatalf("GraphQL over TLS: topics %+v, want 2", gq.Data.Topics)
	}
	// A plaintext request to a TLS listener gets net/http's 400, never
	// the API.
	if r, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.HTTPAddr + "/v1/topics"); err == nil {
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			t.Fatal("a plaintext HTTP request was served by a TLS listener")
		}
	}

	// The CLI: with --tls-ca it works, without it does not.
	bin := testcluster.Binary(t)
	out, err := exec.Command(bin, "topic", "list", "--addr", n.GRPCAddr, "--tls-ca", tlsconf.CAFile(dir)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tls-anonymous") {
		t.Fatalf("hermes topic list --tls-ca: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "publish", "--protocol", "rest", "--addr", n.HTTPAddr, "--tls-ca", tlsconf.CAFile(dir),
		"tls-anonymous", "from the cli").CombinedOutput()
	if err != nil {
		t.Fatalf("hermes publish --protocol rest --tls-ca: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "topic", "list", "--addr", n.GRPCAddr, "--timeout", "3s").CombinedOutput()
	if err == nil {
		t.Fatalf("hermes topic list without --tls-ca succeeded against a TLS listener:\n%s", out)
	}
	// hermes bench over TLS, every record verified.
	out, err = exec.Command(bin, "bench", "-grpc-targets", n.GRPCAddr, "-tls-ca", tlsconf.CAFile(dir), "-count", "2000",
		"-workers", "2", "-quiet").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "result    PASS") {
		t.Fatalf("hermes bench over TLS: %v\n%s", err, out)
	}
}

// The certificate files are read again when they change: a new
// certificate is served without a restart.
func TestTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: dir, Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	f := tlsconf.NodeFiles(dir, 1)
	n := testcluster.StartNode(t, "--tls-cert", f.Cert, "--tls-key", f.Key, "--log-level", "info")
	serial := func() string {
		conn, err := tls.Dial("tcp", n.GRPCAddr, &tls.Config{RootCAs: func() *x509.CertPool {
			p := x509.NewCertPool()
			b, _ := os.ReadFile(f.CA)
			p.AppendCertsFromPEM(b)
			return p
		}(), ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	time.Sleep(1100 * time.Millisecond) // a different modification time
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: dir, Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the node still serves certificate %s after the files changed", before)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(n.Log(50), "certificate files reloaded") {
		t.Errorf("no reload in the log:\n%s", n.Log(50))
	}
}

// nodeStream opens a Raft transport stream to addr presenting the
// certificate files f.
func nodeStream(t *testing.T, addr string, f tlsconf.Files) (tpb.RaftTransport_StreamClient, error) {
	t.Helper()
	c, err := tlsconf.Client(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return tpb.NewRaftTransportClient(conn).Stream(ctxT(t, 10*time.Second))
}

// sendBatch sends b on a new stream and returns how the stream ended.
func sendBatch(t *testing.T, addr string, f tlsconf.Files, b *tpb.Batch) error {
	t.Helper()
	s, err := nodeStream(t, addr, f)
	if err != nil {
		return err
	}
	if err := s.Send(b); err != nil {
		_, err = s.CloseAndRecv()
		return err
	}
	_, err = s.CloseAndRecv()
	return err
}

// Nodes talk mutual TLS: a certificate of another CA is refused at the
// handshake, one of the cluster's CA that names no node, or a node that
// is not a member, or a member claiming to be another node, is refused
// by the node-to-node services; a node of another CA cannot be added.
// An authenticated member forging heartbeats with an absurd term and
// commit index (etcd raft panics on those) has them dropped and logged:
// every node keeps running and the cluster keeps serving.
func TestClusterNodeTLS(t *testing.T) {
	certs := testcluster.Certs(t)
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "guarded", Config: &pb.TopicConfig{Partitions: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	publishToLeader(t, cs, live, "guarded", newIDs(10))

	beat := func(from uint64, group string) *tpb.Batch {
		return &tpb.Batch{From: from, Envelopes: []*tpb.Envelope{{Group: group, Beat: &tpb.Beat{Term: 1 << 40, Commit: 1 << 50}}}}
	}
	target := nodes[0].RaftAddr
	foreign := otherCA(t)

	// Another CA's node certificate: the handshake fails.
	if err := sendBatch(t, target, tlsconf.Files{Cert: tlsconf.NodeFiles(foreign, 2).Cert, Key: tlsconf.NodeFiles(foreign, 2).Key, CA: tlsconf.CAFile(certs)}, beat(2, cluster.MetaGroupName)); err == nil {
		t.Fatal("a node certificate of another CA was accepted")
	}
	// The cluster's CA, but a client certificate (no node named).
	if err := sendBatch(t, target, tlsconf.ClientFiles(certs, "alice"), beat(2, cluster.MetaGroupName)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a client certificate on the node listener: %v, want PermissionDenied", err)
	}
	// The cluster's CA, a node that is not a member.
	if err := sendBatch(t, target, tlsconf.NodeFiles(certs, 9), beat(9, cluster.MetaGroupName)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node 9 (not a member): %v, want PermissionDenied", err)
	}
	// Node 2's certificate claiming to be node 3.
	if err := sendBatch(t, target, tlsconf.NodeFiles(certs, 2), beat(3, cluster.MetaGroupName)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node 2 claiming to be node 3: %v, want PermissionDenied", err)
	}
	// Node 2, authenticated, forging heartbeats to every group of node 1.
	groups := []string{cluster.MetaGroupName}
	topics, _ := filepath.Glob(filepath.Join(nodes[0].DataDir, "topics", "guarded@*"))
	for _, dir := range topics {
		for _, p := range []string{"0", "1"} {
			groups = append(groups, filepath.Base(dir)+"/"+p)
		}
	}
	if len(groups) != 3 {
		t.Fatalf("groups of node 1: %v, want the metadata and two partitions", groups)
	}
	for i := 0; i < 20; i++ {
		for _, g := range groups {
			if err := sendBatch(t, target, tlsconf.NodeFiles(certs, 2), beat(2, g)); err != nil {
				t.Fatalf("node 2's stream: %v", err)
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	for i, n := range nodes {
		if n.PID() == 0 {
			t.Fatalf("node %d exited", i+1)
		}
		resp, err := http.Get(n.HTTPURL() + "/readyz")
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		resp.Body.Close()
	}
	if log := nodes[0].Log(200); !strings.Contains(log, "raft message from a peer dropped") {
		t.Errorf("node 1 did not log the dropped heartbeats:\n%s", log)
	}
	for i := 0; i < 5; i++ {
		publishToLeader(t, cs, live, "guarded", newIDs(10))
	}

	// A node of another CA cannot be added.
	f4 := tlsconf.NodeFiles(foreign, 4)
	raft4 := testcluster.FreeAddr(t)
	var peers []string
	for i, n := range nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, n.RaftAddr))
	}
	peers = append(peers, "4="+raft4)
	testcluster.StartNode(t, "--node-id", "4", "--raft-addr", raft4, "--peers", strings.Join(peers, ","), "--join",
		"--node-tls-cert", f4.Cert, "--node-tls-key", f4.Key, "--node-tls-ca", f4.CA, "--log-level", "warn")
	out, err := exec.Command(testcluster.Binary(t), "cluster", "join", "--addr", nodes[1].GRPCAddr,
		"--node-id", "4", "--raft-addr", raft4).CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("does not answer")) {
		t.Fatalf("hermes cluster join of a node of another CA: %v\n%s", err, out)
	}
	st, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range st.Nodes {
		if nd.Id == 4 {
			t.Fatalf("node 4 of another CA is in the cluster: %+v", st.Nodes)
		}
	}
}
