package main

import (
	"bufio"
	"bytes"
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

// startServeHTTP is startServe that also returns the broker's HTTP address.
func startServeHTTP(t *testing.T) (grpcAddr, httpAddr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr = testcluster.FreeAddr(t), testcluster.FreeAddr(t)
	var out bytes.Buffer
	cmd := exec.Command(exe, "serve", "--data-dir", t.TempDir(), "--grpc-addr", grpcAddr,
		"--http-addr", httpAddr, "--raft-addr", testcluster.FreeAddr(t), "--kafka-addr", testcluster.FreeAddr(t), "--wire-addr", testcluster.FreeAddr(t), "--log-level", "warn")
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
	for _, addr := range []string{grpcAddr, httpAddr} {
		for {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker did not listen on %s", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return grpcAddr, httpAddr
}

func parseRecords(t *testing.T, out string) []recordJSON {
	t.Helper()
	var recs []recordJSON
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r recordJSON
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("json line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// committed returns the group's committed offset and pending acks of
// partition 0 of topic, read over gRPC.
func committed(t *testing.T, grpcAddr, group string) (int64, int) {
	t.Helper()
	var g groupJSON
	if err := json.Unmarshal([]byte(mustHermes(t, "", "group", "describe", group, "--json", "--addr="+grpcAddr)), &g); err != nil {
		t.Fatal(err)
	}
	for _, p := range g.Partitions {
		if p.Partition == 0 {
			return p.Committed, p.PendingAcks
		}
	}
	t.Fatalf("group %s has no partition 0: %+v", group, g)
	return 0, 0
}

func TestProtocolHTTP(t *testing.T) {
	grpcAddr, httpAddr := startServeHTTP(t)
	for _, proto := range []string{protoREST, protoGraphQL} {
		t.Run(proto, func(t *testing.T) {
			via := func(args ...string) []string { return append(args, "--protocol", proto, "--addr", httpAddr) }
			topic := "cli-" + proto
			mustHermes(t, "", "topic", "create", topic, "--addr="+grpcAddr)

			out := mustHermes(t, "", via("publish", topic, "--key", "k", "--header", "h=v", "one", "two")...)
			if out != "0/0\n0/1\n" {
				t.Errorf("publish args printed %q", out)
			}
			out = mustHermes(t, "\xff\x00\xfe\n", via("publish", topic, "--partition", "0", "--mode", "eventual")...)
			if out != "0/2\n" {
				t.Errorf("publish stdin printed %q", out)
			}

			out = mustHermes(t, "", via("consume", topic, "--from-beginning", "--count", "3", "--format", "json")...)
			recs := parseRecords(t, out)
			if len(recs) != 3 {
				t.Fatalf("consumed %q", out)
			}
			for i, r := range recs {
				if r.Topic != topic || r.Partition != 0 || r.Offset != int64(i) || len(r.MessageID) != 36 ||
					!strings.HasPrefix(r.Timestamp, "20") || r.DeliveryCount != 0 {
					t.Errorf("record %d: %+v", i, r)
				}
			}
			if r := recs[0]; r.Payload == nil || *r.Payload != "one" || r.Key == nil || *r.Key != "k" ||
				len(r.Headers) != 1 || r.Headers[0].Key != "h" || r.Headers[0].Value == nil || *r.Headers[0].Value != "v" {
				t.Errorf("first record: %+v", r)
			}
			if r := recs[2]; r.Payload != nil || r.PayloadBase64 != "/wD+" || r.Key != nil || len(r.Headers) != 0 {
				t.Errorf("binary record: %+v", r)
			}

			// A group: commit what was printed, and resume there.
			out = mustHermes(t, "", via("consume", topic, "--group", "g", "--from-beginning", "--count", "2", "--commit", "manual")...)
			if out != "one\ntwo\n" {
				t.Errorf("group consume printed %q", out)
			}
			if c, _ := committed(t, grpcAddr, "g"); c != 2 {
				t.Errorf("group committed %d after printing 2", c)
			}
			out = mustHermes(t, "", via("consume", topic, "--group", "g", "--timeout-idle", "500ms", "--format", "json")...)
			if recs := parseRecords(t, out); len(recs) != 1 || recs[0].Offset != 2 {
				t.Errorf("the group's second run printed %q, want the 1 record left", out)
			}
			if c, _ := committed(t, grpcAddr, "g"); c != 3 {
				t.Errorf("group committed %d after printing 3 (auto)", c)
			}
			out = mustHermes(t, "", via("consume", topic, "--group", "pm", "--from-beginning", "--count", "3", "--commit", "per-message", "--format", "json")...)
			if recs := parseRecords(t, out); len(recs) != 3 || recs[0].DeliveryCount != 1 {
				t.Errorf("per-message consume printed %q", out)
			}
			if c, pending := committed(t, grpcAddr, "pm"); c != 3 || pending != 0 {
				t.Errorf("per-message group: committed %d, pending acks %d", c, pending)
			}

			for _, args := range [][]string{
				via("publish", "missing", "x"),
				via("consume", "missing", "--timeout", "5s"),
			} {
				_, _, err := hermes(t, "", args...)
				if !errors.Is(err, client.ErrTopicNotFound) || !strings.HasPrefix(err.Error(), "TOPIC_NOT_FOUND: ") {
					t.Errorf("%v: %v", args, err)
				}
			}
			if _, _, err := hermes(t, "", via("publish", topic, "--partition", "9", "x")...); !errors.Is(err, client.ErrPartitionNotFound) {
				t.Errorf("publish to partition 9: %v", err)
			}
		})
	}
}

func TestProtocolFlag(t *testing.T) {
	if _, _, err := hermes(t, "", "publish", "t", "x", "--protocol", "soap"); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("--protocol soap: %v", err)
	}
	for _, tc := range []struct {
		args []string
		base string
	}{
		{[]string{"--protocol", "rest"}, "http://" + defaultHTTPAddr},
		{[]string{"--protocol", "REST", "--addr", "h:1"}, "http://h:1"},
		{[]string{"--protocol", "graphql", "--addr", "https://h/x/"}, "https://h/x/graphql"},
		{[]string{"--protocol", "grpc"}, ""},
	} {
		cmd := newConsumeCmd()
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		var cf consumeFlags
		cf.addr, _ = cmd.Flags().GetString("addr")
		cf.proto.name, _ = cmd.Flags().GetString("protocol")
		api, err := cf.proto.api(cmd, &cf.brokerFlags)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		switch a := api.(type) {
		case *restAPI:
			got = a.base
		case *graphQLAPI:
			got = a.endpoint
		}
		if got != tc.base {
			t.Errorf("%v: API at %q, want %q", tc.args, got, tc.base)
		}
	}
}

func TestProtocolSSEParse(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(": keepalive\n\nevent: record\nid: 0-1\ndata: {\"a\":1}\n\ndata:x\ndata: y\r\n\r\n"))
	name, data, err := readSSE(r)
	if err != nil || name != "record" || string(data) != `{"a":1}` {
		t.Errorf("first event: %q %q %v", name, data, err)
	}
	name, data, err = readSSE(r)
	if err != nil || name != "message" || string(data) != "x\ny" {
		t.Errorf("second event: %q %q %v", name, data, err)
	}
	if _, _, err := readSSE(r); err == nil {
		t.Error("no error at the end of the stream")
	}
}
