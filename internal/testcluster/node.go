// Package testcluster starts real hermes processes for tests: build the
// binary once, start nodes on free loopback ports, and kill, pause,
// restart and stop them. Every node a test starts is stopped by
// t.Cleanup, whatever the test's outcome; only processes started here are
// ever signalled, by PID.
package testcluster

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/tlsconf"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/hermes once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hermes-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "hermes")
		cmd := exec.Command("go", "build", "-tags", "pebblegozstd", "-o", buildPath, "github.com/hermes-mq/hermes/cmd/hermes")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building hermes: %v", buildErr)
	}
	return buildPath
}

var (
	certsOnce sync.Once
	certsDir  string
	certsErr  error
)

// CertsNodes and CertsClients are the certificates Certs writes: nodes 1
// to CertsNodes, and a client certificate per name.
const CertsNodes = 9

var CertsClients = []string{"admin", "alice", "bob"}

// Certs writes, once per test process, a development CA with node and
// client certificates (hermes dev-certs) and returns their directory.
func Certs(t testing.TB) string {
	t.Helper()
	certsOnce.Do(func() {
		if certsDir, certsErr = os.MkdirTemp("", "hermes-certs-"); certsErr != nil {
			return
		}
		certsErr = tlsconf.WriteDev(tlsconf.DevOptions{Dir: certsDir, Nodes: CertsNodes, Clients: CertsClients})
	})
	if certsErr != nil {
		t.Fatalf("writing certificates: %v", certsErr)
	}
	return certsDir
}

// NodeTLSArgs are the serve flags of node id's mutual TLS with the other
// nodes (Certs' CA and node certificate).
func NodeTLSArgs(t testing.TB, id uint64) []string {
	f := tlsconf.NodeFiles(Certs(t), id)
	return []string{"--node-tls-cert", f.Cert, "--node-tls-key", f.Key, "--node-tls-ca", f.CA}
}

// withNodeTLS adds NodeTLSArgs to the flags of a node that is part of a
// cluster of several (--peers): the nodes of every test cluster talk
// mutual TLS, as in production. A test wanting plaintext passes
// --node-tls-cert "".
func withNodeTLS(t testing.TB, args []string) []string {
	var peers, tlsGiven bool
	id := uint64(1)
	for i, a := range args {
		switch a {
		case "--peers":
			peers = true
		case "--node-tls-cert":
			tlsGiven = true
		case "--node-id":
			if i+1 < len(args) {
				fmt.Sscan(args[i+1], &id)
			}
		}
	}
	if !peers || tlsGiven {
		return args
	}
	return append(append([]string{}, args...), NodeTLSArgs(t, id)...)
}

// RemoveBinary deletes what Binary built. A test package that uses Binary
// calls it from TestMain after m.Run, so that runs leave no build behind.
func RemoveBinary() {
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
	if certsDir != "" {
		os.RemoveAll(certsDir)
	}
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Node is one hermes process.
type Node struct {
	t        testing.TB
	bin      string
	DataDir  string
	GRPCAddr string
	HTTPAddr string
	// KafkaAddr is the node's Kafka listener.
	KafkaAddr string
	// WireAddr is the node's hermes-wire listener.
	WireAddr string
	RaftAddr string   // where other nodes reach it
	Args     []string // extra serve flags
	logPath  string

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when the current process has been waited for.
	exited chan struct{}
}

// StartNode starts a node with a fresh data directory and free ports, and
// waits until it is ready. Extra `hermes serve` flags may be given.
func StartNode(t testing.TB, args ...string) *Node {
	t.Helper()
	n := newNode(t, args...)
	n.RaftAddr = FreeAddr(t)
	n.Args = append([]string{"--raft-addr", n.RaftAddr}, n.Args...)
	n.Start()
	return n
}

// StartNodeFrom is StartNode with a copy of the data directory src (a
// directory an earlier version wrote, say) as the node's.
func StartNodeFrom(t testing.TB, src string, args ...string) *Node {
	t.Helper()
	n := newNode(t, args...)
	if err := os.CopyFS(n.DataDir, os.DirFS(src)); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	n.RaftAddr = FreeAddr(t)
	n.Args = append([]string{"--raft-addr", n.RaftAddr}, n.Args...)
	n.Start()
	return n
}

func newNode(t testing.TB, args ...string) *Node {
	args = withNodeTLS(t, args)
	n := &Node{
		t: t, bin: Binary(t), DataDir: filepath.Join(t.TempDir(), "data"),
		GRPCAddr: FreeAddr(t), HTTPAddr: FreeAddr(t), KafkaAddr: FreeAddr(t), WireAddr: FreeAddr(t), Args: args,
	}
	n.logPath = filepath.Join(t.TempDir(), "hermes.log")
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("log of node %s:\n%s", n.GRPCAddr, tail(n.logPath, 60))
		}
	})
	return n
}

// StartCluster starts n nodes (ids 1..n) that form one cluster on
// loopback, each with the extra serve flags given. It returns once every
// process answers /readyz; the cluster itself may still be electing.
func StartCluster(t testing.TB, n int, args ...string) []*Node {
	t.Helper()
	raft := make([]string, n)
	var peers []string
	for i := range raft {
		raft[i] = FreeAddr(t)
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, raft[i]))
	}
	nodes := make([]*Node, n)
	for i := range nodes {
		nodeArgs := append([]string{"--node-id", fmt.Sprint(i + 1), "--raft-addr", raft[i],
			"--peers", strings.Join(peers, ",")}, args...)
		nodes[i] = newNode(t, nodeArgs...)
		nodes[i].RaftAddr = raft[i]
	}
	StartAll(nodes...)
	return nodes
}

