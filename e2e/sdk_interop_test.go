package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
)

// The cross-SDK interop test: a keyed record that each SDK (Go, Python,
// TypeScript) produces with its default producer (packed batches) is
// consumed by the other two as members of a consumer group (packed
// deliveries), on one live node, and each side checks the key, the headers
// (a nil and an empty value among them), the binary payload, the message
// id, the timestamp, the partition (murmur2 of the key) and the offset.
//
// It needs the Python SDK's venv and the compiled TypeScript SDK, so it
// runs only with HERMES_SDK_INTEROP=1: `make sdk-interop` (part of `make
// test`) builds both first and sets it. Once enabled, anything missing
// fails the test; it never skips.
//
// The Python and TypeScript sides are driver scripts run as subprocesses:
// clients/python/tests/interop_driver.py and
// clients/typescript/test/interop-driver.ts (dist/test/interop-driver.js
// once built). Both take --addr, --topic, --role produce|consume and
// --expect (interopRecord as JSON), check what they were told to, and
// print what they saw as JSON on their last line, which is checked here
// too.

// interopPartitions is the partition count of each test topic.
const interopPartitions = 4

// interopRecord is the record every side expects; the drivers' --expect.
// encoding/json writes []byte as base64 and a nil one as null, so a nil
// header value and an empty one stay apart.
type interopRecord struct {
	Key        []byte          `json:"key"`
	Payload    []byte          `json:"payload"`
	Headers    []interopHeader `json:"headers"`
	MessageID  string          `json:"message_id"` // 32 hex digits
	Timestamp  int64           `json:"timestamp,string"`
	Partitions int32           `json:"partitions,omitempty"`
	Partition  int32           `json:"partition"`
	Offset     int64           `json:"offset"`
	Group      string          `json:"group,omitempty"`
	TimeoutMs  int64           `json:"timeout_ms,omitempty"`
}

type interopHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// interopSeen is a driver's last line of output.
type interopSeen struct {
	Role      string         `json:"role"`
	Partition int32          `json:"partition"` // produce
	Offset    int64          `json:"offset"`    // produce
	Record    *interopRecord `json:"record"`    // consume
	Skipped   int            `json:"skipped"`   // consume
}

// interopSDK runs one SDK's side.
type interopSDK struct {
	name string
	// cmd is the driver's command line before its arguments; nil for Go,
	// which runs in this process.
	cmd []string
}

// interopSDKs finds the Python and TypeScript drivers and their
// interpreters: $HERMES_INTEROP_PYTHON (default the SDK's venv) and
// $HERMES_INTEROP_NODE (default node on the PATH). Anything missing fails
// the test with what to build.
func interopSDKs(t *testing.T) []interopSDK {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	python := os.Getenv("HERMES_INTEROP_PYTHON")
	if python == "" {
		python = filepath.Join(repo, "clients", "python", ".venv", "bin", "python")
	}
	node := os.Getenv("HERMES_INTEROP_NODE")
	if node == "" {
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatalf("HERMES_INTEROP_NODE is not set and there is no node on the PATH: %v", err)
		}
	}
	pyDriver := filepath.Join(repo, "clients", "python", "tests", "interop_driver.py")
	tsDriver := filepath.Join(repo, "clients", "typescript", "dist", "test", "interop-driver.js")
	for _, f := range []struct{ path, fix string }{
		{python, "make python (it makes clients/python/.venv), or set HERMES_INTEROP_PYTHON"},
		{node, "install Node.js 20 or later, or set HERMES_INTEROP_NODE"},
		{pyDriver, "it is part of the repository"},
		{tsDriver, "make typescript (it compiles clients/typescript to dist/)"},
	} {
		if _, err := os.Stat(f.path); err != nil {
			t.Fatalf("%v: %s", err, f.fix)
		}
	}
	return []interopSDK{
		{name: "go"},
		{name: "python", cmd: []string{python, pyDriver}},
		{name: "typescript", cmd: []string{node, tsDriver}},
	}
}

