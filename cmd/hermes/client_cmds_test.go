package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
)

// The CLI tests run the client commands in-process against a broker run by
// this test binary itself (re-executed as `hermes serve`).

const serveEnv = "HERMES_CLI_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startServe runs `hermes serve` in a child process and returns its gRPC
// address; the child is stopped by its pid when the test ends.
func startServe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := testcluster.FreeAddr(t)
	var out bytes.Buffer
	cmd := exec.Command(exe, "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr,
		"--http-addr", testcluster.FreeAddr(t), "--raft-addr", testcluster.FreeAddr(t), "--kafka-addr", testcluster.FreeAddr(t), "--wire-addr", testcluster.FreeAddr(t), "--log-level", "warn")
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("broker output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hermes runs one command line in-process.
func hermes(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errw bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errw)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errw.String(), err
}

func mustHermes(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errw, err := hermes(t, stdin, args...)
	if err != nil {
		t.Fatalf("hermes %s: %v\n%s", strings.Join(args, " "), err, errw)
	}
	return out
}

func TestCLIScript(t *testing.T) {
	addr := startServe(t)
	a := "--addr=" + addr
	mustHermes(t, "", "topic", "create", "orders", "--partitions", "2", "--mode", "eventual", a)
	if _, _, err := hermes(t, "", "topic", "create", "orders", a); !errors.Is(err, client.ErrTopicExists) {
		t.Errorf("create twice: %v", err)
	}
	mustHermes(t, "", "topic", "create", "orders", "--if-not-exists", a)

	out := mustHermes(t, "one\ntwo\nthree\n", "publish", "orders", "--partition", "1", "--header", "h=v", a)
	if out != "1/0\n1/1\n1/2\n" {
		t.Errorf("publish stdin printed %q", out)
	}
	out = mustHermes(t, "", "publish", "orders", "--key", "k", "four", "five", a)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 {
		t.Errorf("publish args printed %q", out)
	}
	if _, _, err := hermes(t, "", "publish", "orders", "--header", "nokv", "x", a); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("bad header: %v", err)
	}

	out = mustHermes(t, "", "consume", "orders", "--partition", "1", "--from-beginning", "--count", "3", "--format", "json", a)
	var recs []recordJSON
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r recordJSON
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("json line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 3 || *recs[0].Payload != "one" || recs[2].Offset != 2 || len(recs[0].Headers) != 1 ||
		recs[0].Key != nil || len(recs[0].MessageID) != 36 {
		t.Errorf("consumed %+v", recs)
	}

	out = mustHermes(t, "", "consume", "orders", "--group", "g", "--from-beginning", "--count", "4", "--commit", "manual", a)
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("group consume printed %d lines: %q", n, out)
	}
	var g groupJSON
	if err := json.Unmarshal([]byte(mustHermes(t, "", "group", "describe", "g", "--json", a)), &g); err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, p := range g.Partitions {
		committed += max(p.Committed, 0)
	}
	if committed != 4 {
		t.Errorf("group committed %d records after printing 4: %+v", committed, g)
	}
	out = mustHermes(t, "", "consume", "orders", "--group", "g", "--timeout-idle", "300ms", a)
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("the group's second run printed %q, want the 1 record left", out)
	}
	if out := mustHermes(t, "", "group", "list", a); !strings.Contains(out, "g ") {
		t.Errorf("group list: %q", out)
	}
	if out := mustHermes(t, "", "topic", "describe", "orders", a); !strings.Contains(out, "eventual") {
		t.Errorf("describe: %q", out)
	}
	out = mustHermes(t, "", "topic", "alter", "orders", "--partitions", "3", "--retention", "1h", "--mode", "consistent", a)
	if !strings.Contains(out, "3 partitions, mode consistent, retention 1h0m0s") {
		t.Errorf("alter: %q", out)
	}
	if _, _, err := hermes(t, "", "topic", "alter", "orders", "--partitions", "2", a); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("alter to fewer partitions: %v", err)
	}
	if _, _, err := hermes(t, "", "topic", "alter", "orders", a); err == nil {
		t.Error("alter with nothing to change succeeded")
	}
	mustHermes(t, "", "topic", "delete", "orders", a)
	if _, _, err := hermes(t, "", "topic", "describe", "orders", a); !errors.Is(err, client.ErrTopicNotFound) {
		t.Errorf("describe deleted: %v", err)
	}
}

func TestRecordJSONBinary(t *testing.T) {
	m := &client.Message{Key: []byte{0xff}, Payload: []byte("ok"), Headers: []client.Header{{Key: "b", Value: []byte{0xfe}}},
		Timestamp: time.Unix(0, 0)}
	r := recordToJSON(m)
	if r.Key != nil || r.KeyBase64 != "/w==" || *r.Payload != "ok" || r.Headers[0].ValueBase64 != "/g==" ||
		r.Timestamp != "1970-01-01T00:00:00Z" {
		t.Errorf("%+v", r)
	}
}

func TestConsumeFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"consume", "t", "--format", "xml"},
		{"consume", "t", "--commit", "sometimes"},
		{"consume", "t", "--offset", "3", "--from-beginning"},
		{"consume", "t", "--group", "g", "--partition", "1"},
	} {
		if _, _, err := hermes(t, "", append(args, "--addr", "127.0.0.1:1")...); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%v: %v", args, err)
		}
	}
}
