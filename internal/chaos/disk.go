package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// disk is a node's data directory on a file system of its own (ext4 in a
// sparse image file, loop-mounted), so that it can be filled up without
// filling the host's. The image stays after the run (mount it to look).
type disk struct {
	image, mount string
	mounted      bool
}

func newDisk(image, mount string, size int64) (*disk, error) {
	d := &disk{image: image, mount: mount}
	if err := os.MkdirAll(mount, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(image)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := run("mkfs.ext4", "-q", "-F", "-m", "0", image); err != nil {
		return nil, err
	}
	if err := run("mount", "-o", "loop", image, mount); err != nil {
		return nil, err
	}
	d.mounted = true
	return d, nil
}

// ballast is the file that fills the disk.
func (d *disk) ballast() string { return filepath.Join(d.mount, "chaos-ballast") }

// fill takes every free block but keep bytes.
func (d *disk) fill(keep int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(d.mount, &st); err != nil {
		return err
	}
	free := int64(st.Bavail)*st.Bsize - keep
	if free <= 0 {
		return nil
	}
	f, err := os.OpenFile(d.ballast(), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	// Fallocate in steps: the last one may not fit exactly.
	var at int64
	for step := int64(64 << 20); step >= 4096; step /= 2 {
		for at+step <= free {
			if err := unix.Fallocate(int(f.Fd()), 0, at, step); err != nil {
				break
			}
			at += step
		}
	}
	return f.Sync()
}

// free removes the ballast.
func (d *disk) free() error {
	err := os.Remove(d.ballast())
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

func (d *disk) remove() {
	if d.mounted {
		if run("umount", d.mount) != nil {
			_ = run("umount", "-l", d.mount)
		}
		d.mounted = false
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