// TestSDKInterop: each SDK's record, consumed by the other two.
func TestSDKInterop(t *testing.T) {
	if os.Getenv("HERMES_SDK_INTEROP") != "1" {
		t.Skip("needs the Python venv and the compiled TypeScript SDK: run `make sdk-interop` (part of `make test`), which builds them and sets HERMES_SDK_INTEROP=1")
	}
	sdks := interopSDKs(t)
	node := testcluster.StartNode(t)
	ctx := ctxT(t, 5*time.Minute)
	c, err := client.Dial(ctx, node.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	for i, producer := range sdks {
		topic := "interop-from-" + producer.name
		if _, err := c.CreateTopic(ctx, topic, client.WithPartitionCount(interopPartitions)); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		want := newInteropRecord(producer.name)
		// Records before it, so that its offset is not 0: one on every
		// partition and a few more on the key's.
		for p := range int32(interopPartitions) {
			n := 1
			if p == want.Partition {
				n += i + 1
			}
			for j := range n {
				m := &client.Message{Payload: fmt.Appendf(nil, "filler %d/%d", p, j)}
				if _, err := c.Publish(ctx, topic, []*client.Message{m}, client.WithPartition(p)); err != nil {
					t.Fatalf("publish a filler to %s/%d: %v", topic, p, err)
				}
			}
			if p == want.Partition {
				want.Offset = int64(n)
			}
		}

		if !t.Run(producer.name+" produces", func(t *testing.T) {
			interopProduce(t, ctx, producer, node.GRPCAddr, topic, want)
		}) {
			continue
		}
		for _, consumer := range sdks {
			if consumer.name == producer.name {
				continue
			}
			t.Run(consumer.name+" consumes "+producer.name+"'s", func(t *testing.T) {
				exp := want
				exp.Group = "interop-" + consumer.name + "-reads-" + producer.name
				interopConsume(t, ctx, consumer, node.GRPCAddr, topic, exp)
			})
		}
	}
}

// newInteropRecord is the record sdk produces: a key with bytes above
// 0x7f (murmur2 must treat them as unsigned), headers with a repeated
// key, a nil value, an empty one and a binary one, a payload of every
// byte value, a UUIDv7 and a timestamp beyond 2^53 with nanoseconds.
func newInteropRecord(sdk string) interopRecord {
	key := append([]byte("interop-key-"+sdk+"-"), 0x00, 0xff, 0x80, 0xc3, 0x28)
	payload := []byte("from " + sdk + ": ")
	for b := range 256 {
		payload = append(payload, byte(b))
	}
	payload = append(payload, bytes.Repeat([]byte{0xfe, 0x00}, 300)...)
	id := uuid.Must(uuid.NewV7())
	return interopRecord{
		Key:     key,
		Payload: payload,
		Headers: []interopHeader{
			{"trace", []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-" + sdk)},
			{"nil", nil},
			{"empty", []byte{}},
			{"binary", []byte{0x00, 0xff, 0x80, 0x7f}},
			{"trace", []byte("repeated key")},
		},
		MessageID:  fmt.Sprintf("%x", id[:]),
		Timestamp:  time.Now().Add(-time.Minute).UnixNano()/1000*1000 + 123,
		Partitions: interopPartitions,
		Partition:  record.KeyPartition(key, interopPartitions),
		TimeoutMs:  30_000,
	}
}

// runDriver runs sdk's driver in role and returns its last line, decoded.
func runDriver(t *testing.T, ctx context.Context, sdk interopSDK, addr, topic, role string, exp interopRecord) interopSeen {
	t.Helper()
	js, err := json.Marshal(exp)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	args := append(append([]string{}, sdk.cmd[1:]...), "--addr", addr, "--topic", topic, "--role", role, "--expect", string(js))
	cmd := exec.CommandContext(ctx, sdk.cmd[0], args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s driver: %v\nstderr:\n%s\nstdout:\n%s", sdk.name, role, err, stderr.String(), stdout.String())
	}
	t.Logf("%s %s driver ran in %v", sdk.name, role, time.Since(start).Round(time.Millisecond))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var seen interopSeen
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &seen); err != nil || seen.Role != role {
		t.Fatalf("%s %s driver: last line of output is not its result (%v):\n%s\nstderr:\n%s", sdk.name, role, err, stdout.String(), stderr.String())
	}
	return seen
}

// interopProduce has sdk publish want and checks where it was stored.
func interopProduce(t *testing.T, ctx context.Context, sdk interopSDK, addr, topic string, want interopRecord) {
	var partition int32
	var offset int64
	if sdk.cmd == nil {
		partition, offset = goProduce(t, ctx, addr, topic, want)
	} else {
		seen := runDriver(t, ctx, sdk, addr, topic, "produce", want)
		partition, offset = seen.Partition, seen.Offset
	}
	if partition != want.Partition || offset != want.Offset {
		t.Fatalf("%s stored the record at %d/%d, want %d/%d (murmur2 of the key, after the fillers)", sdk.name, partition, offset, want.Partition, want.Offset)
	}
}

// interopConsume has sdk consume want as a member of want.Group and
// checks every field of what it got.
func interopConsume(t *testing.T, ctx context.Context, sdk interopSDK, addr, topic string, want interopRecord) {
	var got interopRecord
	if sdk.cmd == nil {
		got = goConsume(t, ctx, addr, topic, want)
	} else {
		seen := runDriver(t, ctx, sdk, addr, topic, "consume", want)
		if seen.Record == nil {
			t.Fatalf("%s consume driver reported no record", sdk.name)
		}
		got = *seen.Record
	}
	want.Partitions, want.Group, want.TimeoutMs = 0, "", 0
	for _, d := range interopDiff(got, want) {
		t.Errorf("%s consumed a different record: %s", sdk.name, d)
	}
}

// interopDiff lists the fields in which got differs from want (a nil
// header value is not an empty one).
func interopDiff(got, want interopRecord) []string {
	var out []string
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			gj, _ := json.Marshal(g.Field(i).Interface())
			wj, _ := json.Marshal(w.Field(i).Interface())
			out = append(out, fmt.Sprintf("%s: got %.300s, want %.300s", g.Type().Field(i).Name, gj, wj))
		}
	}
	return out
}

