package partlog

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentBytes returns how many bytes of the file's pages in [off, off+n)
// are in the page cache, from mincore over a mapping of the file.
func residentBytes(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	off, n = off/page*page, (n+off%page+page-1)/page*page
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, n/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	var in int64
	for _, v := range vec {
		if v&1 != 0 {
			in += page
		}
	}
	return in
}

// fill appends about total bytes in 64 KiB batches and syncs after each.
func (f *fixture) fill(total int) {
	f.t.Helper()
	for n := 0; n < total; n += 64 << 10 {
		f.appendBatch(16, 4<<10)
		if err := f.l.Sync(); err != nil {
			f.t.Fatal(err)
		}
	}
}

func TestPageCacheWindow(t *testing.T) {
	const window = 2 << 20
	f := newFixture(t, Options{CacheBytes: window, SegmentBytes: 6 << 20})
	f.fill(16 << 20)
	segs := f.l.segs
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	active := segs[len(segs)-1]
	for _, s := range segs[:len(segs)-2] { // wholly behind the window
		if in := residentBytes(t, s.path(logSuffix), 0, s.readable); in > 0 {
			t.Errorf("segment %d: %d of %d bytes still cached, want none", s.base, in, s.readable)
		}
	}
	if in := residentBytes(t, active.path(logSuffix), max(0, active.readable-window/2), min(active.readable, window/2)); in < window/4 {
		t.Errorf("active segment: %d bytes of its newest %d cached, want most of them", in, window/2)
	}

	// Reading old records back leaves none of them cached, and returns them.
	f.check()
	old := segs[0]
	if in := residentBytes(t, old.path(logSuffix), 0, old.readable); in > old.readable/8 {
		t.Errorf("after a read of segment %d: %d of %d bytes cached (readahead at most)", old.base, in, old.readable)
	}

	// Records survive a reopen untouched.
	f.reopen()
	f.check()
}

func TestPageCacheWindowOff(t *testing.T) {
	f := newFixture(t, Options{CacheBytes: -1, SegmentBytes: 6 << 20})
	f.fill(8 << 20)
	s := f.l.segs[0]
	if in := residentBytes(t, s.path(logSuffix), 0, s.readable); in < s.readable/2 {
		t.Errorf("CacheBytes -1: %d of %d bytes cached, want the kernel's default (all of them)", in, s.readable)
	}
}

func TestPageCacheWindowAfterTruncate(t *testing.T) {
	f := newFixture(t, Options{CacheBytes: 1 << 20})
	f.fill(6 << 20)
	cut := int64(len(f.want) / 2)
	cut -= cut % 16 // a batch boundary: every batch holds 16 records
	if err := f.l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	f.want = f.want[:cut]
	if ev, r := f.l.active.evicted.Load(), f.l.active.readable; ev > r {
		t.Fatalf("evicted %d past the readable %d after Truncate", ev, r)
	}
	f.fill(1 << 20)
	f.check()
}
