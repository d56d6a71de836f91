package client

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// The integration tests run the real broker: the hermes binary is built
// once (on first use) into a temporary directory made by TestMain, and each
// test starts its own broker process on free loopback ports with a
// temporary data directory, stopped (by its pid) when the test ends.

var (
	binDir    string
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hermes-sdk-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// hermesBinary builds cmd/hermes once; it skips the test (only) when the
// binary does not build, since the broker is developed alongside.
func hermesBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "hermes")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/hermes-mq/hermes/cmd/hermes").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Skipf("hermes binary does not build, skipping integration test: %v", buildErr)
	}
	return binPath
}

// broker is one running broker process of a test.
type broker struct {
	t       testing.TB
	addr    string
	http    string
	raft    string
	wire    string
	dataDir string
	cmd     *exec.Cmd
	out     *syncBuffer
	// overWire: dial dials the hermes-wire listener (wire://), and the
	// Client does the rest over the gRPC address the node tells.
	overWire bool
}

// eachTransport runs test against a broker of its own over gRPC, then
// over hermes-wire: the same Producer, Consumer and Publish on both.
func eachTransport(t *testing.T, test func(t *testing.T, b *broker)) {
	for _, tr := range []string{"grpc", "wire"} {
		t.Run(tr, func(t *testing.T) {
			b := startBroker(t)
			b.overWire = tr == "wire"
			test(t, b)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writers and a reader.
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

// startBroker runs a broker with a fresh data directory.
func startBroker(t testing.TB) *broker {
	b := &broker{t: t, addr: testcluster.FreeAddr(t), http: testcluster.FreeAddr(t), raft: testcluster.FreeAddr(t),
		wire: testcluster.FreeAddr(t), dataDir: t.TempDir()}
	b.start()
	t.Cleanup(func() {
		b.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("broker output:\n%s", b.out.String())
		}
	})
	return b
}

func (b *broker) start() {
	b.t.Helper()
	b.out = &syncBuffer{}
	b.cmd = exec.Command(hermesBinary(b.t), "serve", "--data-dir", b.dataDir,
		"--grpc-addr", b.addr, "--http-addr", b.http, "--raft-addr", b.raft, "--kafka-addr", "", "--wire-addr", b.wire, "--log-level", "warn")
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
}

// stop signals the broker process this test started and waits for it,
// killing it after 5s.
func (b *broker) stop(sig os.Signal) {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	b.cmd = nil
}

// dial connects to b, waiting for it to start listening.
func (b *broker) dial(opts ...Option) *Client {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil { // wait for the port, so gRPC's first connect does not back off
		if conn, err := net.DialTimeout("tcp", b.addr, time.Second); err == nil {
			conn.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	addr := b.addr
	if b.overWire {
		addr = "wire://" + b.wire
	}
	for {
		c, err := Dial(ctx, addr, append([]Option{WithDialTimeout(time.Second)}, opts...)...)
		if err == nil {
			b.t.Cleanup(func() { c.Close() })
			return c
		}
		if ctx.Err() != nil {
			b.t.Fatalf("broker at %s not reachable: %v\n%s", b.addr, err, b.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