// goProduce publishes want with the Go SDK's default producer.
func goProduce(t *testing.T, ctx context.Context, addr, topic string, want interopRecord) (int32, int64) {
	t.Helper()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	m := &client.Message{Key: want.Key, Payload: want.Payload, Timestamp: time.Unix(0, want.Timestamp)}
	id, err := hex.DecodeString(want.MessageID)
	if err != nil || len(id) != len(m.ID) {
		t.Fatalf("message id %q: %v", want.MessageID, err)
	}
	m.ID = client.MessageID(id)
	for _, h := range want.Headers {
		m.Headers = append(m.Headers, client.Header{Key: h.Key, Value: h.Value})
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(want.TimeoutMs)*time.Millisecond)
	defer cancel()
	f := p.Publish(wctx, m)
	ack, err := f.Wait(wctx)
	if err != nil {
		t.Fatalf("go produce: %v", err)
	}
	if err := p.Close(wctx); err != nil {
		t.Fatalf("go producer close: %v", err)
	}
	if ack.ID != m.ID {
		t.Errorf("go produce: ack for id %v, want %v", ack.ID, m.ID)
	}
	return ack.Partition, ack.Offset
}

// goConsume reads topic as a member of want.Group with the Go SDK's
// default consumer until the record with want's id comes.
func goConsume(t *testing.T, ctx context.Context, addr, topic string, want interopRecord) interopRecord {
	t.Helper()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs, err := c.Subscribe(ctx, topic, client.WithGroup(want.Group), client.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Duration(want.TimeoutMs)*time.Millisecond)
	defer cancel()
	skipped := 0
	for {
		m, err := cs.Next(wctx)
		if err != nil {
			t.Fatalf("go consume: no record with message id %s (%d others seen): %v", want.MessageID, skipped, err)
		}
		if fmt.Sprintf("%x", m.ID[:]) != want.MessageID {
			skipped++
			continue
		}
		if m.Topic != topic {
			t.Errorf("go consume: topic %q, want %q", m.Topic, topic)
		}
		got := interopRecord{
			Key: m.Key, Payload: m.Payload, MessageID: fmt.Sprintf("%x", m.ID[:]),
			Timestamp: m.Timestamp.UnixNano(), Partition: m.Partition, Offset: m.Offset,
		}
		for _, h := range m.Headers {
			got.Headers = append(got.Headers, interopHeader{Key: h.Key, Value: h.Value})
		}
		return got
	}
}
