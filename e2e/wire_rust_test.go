package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// rustExamples builds the Rust client's examples (cargo caches them) and
// returns the injector's and the subscriber's paths.
func rustExamples(t *testing.T) (injector, subscriber string) {
	t.Helper()
	crate, err := filepath.Abs(filepath.Join("..", "clients", "rust"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cargo", "build", "--release", "--locked", "--examples")
	cmd.Dir = crate
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cargo build of the Rust examples: %v\n%s", err, out)
	}
	dir := filepath.Join(crate, "target", "release", "examples")
	return filepath.Join(dir, "injector"), filepath.Join(dir, "subscriber")
}

// injectorPayload is what the Rust injector sends: its send time (Unix
// ns) and a sequence number, little-endian, then padding.
func injectorPayload(seq uint64) []byte {
	p := make([]byte, 96)
	binary.LittleEndian.PutUint64(p, uint64(time.Now().UnixNano()))
	binary.LittleEndian.PutUint64(p[8:], seq)
	return p
}

// TestWireRustAndGoInterop: in each mode, a Go and a Rust subscriber each
// receive every record a Rust publisher and then a Go publisher sent, in
// order.
func TestWireRustAndGoInterop(t *testing.T) {
	injector, subscriber := rustExamples(t)
	n := testcluster.StartNode(t)
	gc, _ := dial(t, n)
	const each = 1000
	for _, mode := range []string{"consistent", "eventual", "performance"} {
		t.Run(mode, func(t *testing.T) {
			topic := "interop-" + mode
			createTopic(t, gc, topic, 1)
			ctx := ctxT(t, 90*time.Second)
			c := wireDial(t, n.WireAddr, wire.Options{ClientName: "go-interop"})
			top, err := c.OpenTopic(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			// The Go subscriber.
			var mu sync.Mutex
			var seqs []uint64
			if _, err := c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Performance: true, Credit: 500, Handler: func(d *wire.Delivery) {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range d.Records {
					seqs = append(seqs, binary.LittleEndian.Uint64(r.Payload[8:]))
				}
			}}); err != nil {
				t.Fatal(err)
			}
			// The Rust subscriber: ready once it printed its first line.
			sub := exec.CommandContext(ctx, subscriber, "--addr", n.WireAddr, "--topic", topic, "--count", fmt.Sprint(2*each),
				"--timeout-secs", "60", "--from", "latest", "--performance")
			stdout, err := sub.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			sub.Stderr = &stderr
			if err := sub.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sub.Process.Kill(); sub.Wait() })
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() {
				t.Fatalf("the Rust subscriber said nothing: %s", stderr.String())
			}
			// The Rust publisher, then the Go one.
			out, err := exec.CommandContext(ctx, injector, "--addr", n.WireAddr, "--topic", topic, "--count", fmt.Sprint(each),
				"--rate", "5000", "--mode", mode, "--partition", "0").CombinedOutput()
			if err != nil {
				t.Fatalf("injector: %v\n%s", err, out)
			}
			for i := range each {
				if _, err := c.Publish(ctx, top.ID, 0, map[string]uint8{"consistent": wire.ModeConsistent, "eventual": wire.ModeEventual,
					"performance": wire.ModePerformance}[mode], []record.Record{{Payload: injectorPayload(uint64(each + i))}}); err != nil {
					t.Fatal(err)
				}
			}
			var report strings.Builder
			for lines.Scan() {
				report.WriteString(lines.Text() + "\n")
			}
			if err := sub.Wait(); err != nil {
				t.Fatalf("the Rust subscriber: %v\n%s%s", err, report.String(), stderr.String())
			}
			if want := fmt.Sprintf("delivery rate: %d/%d", 2*each, 2*each); !strings.Contains(report.String(), want) ||
				!strings.Contains(report.String(), "0 records skipped in the sequence, 0 out of order") {
				t.Fatalf("the Rust subscriber got:\n%s", report.String())
			}
			waitFor(t, 20*time.Second, "the Go subscriber gets every record", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seqs) >= 2*each
			})
			mu.Lock()
			defer mu.Unlock()
			for i, s := range seqs {
				if s != uint64(i) {
					t.Fatalf("the Go subscriber's record %d has sequence %d", i, s)
				}
			}
		})
	}
}
