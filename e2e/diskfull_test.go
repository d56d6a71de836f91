package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
)

// smallDisk mounts a tmpfs of size bytes for the test (root only) and
// returns its path.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if exec.Command("umount", dir).Run() != nil {
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fill takes all but keep bytes of dir's file system into one file and
// returns it (remove it to give the space back).
func fill(t *testing.T, dir string, keep int64) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail)*st.Bsize - keep
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for free > 0 {
		n := min(int64(len(chunk)), free)
		if _, err := f.Write(chunk[:n]); err != nil {
			break // full
		}
		free -= n
	}
	return path
}

// TestDiskFullRecoversWithoutRestart: a write that finds the disk full
// takes the partition offline with an error that says so at every
// client, /readyz names it, and once space is freed the partition is
// opened again from disk by itself: the same process takes publishes,
// every acknowledged record is there, and a graceful stop exits 0.
func TestDiskFullRecoversWithoutRestart(t *testing.T) {
	disk := smallDisk(t, "48m")
	n := testcluster.StartNode(t, "--data-dir", filepath.Join(disk, "data"), "--min-free-bytes", "0")
	pid := n.PID()
	ctx := ctxT(t, 90*time.Second)
	c, err := client.Dial(ctx, n.GRPCAddr, client.WithRetry(2, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "df", client.WithPartitionCount(1)); err != nil {
		t.Fatal(err)
	}
	var acked []string
	publish := func(v string) error {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := c.Publish(pctx, "df", []*client.Message{{Payload: []byte(v)}}, client.WithMode(client.ModeConsistent))
		if err == nil {
			acked = append(acked, v)
		}
		return err
	}
	for i := range 20 {
		if err := publish(fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	ballast := fill(t, disk, 0)
	var failure error
	big := strings.Repeat("x", 64<<10)
	// Up to 12.8 MiB: more than the space the partition's active segment
	// has preallocated (4 MiB), where publishes go on after the disk
	// fills.
	for i := 0; i < 200 && failure == nil; i++ {
		failure = publish(fmt.Sprint("full-", i, big))
	}
	if failure == nil {
		t.Fatal("publishes on a full disk all succeeded")
	}
	if !errors.Is(failure, client.ErrUnavailable) || !strings.Contains(failure.Error(), "full disk") || !strings.Contains(failure.Error(), "by itself") {
		t.Fatalf("a publish on a full disk: %v (want UNAVAILABLE saying the disk is full and that it recovers by itself)", failure)
	}
	code, body := readyzOf(n)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "df/0") {
		t.Fatalf("/readyz with an offline partition: %d %q", code, body)
	}
	out, _ := exec.Command(testcluster.Binary(t), "publish", "--addr", n.GRPCAddr, "--timeout", "2s", "df", "hello").CombinedOutput()
	if !strings.Contains(string(out), "full disk") {
		t.Fatalf("the CLI on a full disk says:\n%s", out)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "publishes succeed again without a restart", func() bool {
		return publish(fmt.Sprint("after-", len(acked))) == nil
	})
	for i := range 20 {
		if err := publish(fmt.Sprint("after-more-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n.PID() != pid {
		t.Fatal("the node was restarted")
	}
	waitFor(t, 10*time.Second, "/readyz says ready", func() bool { code, _ := readyzOf(n); return code == http.StatusOK })
	gc, _ := dial(t, n)
	got := map[string]bool{}
	for _, r := range readAll(t, gc, "df", 0) {
		got[string(r.Payload)] = true
	}
	for _, v := range acked {
		if !got[v] {
			t.Fatalf("acknowledged record %.20q is missing after the recovery", v)
		}
	}
	n.Stop()
	if code := n.ExitCode(); code != 0 {
		t.Fatalf("a graceful stop after a recovered storage failure exited with %d", code)
	}
}

// TestLowDiskRefusesPublishes: below --min-free-bytes durable publishes
// get a retriable RESOURCE_EXHAUSTED that says why, before any write
// fails; once space is freed they are taken again.
func TestLowDiskRefusesPublishes(t *testing.T) {
	disk := smallDisk(t, "64m")
	n := testcluster.StartNode(t, "--data-dir", filepath.Join(disk, "data"), "--min-free-bytes", fmt.Sprint(32<<20))
	ctx := ctxT(t, 60*time.Second)
	c, err := client.Dial(ctx, n.GRPCAddr, client.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "low", client.WithPartitionCount(1)); err != nil {
		t.Fatal(err)
	}
	publish := func() error {
		_, err := c.Publish(ctx, "low", []*client.Message{{Payload: []byte("x")}})
		return err
	}
	if err := publish(); err != nil {
		t.Fatal(err)
	}
	ballast := fill(t, disk, 16<<20)
	var err2 error
	waitFor(t, 5*time.Second, "publishes are refused on a disk below --min-free-bytes", func() bool {
		err2 = publish()
		return err2 != nil
	})
	var e *client.Error
	if !errors.As(err2, &e) || !errors.Is(err2, client.ErrResourceExhausted) || !e.Retriable || !strings.Contains(e.Message, "--min-free-bytes") {
		t.Fatalf("a publish on a disk below --min-free-bytes: %v (want a retriable RESOURCE_EXHAUSTED naming --min-free-bytes)", err2)
	}
	os.Remove(ballast)
	waitFor(t, 5*time.Second, "publishes are taken once space is freed", func() bool { return publish() == nil })
}

// TestGracefulStopWhileOffline: a node stopped while a partition is
// offline on a full disk exits 0, and starts again once space is freed
// with every acknowledged record.
func TestGracefulStopWhileOffline(t *testing.T) {
	disk := smallDisk(t, "48m")
	n := testcluster.StartNode(t, "--data-dir", filepath.Join(disk, "data"), "--min-free-bytes", "0")
	ctx := ctxT(t, 60*time.Second)
	c, err := client.Dial(ctx, n.GRPCAddr, client.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "off", client.WithPartitionCount(1)); err != nil {
		t.Fatal(err)
	}
	acked := 0
	big := strings.Repeat("y", 64<<10)
	for range 5 {
		if _, err := c.Publish(ctx, "off", []*client.Message{{Payload: []byte(big)}}); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	ballast := fill(t, disk, 0)
	var failed bool
	for range 200 { // past the segment's preallocated 4 MiB
		if _, err := c.Publish(ctx, "off", []*client.Message{{Payload: []byte(big)}}); err != nil {
			failed = true
			break
		}
		acked++
	}
	if !failed {
		t.Fatal("publishes on a full disk all succeeded")
	}
	n.Stop()
	if code := n.ExitCode(); code != 0 {
		t.Fatalf("a graceful stop with a partition offline exited with %d", code)
	}
	os.Remove(ballast)
	n.Start()
	gc, _ := dial(t, n)
	if got := len(readAll(t, gc, "off", 0)); got < acked {
		t.Fatalf("%d records after the restart, %d were acknowledged", got, acked)
	}
}
