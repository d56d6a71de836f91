package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Ports every node listens on, each in its own namespace.
const (
	grpcPort = 50051
	httpPort = 8080
	raftPort = 7000
)

// node is one hermes process in its namespace. Only the campaign's own
// goroutine (the nemesis and the final phase) starts and signals nodes.
type node struct {
	id      int
	ns      string
	ip      string
	dir     string // the node's own: its file system's mount point when it has one
	disk    *disk
	logPath string
	bin     string
	args    []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process exited
	exitCode int
	paused   bool
	starts   int
}

// dataDir is the node's --data-dir.
func (n *node) dataDir() string { return filepath.Join(n.dir, "data") }

func (n *node) grpcAddr() string { return fmt.Sprintf("%s:%d", n.ip, grpcPort) }
func (n *node) httpURL() string  { return fmt.Sprintf("http://%s:%d", n.ip, httpPort) }
func (n *node) raftAddr() string { return fmt.Sprintf("%s:%d", n.ip, raftPort) }

// start launches the process; it does not wait for it to be ready.
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("node %d is already running", n.id)
		}
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(logf, "\n==== chaos: start %d of node %d at %s\n", n.starts, n.id, time.Now().UTC().Format(time.RFC3339Nano))
	// ip netns exec enters the namespace and executes the program in its
	// own process: the PID is the node's.
	args := append([]string{"netns", "exec", n.ns, n.bin, "serve"}, n.args...)
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	n.cmd, n.done, n.paused = cmd, done, false
	go func() {
		err := cmd.Wait()
		logf.Close()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode() // -1 when killed by a signal
		}
		n.mu.Lock()
		n.exitCode = code
		n.mu.Unlock()
		close(done)
	}()
	return nil
}

// pid is the running process's id, 0 when it is not running.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	select {
	case <-n.done:
		return 0
	default:
		return n.cmd.Process.Pid
	}
}

// running reports whether the process is alive (paused counts).
func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

func (n *node) signal(sig syscall.Signal) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return true
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *node) kill() {
	if n.signal(syscall.SIGKILL) {
		<-n.waitChan()
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// life counts the node's starts: samples of one life of its process.
func (n *node) life() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

func (n *node) pause()  { n.signal(syscall.SIGSTOP) }
func (n *node) resume() { n.signal(syscall.SIGCONT) }

func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

func (n *node) waitChan() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.done
}

// stop sends SIGTERM (after SIGCONT, should it be paused) and waits up to
// timeout; it returns the exit code, or an error when the node had to be
// killed.
func (n *node) stop(timeout time.Duration) (time.Duration, int, error) {
	start := time.Now()
	n.resume()
	if !n.signal(syscall.SIGTERM) {
		return 0, n.code(), nil
	}
	select {
	case <-n.waitChan():
		return time.Since(start), n.code(), nil
	case <-time.After(timeout):
		n.kill()
		return time.Since(start), -1, fmt.Errorf("node %d did not stop within %v of SIGTERM: killed", n.id, timeout)
	}
}

func (n *node) code() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitCode
}

var probe = &http.Client{Timeout: time.Second}

var errDegraded = errors.New("up, not ready")

// readyz is the node's /readyz answer: whether it is ready, and why not.
func (n *node) readyz() (bool, string) {
	resp, err := probe.Get(n.httpURL() + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(b))
}

// degraded reports whether a not-ready answer says the node is up but
// holds a replica offline (one it cannot open, or one waiting for disk
// space): it will not become ready by waiting.
func degraded(why string) bool {
	return strings.Contains(why, "replicas offline on this node") || strings.Contains(why, "metadata replica is offline")
}

// waitReady waits until the node is ready, it exits, or ctx ends. A node
// that is up but degraded (see degraded) returns errDegraded at once.
func (n *node) waitReady(ctx context.Context) error {
	for {
		ok, why := n.readyz()
		if ok {
			return nil
		}
		if degraded(why) {
			return fmt.Errorf("%w: node %d: %s", errDegraded, n.id, why)
		}
		select {
		case <-n.waitChan():
			return fmt.Errorf("node %d exited with status %d before it was ready; its log: %s", n.id, n.code(), n.logPath)
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready: %w", n.id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// newNodes lays out n nodes of a cluster on the network.
func newNodes(net *network, count int, bin, dir string, extra []string) []*node {
	nodes := make([]*node, count)
	for i := 1; i <= count; i++ {
		nodes[i-1] = newNode(net, i, count, bin, dir, extra)
	}
	return nodes
}

// newNode lays out node id of a cluster of nodes 1..count. A node with an
// id above count joins the cluster (--join) and names itself among the
// peers.
func newNode(net *network, id, count int, bin, dir string, extra []string) *node {
	var peers []string
	for i := 1; i <= count; i++ {
		peers = append(peers, fmt.Sprintf("%d=%s:%d", i, net.IP(i), raftPort))
	}
	if id > count {
		peers = append(peers, fmt.Sprintf("%d=%s:%d", id, net.IP(id), raftPort))
		extra = append([]string{"--join"}, extra...)
	}
	data := filepath.Join(dir, fmt.Sprintf("n%d", id))
	n := &node{id: id, ns: net.ns(id), ip: net.IP(id), dir: data, bin: bin,
		logPath: filepath.Join(dir, fmt.Sprintf("n%d.log", id))}
	n.args = append([]string{
		"--node-id", fmt.Sprint(id),
		"--data-dir", filepath.Join(data, "data"),
		"--peers", strings.Join(peers, ","),
		"--raft-addr", n.raftAddr(),
		"--grpc-addr", n.grpcAddr(),
		"--http-addr", fmt.Sprintf("%s:%d", n.ip, httpPort),
		"--kafka-addr", "",
		"--wire-addr", "",
		// A test network of its own, reached only from this host.
		"--allow-insecure",
		"--shutdown-timeout", "10s",
		// The scrubber finds what bitrot-replica damages under a running
		// node (the default waits a day).
		"--scrub-interval", "5s",
	}, extra...)
	return n
}
