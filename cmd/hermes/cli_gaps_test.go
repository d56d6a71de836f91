package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/internal/tlsconf"
	"github.com/hermes-mq/hermes/pkg/client"
)

// node is a `hermes serve` child process with fixed addresses and data
// directory, so that it can be killed and started again as the same node.
type node struct {
	t                       *testing.T
	grpc, http, kafka, wire string
	raft, dir               string
	extra                   []string
	mu                      sync.Mutex
	cmd                     *exec.Cmd
	out                     *bytes.Buffer
	done                    chan struct{}
}

func newNode(t *testing.T, extra ...string) *node {
	t.Helper()
	n := &node{t: t, grpc: testcluster.FreeAddr(t), http: testcluster.FreeAddr(t), kafka: testcluster.FreeAddr(t),
		wire: testcluster.FreeAddr(t), raft: testcluster.FreeAddr(t), dir: t.TempDir(), extra: extra}
	n.start()
	t.Cleanup(func() {
		n.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("broker output:\n%s", n.out.String())
		}
	})
	return n
}

func (n *node) start() {
	n.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	args := append([]string{"serve", "--data-dir", n.dir, "--grpc-addr", n.grpc, "--http-addr", n.http,
		"--raft-addr", n.raft, "--kafka-addr", n.kafka, "--wire-addr", n.wire, "--log-level", "warn"}, n.extra...)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.out, n.done = cmd, out, done
	n.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", n.grpc, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			n.t.Fatalf("broker exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("broker did not listen on %s", n.grpc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the process with sig (SIGKILL: a crash) and waits for it.
func (n *node) stop(sig syscall.Signal) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describeGroupJSON(t *testing.T, addr, group string) groupJSON {
	t.Helper()
	var g groupJSON
	if err := json.Unmarshal([]byte(mustHermes(t, "", "group", "describe", group, "-o", "json", "--addr", addr)), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func committedOf(g groupJSON, topic string) map[int32]int64 {
	out := map[int32]int64{}
	for _, p := range g.Partitions {
		if p.Topic == topic {
			out[p.Partition] = p.Committed
		}
	}
	return out
}

func resetPlan(t *testing.T, args ...string) resetPlanJSON {
	t.Helper()
	var plan resetPlanJSON
	out := mustHermes(t, "", append([]string{"group", "reset-offsets"}, append(args, "-o", "json")...)...)
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	return plan
}

func TestGroupResetOffsetsAndDelete(t *testing.T) {
	n := newNode(t)
	a := "--addr=" + n.grpc
	mustHermes(t, "", "topic", "create", "rs", "--partitions", "2", a)
	mustHermes(t, "", "publish", "rs", "--partition", "0", "a0", "a1", "a2", a)
	time.Sleep(30 * time.Millisecond)
	mark := time.Now()
	time.Sleep(30 * time.Millisecond)
	mustHermes(t, "", "publish", "rs", "--partition", "0", "a3", "a4", a)
	mustHermes(t, "", "publish", "rs", "--partition", "1", "b0", "b1", "b2", a)
	mustHermes(t, "", "consume", "rs", "--group", "g", "--from-beginning", "--count", "8", "--commit", "manual", a)
	if c := committedOf(describeGroupJSON(t, n.grpc, "g"), "rs"); c[0] != 5 || c[1] != 3 {
		t.Fatalf("committed %v, want 0:5 1:3", c)
	}

	// The default is a dry run: a plan, and nothing changes.
	plan := resetPlan(t, "g", "--topic", "rs", "--to-earliest", a)
	if plan.Executed || len(plan.Partitions) != 2 || plan.Partitions[0].Current != 5 || plan.Partitions[0].New != 0 ||
		plan.Partitions[1].Current != 3 || plan.Partitions[1].New != 0 {
		t.Errorf("dry-run plan %+v", plan)
	}
	out, errw, err := hermes(t, "", "group", "reset-offsets", "g", "--topic", "rs", "--to-earliest", a)
	if err != nil || !strings.Contains(out, "CURRENT") || !strings.Contains(errw, "--execute") {
		t.Errorf("dry-run table: %v %q %q", err, out, errw)
	}
	if c := committedOf(describeGroupJSON(t, n.grpc, "g"), "rs"); c[0] != 5 || c[1] != 3 {
		t.Fatalf("a dry run changed the offsets: %v", c)
	}

	plan = resetPlan(t, "g", "--topic", "rs", "--partitions", "0", "--to-offset", "2", "--execute", a)
	if !plan.Executed || len(plan.Partitions) != 1 || plan.Partitions[0].New != 2 {
		t.Errorf("to-offset plan %+v", plan)
	}
	if c := committedOf(describeGroupJSON(t, n.grpc, "g"), "rs"); c[0] != 2 || c[1] != 3 {
		t.Fatalf("after --to-offset 2 on partition 0: %v", c)
	}
	plan = resetPlan(t, "g", "--topic", "rs", "--shift-by", "-10", "--execute", a)
	if p := plan.Partitions[0]; p.New != 0 || !p.Clamped {
		t.Errorf("shift-by -10 not clamped to the start: %+v", plan)
	}
	plan = resetPlan(t, "g", "--topic", "rs", "--to-offset", "100", "--execute", a)
	if c := committedOf(describeGroupJSON(t, n.grpc, "g"), "rs"); c[0] != 5 || c[1] != 3 || !plan.Partitions[1].Clamped {
		t.Fatalf("after --to-offset 100 (clamped to the high watermark): %v %+v", c, plan)
	}
	plan = resetPlan(t, "g", "--topic", "rs", "--partitions", "0", "--to-timestamp", mark.UTC().Format(time.RFC3339Nano), "--execute", a)
	if c := committedOf(describeGroupJSON(t, n.grpc, "g"), "rs"); c[0] != 3 {
		t.Fatalf("after --to-timestamp: %v, want partition 0 at 3 (plan %+v)", c, plan)
	}
	resetPlan(t, "g", "--topic", "rs", "--to-latest", "--execute", a)
	if c := committedOf(describeGroupJSON(t, n.grpc, "g"), "rs"); c[0] != 5 || c[1] != 3 {
		t.Fatalf("after --to-latest: %v", c)
	}
	for _, args := range [][]string{
		{"group", "reset-offsets", "g", "--topic", "rs", a},                                 // no strategy
		{"group", "reset-offsets", "g", "--topic", "rs", "--to-earliest", "--to-latest", a}, // two
		{"group", "reset-offsets", "g", "--to-earliest", a},                                 // no topic
		{"group", "reset-offsets", "g", "--topic", "rs", "--to-timestamp", "yesterday", a},
	} {
		if _, _, err := hermes(t, "", args...); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", args, err)
		}
	}
	if _, _, err := hermes(t, "", "group", "reset-offsets", "g", "--topic", "rs", "--partitions", "7", "--to-earliest", a); !errors.Is(err, client.ErrPartitionNotFound) {
		t.Errorf("unknown partition: %v", err)
	}

	// With a live member both reset-offsets and delete are refused, naming it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, n.grpc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs, err := c.Subscribe(ctx, "rs", client.WithGroup("g"), client.WithClientID("busy-consumer"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the member to join", 10*time.Second, func() bool { return len(describeGroupJSON(t, n.grpc, "g").Members) > 0 })
	_, _, err = hermes(t, "", "group", "reset-offsets", "g", "--topic", "rs", "--to-earliest", "--execute", a)
	if !errors.Is(err, client.ErrGroupNotEmpty) || !strings.Contains(err.Error(), "busy-consumer") {
		t.Errorf("reset with a live member: %v", err)
	}
	_, _, err = hermes(t, "", "group", "delete", "g", a)
	if !errors.Is(err, client.ErrGroupNotEmpty) || !strings.Contains(err.Error(), "busy-consumer") {
		t.Errorf("delete with a live member: %v", err)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the member to leave", 20*time.Second, func() bool { return len(describeGroupJSON(t, n.grpc, "g").Members) == 0 })
	if out := mustHermes(t, "", "group", "delete", "g", a); !strings.Contains(out, "deleted group g") {
		t.Errorf("delete: %q", out)
	}
	if _, _, err := hermes(t, "", "group", "delete", "g", a); !errors.Is(err, client.ErrGroupNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	// A deleted group starts where a new one would.
	if c := committedOf(describeGroupJSONOrEmpty(t, n.grpc, "g"), "rs"); c[0] > 0 || c[1] > 0 {
		t.Errorf("offsets after delete: %v", c)
	}
}

func describeGroupJSONOrEmpty(t *testing.T, addr, group string) groupJSON {
	t.Helper()
	out, _, err := hermes(t, "", "group", "describe", group, "-o", "json", "--addr", addr)
	if errors.Is(err, client.ErrGroupNotFound) {
		return groupJSON{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var g groupJSON
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestTopicPartitionsFlags(t *testing.T) {
	n := newNode(t)
	a := "--addr=" + n.grpc
	for _, p := range []string{"0", "-1"} {
		_, _, err := hermes(t, "", "topic", "create", "zero", "--partitions", p, a)
		if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "at least 1 partition") {
			t.Errorf("--partitions %s: %v", p, err)
		}
	}
	if _, _, err := hermes(t, "", "topic", "describe", "zero", a); !errors.Is(err, client.ErrTopicNotFound) {
		t.Errorf("--partitions 0 created the topic: %v", err)
	}
	mustHermes(t, "", "topic", "create", "grow", "--partitions", "2", a)
	if out := mustHermes(t, "", "topic", "add-partitions", "grow", "--count", "4", a); !strings.Contains(out, "4 partitions") {
		t.Errorf("add-partitions: %q", out)
	}
	var tj topicJSON
	if err := yaml.Unmarshal([]byte(mustHermes(t, "", "topic", "add-partitions", "grow", "--partitions", "5", "-o", "yaml", a)), &tj); err != nil {
		t.Fatal(err)
	}
	if tj.Name != "grow" || tj.Partitions != 5 || len(tj.PartitionInfo) != 5 {
		t.Errorf("add-partitions -o yaml: %+v", tj)
	}
	if _, _, err := hermes(t, "", "topic", "add-partitions", "grow", "--count", "3", a); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("fewer partitions: %v", err)
	}
	if _, _, err := hermes(t, "", "topic", "add-partitions", "grow", a); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("no --count: %v", err)
	}
}

func TestConsumeFromTimestamp(t *testing.T) {
	n := newNode(t)
	a := "--addr=" + n.grpc
	mustHermes(t, "", "topic", "create", "ts", a)
	mustHermes(t, "", "publish", "ts", "old1", "old2", a)
	time.Sleep(30 * time.Millisecond)
	mark := time.Now()
	time.Sleep(30 * time.Millisecond)
	mustHermes(t, "", "publish", "ts", "new1", "new2", a)
	for _, ts := range []string{mark.UTC().Format(time.RFC3339Nano), fmt.Sprint(mark.UnixMilli() + 1)} {
		out := mustHermes(t, "", "consume", "ts", "--from-timestamp", ts, "--count", "2", "--timeout", "10s", a)
		if out != "new1\nnew2\n" {
			t.Errorf("--from-timestamp %s printed %q", ts, out)
		}
	}
	for _, args := range [][]string{
		{"consume", "ts", "--from-timestamp", "soon", a},
		{"consume", "ts", "--from-timestamp", "2024-01-01T00:00:00Z", "--from-beginning", a},
	} {
		if _, _, err := hermes(t, "", args...); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestOutputFlag(t *testing.T) {
	n := newNode(t)
	a := "--addr=" + n.grpc
	mustHermes(t, "", "topic", "create", "out", "--partitions", "2", a)
	mustHermes(t, "", "publish", "out", "x", a)
	asJSON := mustHermes(t, "", "topic", "list", "-o", "json", a)
	var ts []topicJSON
	if err := json.Unmarshal([]byte(asJSON), &ts); err != nil || len(ts) != 1 || ts[0].Partitions != 2 {
		t.Fatalf("-o json: %v %q", err, asJSON)
	}
	if old := mustHermes(t, "", "topic", "list", "--json", a); old != asJSON {
		t.Errorf("the deprecated --json printed %q, -o json %q", old, asJSON)
	}
	var ty []topicJSON
	if err := yaml.Unmarshal([]byte(mustHermes(t, "", "topic", "list", "-o", "yaml", a)), &ty); err != nil || len(ty) != 1 || ty[0].Name != "out" {
		t.Errorf("-o yaml: %v %+v", err, ty)
	}
	if out := mustHermes(t, "", "topic", "list", a); !strings.HasPrefix(out, "TOPIC") {
		t.Errorf("table: %q", out)
	}
	if _, _, err := hermes(t, "", "topic", "list", "-o", "xml", a); err == nil || !strings.Contains(err.Error(), "table, json or yaml") {
		t.Errorf("-o xml: %v", err)
	}
	// consume: -o json, the deprecated --format json, and -o yaml.
	j1 := mustHermes(t, "", "consume", "out", "--from-beginning", "-n", "1", "-o", "json", a)
	j2 := mustHermes(t, "", "consume", "out", "--from-beginning", "-n", "1", "--format", "json", a)
	var r1, r2 recordJSON
	if json.Unmarshal([]byte(j1), &r1) != nil || json.Unmarshal([]byte(j2), &r2) != nil || *r1.Payload != "x" || r1.MessageID != r2.MessageID {
		t.Errorf("consume -o json %q, --format json %q", j1, j2)
	}
	var ry recordJSON
	y := mustHermes(t, "", "consume", "out", "--from-beginning", "-n", "1", "-o", "yaml", a)
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(y, "---\n")), &ry); err != nil || ry.Payload == nil || *ry.Payload != "x" {
		t.Errorf("consume -o yaml %q: %v", y, err)
	}
	var gs []groupSummaryJSON
	if err := json.Unmarshal([]byte(mustHermes(t, "", "group", "list", "-o", "json", a)), &gs); err != nil {
		t.Errorf("group list -o json: %v", err)
	}

	// Commands that change something: -o json says what they did, and a
	// bad -o is refused before anything changes.
	var acks []ackJSON
	mustHermes(t, "", "topic", "create", "acks", a)
	for _, line := range strings.Split(strings.TrimSpace(mustHermes(t, "", "publish", "acks", "-o", "json", "y", "z", a)), "\n") {
		var ack ackJSON
		if err := json.Unmarshal([]byte(line), &ack); err != nil {
			t.Fatalf("publish -o json line %q: %v", line, err)
		}
		acks = append(acks, ack)
	}
	if len(acks) != 2 || acks[0] != (ackJSON{"acks", 0, 0}) || acks[1] != (ackJSON{"acks", 0, 1}) {
		t.Errorf("publish -o json: %+v", acks)
	}
	var ay ackJSON
	if y := mustHermes(t, "", "publish", "acks", "-o", "yaml", "w", a); yaml.Unmarshal([]byte(strings.TrimPrefix(y, "---\n")), &ay) != nil || ay.Offset != 2 {
		t.Errorf("publish -o yaml: %q", y)
	}
	if _, _, err := hermes(t, "", "topic", "delete", "out", "-o", "xml", a); err == nil || !strings.Contains(err.Error(), "table, json or yaml") {
		t.Errorf("topic delete -o xml: %v", err)
	}
	mustHermes(t, "", "topic", "describe", "out", a) // still there
	var del map[string]any
	if err := json.Unmarshal([]byte(mustHermes(t, "", "topic", "delete", "out", "-o", "json", a)), &del); err != nil ||
		del["topic"] != "out" || del["deleted"] != true {
		t.Errorf("topic delete -o json: %v %v", del, err)
	}
	var certs devCertsJSON
	dir := t.TempDir()
	if err := json.Unmarshal([]byte(mustHermes(t, "", "dev-certs", "--dir", dir, "--nodes", "2", "--clients", "alice", "-o", "json")), &certs); err != nil ||
		len(certs.Nodes) != 2 || certs.Clients["alice"].Key == "" {
		t.Errorf("dev-certs -o json: %+v %v", certs, err)
	} else if _, err := os.Stat(certs.Nodes["2"].Cert); err != nil {
		t.Errorf("dev-certs -o json names a file it did not write: %v", err)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	out := mustHermes(t, "", "version")
	for _, want := range []string{"hermes dev", "commit:", "built:      unknown", "go version: go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("version %q lacks %q", out, want)
		}
	}
	if v := mustHermes(t, "", "--version"); v != out {
		t.Errorf("--version %q, version %q", v, out)
	}
	var vj versionInfo
	if err := json.Unmarshal([]byte(mustHermes(t, "", "version", "-o", "json")), &vj); err != nil || vj.Version != "dev" || vj.GoVersion == "" {
		t.Errorf("version -o json: %v %+v", err, vj)
	}
	for shell, want := range map[string]string{"bash": "bash completion", "zsh": "#compdef hermes", "fish": "complete -c hermes"} {
		if out := mustHermes(t, "", "completion", shell); !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}
	if help := mustHermes(t, "", "--help"); !strings.Contains(help, "completion") || !strings.Contains(help, "version") {
		t.Errorf("help lists no completion or version command:\n%s", help)
	}
}

// connErr runs args and returns the connection error they end with.
func connErr(t *testing.T, args ...string) *connError {
	t.Helper()
	_, _, err := hermes(t, "", args...)
	var ce *connError
	if !errors.As(err, &ce) {
		t.Fatalf("%v: %v (%T), want a connection error", args, err, err)
	}
	t.Logf("%s: %v", strings.Join(args, " "), err)
	if !errors.Is(err, client.ErrUnavailable) && status.Code(err) != codes.Unavailable {
		t.Errorf("%v: %v is not UNAVAILABLE", args, err)
	}
	return ce
}

func TestConnectionErrors(t *testing.T) {
	certs := t.TempDir()
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: certs, Nodes: 1, Hosts: []string{"localhost", "127.0.0.1"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	nf := tlsconf.NodeFiles(certs, 1)
	plain := newNode(t)
	secure := newNode(t, "--tls-cert", nf.Cert, "--tls-key", nf.Key)
	ca := "--tls-ca=" + tlsconf.CAFile(certs)
	closed := testcluster.FreeAddr(t)

	ce := connErr(t, "topic", "list", "--addr", closed)
	if ce.Kind != connRefused || ce.Error() != "nothing listens on "+closed+" — is the broker running? (--addr)" {
		t.Errorf("closed port: %s %q", ce.Kind, ce.Error())
	}
	// The raw gRPC commands explain the same way.
	if ce := connErr(t, "whoami", "--addr", closed); ce.Kind != connRefused {
		t.Errorf("whoami on a closed port: %s %q", ce.Kind, ce)
	}
	if ce := connErr(t, "topic", "list", "--addr", "nosuchhost.invalid:5999"); ce.Kind != connUnknownHost || !strings.Contains(ce.Error(), "nosuchhost.invalid") {
		t.Errorf("unknown host: %s %q", ce.Kind, ce)
	}
	if ce := connErr(t, "topic", "list", "--addr", plain.http); ce.Kind != connWrongProtocol || !strings.Contains(ce.Error(), "HTTP") {
		t.Errorf("HTTP port: %s %q", ce.Kind, ce)
	}
	if ce := connErr(t, "topic", "list", "--addr", plain.kafka); ce.Kind != connWrongProtocol {
		t.Errorf("Kafka port: %s %q", ce.Kind, ce)
	}
	if ce := connErr(t, "topic", "list", "--addr", secure.grpc); ce.Kind != connNeedsTLS || !strings.Contains(ce.Error(), "--tls-ca") {
		t.Errorf("plaintext client, TLS node: %s %q", ce.Kind, ce)
	}
	if ce := connErr(t, "topic", "list", "--addr", plain.grpc, ca); ce.Kind != connNotTLS {
		t.Errorf("TLS client, plaintext node: %s %q", ce.Kind, ce)
	}
	other := t.TempDir()
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: other, Nodes: 1, Hosts: []string{"127.0.0.1"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if ce := connErr(t, "topic", "list", "--addr", secure.grpc, "--tls-ca", tlsconf.CAFile(other)); ce.Kind != connTLSVerify {
		t.Errorf("wrong CA: %s %q", ce.Kind, ce)
	}
	// And what works, works.
	mustHermes(t, "", "topic", "list", "--addr", secure.grpc, ca)
	mustHermes(t, "", "topic", "list", "--addr", closed+","+plain.grpc)
}

func TestConsumeReconnects(t *testing.T) {
	n := newNode(t)
	a := "--addr=" + n.grpc
	mustHermes(t, "", "topic", "create", "rc", a)
	mustHermes(t, "", "publish", "rc", "one", "two", a)

	var out, errw syncBuffer
	root := newRootCmd()
	root.SetArgs([]string{"consume", "rc", "--from-beginning", "--count", "4", "--timeout", "60s", a})
	root.SetIn(strings.NewReader(""))
	root.SetOut(&out)
	root.SetErr(&errw)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(context.Background()) }()
	waitFor(t, "the first records", 15*time.Second, func() bool { return out.String() == "one\ntwo\n" })

	n.stop(syscall.SIGKILL)
	waitFor(t, "the reconnecting line", 10*time.Second, func() bool {
		return strings.Contains(errw.String(), "reconnecting to "+n.grpc)
	})
	// While it stays down, the line says why.
	waitFor(t, "a connection refused line", 10*time.Second, func() bool {
		return strings.Contains(errw.String(), "connection refused")
	})
	n.start()
	mustHermes(t, "", "publish", "rc", "three", "four", a)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("consume: %v\n%s", err, errw.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("consume did not resume; stdout %q stderr %q", out.String(), errw.String())
	}
	if out.String() != "one\ntwo\nthree\nfour\n" {
		t.Errorf("consume printed %q", out.String())
	}
	if !strings.Contains(errw.String(), "reconnected to "+n.grpc) {
		t.Errorf("stderr %q says nothing of the reconnection", errw.String())
	}
	t.Logf("stderr:\n%s", errw.String())
}

func TestProfiles(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	for _, v := range []string{"HERMES_ADDR", "HERMES_PROFILE", "HERMES_USER", "HERMES_PASSWORD", "HERMES_TOKEN", "HERMES_TLS_CA"} {
		t.Setenv(v, "")
	}
	n := newNode(t)
	closed := testcluster.FreeAddr(t)
	pwFile := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustHermes(t, "", "profile", "create", "local", "--addr", n.grpc)
	mustHermes(t, "", "profile", "create", "dead", "--addr", closed)
	mustHermes(t, "", "profile", "create", "creds", "--addr", closed, "--user", "alice", "--password-file", pwFile)
	path := filepath.Join(cfg, "hermes", "profiles.yaml")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("profiles file mode %v", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), "s3cret") || !strings.Contains(string(raw), pwFile) {
		t.Errorf("profiles file:\n%s", raw)
	}
	// The first profile is the active one: no --addr needed.
	mustHermes(t, "", "topic", "create", "viaprofile")
	if out := mustHermes(t, "", "topic", "list"); !strings.Contains(out, "viaprofile") {
		t.Errorf("topic list through the profile: %q", out)
	}
	// --profile for one command; an explicit --addr wins over it.
	if ce := connErr(t, "topic", "list", "--profile", "dead"); !strings.Contains(ce.Error(), closed) {
		t.Errorf("--profile dead: %q", ce)
	}
	mustHermes(t, "", "topic", "list", "--profile", "dead", "--addr", n.grpc)
	mustHermes(t, "", "profile", "use", "dead")
	if ce := connErr(t, "topic", "list"); !strings.Contains(ce.Error(), closed) {
		t.Errorf("after use dead: %q", ce)
	}
	mustHermes(t, "", "topic", "list", "--addr", n.grpc)
	// An environment variable wins over the profile too (read when the
	// command is built, as the flags' defaults).
	t.Setenv("HERMES_ADDR", n.grpc)
	mustHermes(t, "", "topic", "list")
	t.Setenv("HERMES_ADDR", "")

	// The profile's credentials: the user, and the password from its file.
	mustHermes(t, "", "profile", "use", "creds")
	var bf brokerFlags
	cmd := &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return nil }}
	bf.register(cmd, 0)
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if err := applyProfile(cmd); err != nil {
		t.Fatal(err)
	}
	if u, pw, _ := bf.credentials(); u != "alice" || pw != "s3cret" || bf.addr != closed {
		t.Errorf("applied profile: user %q password %q addr %q", u, pw, bf.addr)
	}
	// ...but not when the caller names another user.
	var bf2 brokerFlags
	cmd2 := &cobra.Command{Use: "probe"}
	bf2.register(cmd2, 0)
	if err := cmd2.ParseFlags([]string{"--user", "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := applyProfile(cmd2); err != nil {
		t.Fatal(err)
	}
	if u, pw, _ := bf2.credentials(); u != "bob" || pw != "" {
		t.Errorf("explicit --user bob got user %q password %q", u, pw)
	}

	var ps []profileJSON
	if err := json.Unmarshal([]byte(mustHermes(t, "", "profile", "list", "-o", "json")), &ps); err != nil || len(ps) != 3 ||
		ps[0].Name != "creds" || !ps[0].Active || ps[1].Active || ps[0].User != "alice" || ps[0].PasswordFile != pwFile {
		t.Errorf("profile list: %v %+v", err, ps)
	}
	if out := mustHermes(t, "", "profile", "list"); strings.Contains(out, "s3cret") || !strings.Contains(out, "* ") {
		t.Errorf("profile list table: %q", out)
	}
	mustHermes(t, "", "profile", "delete", "creds")
	mustHermes(t, "", "profile", "use", "local")
	if _, _, err := hermes(t, "", "profile", "use", "nope"); err == nil {
		t.Error("profile use of a missing profile succeeded")
	}
	if _, _, err := hermes(t, "", "topic", "list", "--profile", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("--profile nope: %v", err)
	}
	if _, _, err := hermes(t, "", "profile", "create", "local", "--addr", closed); err == nil {
		t.Error("creating an existing profile succeeded without --overwrite")
	}
}