// handedOut holds every address FreeAddr returned in this process: the
// kernel may offer a port again once its probe listener is closed, before
// the node it was meant for binds it, and two nodes would then collide.
// FreeAddr's ports: below the default ephemeral range, above the usual
// services'.
const freePortLow, freePortHigh = 20000, 32768

var handedOut struct {
	sync.Mutex
	addrs map[string]bool
}

// FreeAddr returns a loopback address with a port free right now and
// never returned before in this process. The port is drawn at random
// below the kernel's ephemeral range (ip_local_port_range, which starts
// at 32768 by default): a port from that range could be given, before
// the node binds it, to any outgoing connection of any process — the
// tests open thousands — and the node would fail with "address already
// in use".
func FreeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", freePortLow+rand.IntN(freePortHigh-freePortLow)))
		if err != nil {
			continue // taken
		}
		addr := l.Addr().String()
		l.Close()
		if !handedOut.addrs[addr] {
			if handedOut.addrs == nil {
				handedOut.addrs = make(map[string]bool)
			}
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no loopback port free that was not handed out before, in 1000 tries")
	return ""
}

// Start starts the process (again, after Kill or Stop) on the same data
// directory and ports, and waits until /readyz answers. A node is ready
// once it has caught up with the metadata group, which needs a quorum:
// start the nodes of a stopped cluster with StartAll.
func (n *Node) Start() {
	n.t.Helper()
	n.waitReady(n.launch())
}

// StartAll starts the processes of nodes at once, then waits until each
// is ready: as a cluster must start, since none is ready before a
// quorum of them runs.
func StartAll(nodes ...*Node) {
	exited := make([]<-chan struct{}, len(nodes))
	for i, n := range nodes {
		n.t.Helper()
		exited[i] = n.launch()
	}
	for i, n := range nodes {
		n.waitReady(exited[i])
	}
}

// Launch starts the process without waiting for it to be ready (see
// WaitReady).
func (n *Node) Launch() {
	n.t.Helper()
	n.launch()
}

// WaitReady waits until /readyz answers 200, failing the test if the
// process exits or 30 s pass.
func (n *Node) WaitReady() {
	n.t.Helper()
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	n.waitReady(exited)
}

// Ready reports whether /readyz answers 200 now.
func (n *Node) Ready() bool {
	resp, err := n.probeClient(time.Second).Get(n.HTTPURL() + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// launch starts the process and returns a channel closed when it exits.
func (n *Node) launch() <-chan struct{} {
	n.t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	args := append([]string{"serve", "--data-dir", n.DataDir, "--grpc-addr", n.GRPCAddr, "--http-addr", n.HTTPAddr, "--kafka-addr", n.KafkaAddr, "--wire-addr", n.WireAddr}, n.Args...)
	cmd := exec.Command(n.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	return exited
}

func (n *Node) waitReady(exited <-chan struct{}) {
	deadline := time.Now().Add(30 * time.Second)
	client := n.probeClient(time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			n.t.Fatalf("hermes exited during start:\n%s", tail(n.logPath, 40))
		default:
		}
		resp, err := client.Get(n.HTTPURL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatalf("hermes not ready after 30s:\n%s", tail(n.logPath, 40))
}

// HTTPURL is the base URL of the node's HTTP listener: https when it was
// started with --tls-cert.
func (n *Node) HTTPURL() string {
	for i, a := range n.Args {
		if a == "--tls-cert" && i+1 < len(n.Args) && n.Args[i+1] != "" {
			return "https://" + n.HTTPAddr
		}
	}
	return "http://" + n.HTTPAddr
}

// probeClient is the HTTP client of the harness's own probes (readiness,
// metrics): it does not check the node's certificate, which is the
// tests' business.
func (n *Node) probeClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// PID is the current process id (0 when not running).
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) signal(sig syscall.Signal) (<-chan struct{}, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil, false
	}
	select {
	case <-n.exited:
		return n.exited, false
	default:
	}
	n.cmd.Process.Signal(sig)
	return n.exited, true
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (n *Node) Kill() {
	if ch, ok := n.signal(syscall.SIGKILL); ok {
		<-ch
	}
}

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after 15s).
func (n *Node) Stop() {
	ch, ok := n.signal(syscall.SIGTERM)
	if !ok {
		return
	}
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		n.Kill()
	}
}

// ExitCode is the exit status of the node's last process, once it has
// exited (-1 before, or when a signal ended it).
func (n *Node) ExitCode() int {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return -1
	}
	select {
	case <-exited:
		return cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Pause and Resume send SIGSTOP and SIGCONT.
func (n *Node) Pause()  { n.signal(syscall.SIGSTOP) }
func (n *Node) Resume() { n.signal(syscall.SIGCONT) }

// Metrics returns the node's /metrics text.
func (n *Node) Metrics() string {
	resp, err := n.probeClient(10 * time.Second).Get(n.HTTPURL() + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// Log returns the last lines of the node's log.
func (n *Node) Log(lines int) string { return tail(n.logPath, lines) }

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
