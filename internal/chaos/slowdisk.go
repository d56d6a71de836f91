package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// blkioRoot is the cgroup v1 block I/O controller's hierarchy, which
// throttles a device's bytes and operations per second for the tasks of a
// group.
const blkioRoot = "/sys/fs/cgroup/blkio"

// slowDisk throttles the writes of one node (a partition's leader or a
// follower) to its file system, for the hold: the node's process goes in a
// block I/O cgroup of its own limited to a few hundred KiB/s and a few
// dozen write operations per second on its loop device. Its fsyncs (which
// write from the node's own threads) crawl; the rest of the cluster is
// left as is.
func (c *campaign) slowDisk(ctx context.Context, hold time.Duration) (string, error) {
	id, n, skip := c.diskNode(ctx)
	if skip != "" {
		return skip, nil
	}
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.write_bps_device")); err != nil {
		return "skipped: no cgroup v1 block I/O controller to throttle the disk with", nil
	}
	var st unix.Stat_t
	if err := unix.Stat(n.disk.mount, &st); err != nil {
		return "", err
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	bps := int64(256<<10) << c.rng.IntN(4) // 256 KiB/s to 2 MiB/s
	iops := 10 + c.rng.IntN(91)
	pid := n.pid()
	if pid == 0 {
		return fmt.Sprintf("skipped: node %d is not running", id), nil
	}
	grp := filepath.Join(blkioRoot, fmt.Sprintf("hermes-chaos-%d-n%d", os.Getpid(), id))
	if err := os.Mkdir(grp, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	defer releaseThrottle(grp, dev)
	for _, w := range [][2]string{
		{"blkio.throttle.write_bps_device", fmt.Sprintf("%s %d", dev, bps)},
		{"blkio.throttle.write_iops_device", fmt.Sprintf("%s %d", dev, iops)},
		{"cgroup.procs", strconv.Itoa(pid)},
	} {
		if err := os.WriteFile(filepath.Join(grp, w[0]), []byte(w[1]), 0); err != nil {
			return "", fmt.Errorf("throttle node %d's disk: %s: %w", id, w[0], err)
		}
	}
	desc := fmt.Sprintf("node %d: writes to its disk (%s) limited to %d KiB/s and %d IOPS", id, dev, bps>>10, iops)
	f := c.h.beginFault("slow-disk", desc)
	sleep(ctx, hold)
	releaseThrottle(grp, dev)
	c.h.endFault(f)
	c.expectRecovered(ctx, n, "after its disk was fast again")
	return desc, nil
}

// releaseThrottle lifts the limits (throttled writes in flight go on at
// once), moves the group's processes back to the root group and removes
// the group. What is gone already is fine.
func releaseThrottle(grp, dev string) {
	if _, err := os.Stat(grp); err != nil {
		return
	}
	for _, f := range []string{"blkio.throttle.write_bps_device", "blkio.throttle.write_iops_device"} {
		_ = os.WriteFile(filepath.Join(grp, f), []byte(dev+" 0"), 0)
	}
	if procs, err := os.ReadFile(filepath.Join(grp, "cgroup.procs")); err == nil {
		for _, p := range strings.Fields(string(procs)) {
			_ = os.WriteFile(filepath.Join(blkioRoot, "cgroup.procs"), []byte(p), 0)
		}
	}
	_ = os.Remove(grp)
}
