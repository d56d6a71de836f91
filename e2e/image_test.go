package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestImageCluster is the container image and the compose file as a user
// runs them (docs/OPERATIONS.md, "Deploying"): it builds the image with
// `make image`, starts deploy/docker-compose.yml's three nodes with
// podman-compose under a project name of its own, waits for /readyz on
// all three through the ports published on 127.0.0.1, publishes with the
// hermes CLI of bin/ on one node, kills the container of the partition's
// leader, publishes again on a surviving node and reads every record back
// on a node that is not the old leader. Everything it created
// (containers, network, volumes, image) is removed in t.Cleanup.
//
// It runs only with HERMES_IMAGE_TEST=1 (`make image-test`). Where podman
// or podman-compose is missing, or podman cannot run a container here, it
// is skipped, and the reason is printed (t.Skip's line starts with
// "image test skipped:", which `make image-test` shows).
//
// Environment: PODMAN (default podman), PODMAN_COMPOSE (default
// podman-compose), CONTAINERS_CONF (default deploy/podman/containers.conf,
// the settings this kind of machine needs; empty: the machine's own).
func TestImageCluster(t *testing.T) {
	if os.Getenv("HERMES_IMAGE_TEST") == "" {
		t.Skip("image test skipped: HERMES_IMAGE_TEST is not set (make image-test sets it)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(root, "bin", "hermes")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the hermes CLI: %v (make build)", err)
	}
	podman := imgEnvOr("PODMAN", "podman")
	if _, err := exec.LookPath(podman); err != nil {
		t.Skipf("image test skipped: %s is not installed (Debian: apt-get install podman runc; make image-deps)", podman)
	}
	compose := imgEnvOr("PODMAN_COMPOSE", "podman-compose")
	if _, err := exec.LookPath(compose); err != nil {
		t.Skipf("image test skipped: %s is not installed (Debian: apt-get install podman-compose; make image-deps)", compose)
	}
	env := os.Environ()
	if _, set := os.LookupEnv("CONTAINERS_CONF"); !set {
		env = append(env, "CONTAINERS_CONF="+filepath.Join(root, "deploy", "podman", "containers.conf"))
	}
	run := func(timeout time.Duration, extraEnv []string, name string, args ...string) (string, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = root
		cmd.Env = append(slices.Clone(env), extraEnv...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return out.String(), code, err
	}
	step := func(what string, since time.Time) { t.Logf("%-55s %6.1fs", what, time.Since(since).Seconds()) }

	// A name of its own for everything: the image tag, the compose
	// project (containers, network and volumes are named after it).
	tag := fmt.Sprintf("e2e-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	image := "localhost/hermes:" + tag
	project := "hermes-" + tag

	start := time.Now()
	t.Cleanup(func() {
		if out, _, err := run(2*time.Minute, nil, podman, "rmi", "-f", image); err != nil {
			t.Errorf("podman rmi %s: %v\n%s", image, err, out)
		}
	})
	if out, _, err := run(10*time.Minute, nil, "make", "--no-print-directory", "image", "IMAGE="+image); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	step("make image (static binary, podman build)", start)

	// Can podman run a container here? Exit 125 (podman's own error) or
	// 126 (the OCI runtime could not start the command) means it cannot:
	// skip with its words. Anything else is the image's doing.
	t0 := time.Now()
	out, code, err := run(2*time.Minute, nil, podman, "run", "--rm", image, "version")
	if err != nil {
		if code == 125 || code == 126 {
			t.Skipf("image test skipped: podman cannot run containers on this machine (podman run exited %d):\n%s", code, strings.TrimSpace(out))
		}
		t.Fatalf("podman run %s version: %v\n%s", image, err, out)
	}
	if !strings.Contains(out, "hermes") {
		t.Fatalf("podman run %s version printed %q", image, out)
	}
	step("podman run IMAGE version", t0)

	// Host ports: free ones on 127.0.0.1, through the compose file's
	// variables.
	ports := imgFreePorts(t, 6)
	grpcPort := func(n int) int { return ports[2*(n-1)] }
	httpPort := func(n int) int { return ports[2*(n-1)+1] }
	composeEnv := []string{"HERMES_IMAGE=" + image, "HERMES_PUBLISH_IP=127.0.0.1"}
	for n := 1; n <= 3; n++ {
		composeEnv = append(composeEnv,
			fmt.Sprintf("HERMES_%d_GRPC_PORT=%d", n, grpcPort(n)),
			fmt.Sprintf("HERMES_%d_HTTP_PORT=%d", n, httpPort(n)))
	}
	composeFile := filepath.Join(root, "deploy", "docker-compose.yml")
	composeArgs := func(args ...string) []string {
		return append([]string{"-p", project, "-f", composeFile}, args...)
	}
	projectFilter := "label=io.podman.compose.project=" + project

	t.Cleanup(func() {
		t0 := time.Now()
		if out, _, err := run(3*time.Minute, composeEnv, compose, composeArgs("down", "-v", "-t", "5")...); err != nil {
			t.Logf("%s down: %v\n%s", compose, err, out)
		}
		// Whatever down left: containers, volumes, the network.
		if out, _, _ := run(time.Minute, nil, podman, "ps", "-aq", "--filter", projectFilter); strings.TrimSpace(out) != "" {
			run(2*time.Minute, nil, podman, append([]string{"rm", "-f", "-t", "0"}, strings.Fields(out)...)...)
		}
		if out, _, _ := run(time.Minute, nil, podman, "volume", "ls", "-q", "--filter", projectFilter); strings.TrimSpace(out) != "" {
			run(time.Minute, nil, podman, append([]string{"volume", "rm", "-f"}, strings.Fields(out)...)...)
		}
		run(time.Minute, nil, podman, "network", "rm", "-f", project+"_default")
		var left []string
		for _, ls := range [][]string{
			{"ps", "-a", "--format", "{{.Names}}"},
			{"volume", "ls", "--format", "{{.Name}}"},
			{"network", "ls", "--format", "{{.Name}}"},
		} {
			out, _, _ := run(time.Minute, nil, podman, ls...)
			for _, name := range strings.Fields(out) {
				if strings.Contains(name, project) {
					left = append(left, name)
				}
			}
		}
		if len(left) > 0 {
			t.Errorf("left behind after cleanup: %v", left)
		}
		step("cleanup (compose down -v, image)", t0)
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for n := 1; n <= 3; n++ {
			id := imgContainerOf(run, podman, project, n)
			if id == "" {
				continue
			}
			out, _, _ := run(time.Minute, nil, podman, "logs", "--tail", "60", id)
			t.Logf("logs of hermes-%d:\n%s", n, out)
		}
	})

	t0 = time.Now()
	upOut, _, err := run(5*time.Minute, composeEnv, compose, composeArgs("up", "-d")...)
	if err != nil {
		t.Fatalf("%s up: %v\n%s", compose, err, upOut)
	}
	// podman-compose 1.0 exits 0 even when a container did not start.
	if out, _, _ := run(time.Minute, nil, podman, "ps", "-q", "--filter", projectFilter, "--filter", "status=running"); len(strings.Fields(out)) != 3 {
		all, _, _ := run(time.Minute, nil, podman, "ps", "-a", "--filter", projectFilter)
		t.Fatalf("%s up: %d of 3 containers running:\n%s\n%s", compose, len(strings.Fields(out)), all, upOut)
	}
	step("compose up -d (3 nodes)", t0)

	t0 = time.Now()
	for n := 1; n <= 3; n++ {
		imgWaitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort(n)), 3*time.Minute)
	}
	step("/readyz 200 on all three nodes", t0)

	// The CLI, with nothing of the caller's environment that could point
	// it elsewhere (HERMES_ADDR, profiles).
	cliEnv := []string{"XDG_CONFIG_HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERMES_") {
			cliEnv = append(cliEnv, strings.SplitN(kv, "=", 2)[0]+"=")
		}
	}
	hermes := func(timeout time.Duration, args ...string) (string, error) {
		out, _, err := run(timeout, cliEnv, cli, args...)
		return out, err
	}
	addr := func(n int) string { return fmt.Sprintf("127.0.0.1:%d", grpcPort(n)) }

	const topic = "image-test"
	t0 = time.Now()
	imgRetry(t, time.Minute, func() error {
		out, err := hermes(30*time.Second, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3", "--if-not-exists", "--addr", addr(1), "--timeout", "20s")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	var want []string
	for i := 0; i < 100; i++ {
		want = append(want, fmt.Sprintf("before-kill-%03d", i))
	}
	if out, err := hermes(2*time.Minute, append([]string{"publish", topic, "--addr", addr(1), "--timeout", "60s"}, want...)...); err != nil {
		t.Fatalf("hermes publish on node 1: %v\n%s", err, out)
	}
	step("topic create, 100 records published on node 1 (CLI)", t0)

	// The partition's leader, as node 1 sees it.
	t0 = time.Now()
	c1, _ := imgDialAddr(t, addr(1))
	var leader int
	imgRetry(t, time.Minute, func() error {
		resp, err := c1.DescribeCluster(ctxT(t, 10*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			return err
		}
		for _, p := range resp.Partitions {
			if p.Topic == topic && p.Partition == 0 && p.Leader != 0 {
				leader = int(p.Leader)
				return nil
			}
		}
		return fmt.Errorf("no leader known for %s/0 yet", topic)
	})
	id := imgContainerOf(run, podman, project, leader)
	if id == "" {
		t.Fatalf("no container for hermes-%d (the leader) in project %s", leader, project)
	}
	if out, _, err := run(time.Minute, nil, podman, "kill", "--signal", "KILL", id); err != nil {
		t.Fatalf("podman kill hermes-%d: %v\n%s", leader, err, out)
	}
	step(fmt.Sprintf("leader is node %d; its container SIGKILLed", leader), t0)

	// Publish more on a survivor, and read everything back on another
	// survivor: both go through the election of a new leader.
	var others []int
	for n := 1; n <= 3; n++ {
		if n != leader {
			others = append(others, n)
		}
	}
	t0 = time.Now()
	var more []string
	for i := 0; i < 10; i++ {
		more = append(more, fmt.Sprintf("after-kill-%03d", i))
	}
	imgRetry(t, 2*time.Minute, func() error {
		out, err := hermes(90*time.Second, append([]string{"publish", topic, "--addr", addr(others[0]), "--timeout", "60s"}, more...)...)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	step(fmt.Sprintf("10 more published on node %d after the kill", others[0]), t0)
	want = append(want, more...)

	t0 = time.Now()
	out, err = hermes(3*time.Minute, "consume", topic, "--from-beginning", "--count", strconv.Itoa(len(want)), "--timeout", "2m", "--addr", addr(others[1]))
	if err != nil {
		t.Fatalf("hermes consume on node %d: %v\n%s", others[1], err, out)
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "before-kill-") || strings.HasPrefix(line, "after-kill-") {
			got = append(got, line)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records back on node %d, want %d in order; got:\n%s", len(got), others[1], len(want), out)
	}
	step(fmt.Sprintf("all %d records read back on node %d (CLI)", len(want), others[1]), t0)
	if state, _, _ := run(time.Minute, nil, podman, "inspect", "--format", "{{.State.Status}} restarts={{.RestartCount}}", id); state != "" {
		t.Logf("the killed leader's container now: %s", strings.TrimSpace(state))
	}
	step("total", start)
}

func imgEnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// containerOf is the id of service hermes-N's container in a compose
// project ("" if none).
func imgContainerOf(run func(time.Duration, []string, string, ...string) (string, int, error), podman, project string, n int) string {
	out, _, _ := run(time.Minute, nil, podman, "ps", "-aq",
		"--filter", "label=io.podman.compose.project="+project,
		"--filter", fmt.Sprintf("label=com.docker.compose.service=hermes-%d", n))
	if f := strings.Fields(out); len(f) > 0 {
		return f[0]
	}
	return ""
}

// imgFreePorts finds n free TCP ports on 127.0.0.1, below the ephemeral
// range (testcluster.FreeAddr).
func imgFreePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := 0; i < n; i++ {
		_, p, _ := strings.Cut(testcluster.FreeAddr(t), ":")
		port, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, port)
	}
	return ports
}

func imgWaitReady(t *testing.T, url string, d time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err == nil {
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body[:n])))
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s not ready after %v: %s", url, d, last)
}

func imgRetry(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(time.Second)
	}
}

func imgDialAddr(t *testing.T, addr string) (pb.HermesClient, func()) {
	t.Helper()
	conn, err := grpcClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewHermesClient(conn), func() { conn.Close() }
}
