package partlog

import (
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// The log keeps only its newest bytes in the operating system's page
// cache (Options.CacheBytes). Once a Sync has made them durable, older
// bytes are dropped from it (posix_fadvise DONTNEED), and a read of bytes
// already dropped drops what it read ("drop-behind"). The cache then
// holds a bounded window per partition whose pages the kernel recycles,
// instead of growing until memory is full.
//
// Why: a write into a page the cache does not hold costs the kernel a new
// page, and on a virtual machine whose host backs guest memory lazily (or
// takes freed pages back) a new page costs a host fault as well. On the
// machine of docs/BENCHMARKS.md, while its host did that, buffered writes
// to new pages ran at 255 MB/s for 3.4 s of CPU per GB; dropping synced
// pages 64 MiB behind the writer gave 713 MB/s for 0.6 s of CPU per GB, as
// fast as O_DIRECT, and a cold sequential read with drop-behind 1.6 GB/s
// for 0.11 s/GB against 410 MB/s for 2.6 s/GB without. When new pages
// were cheap, the window cost nothing measurable
// (BenchmarkSustainedWrites). Live readers do not need the
// page cache: the broker serves them from its own tail cache.

// evictChunk is the least the writer drops from the active segment at a
// time, so that a Sync of a few records is not also a system call.
const evictChunk = 1 << 20

// evictSlack: each drop starts this far before the end of the previous
// one. The kernel keeps a cached folio (up to a few MiB) that is not
// wholly inside the range it is asked to drop, so a range starting
// exactly at the previous end would leave the folio across it behind;
// starting from the segment's start instead would also drop, again and
// again, what the readahead of a reader far behind has just brought in.
const evictSlack = 4 << 20

// evict drops from the page cache what lies more than CacheBytes behind
// the end of the log. Everything readable is durable when it is called
// (after an fsync), and fadvise never drops dirty pages anyway. Writer
// only: it reads segment sizes the writer owns.
func (l *Log) evict() { l.evictUpTo(nil, 0) }

// evictUpTo is evict with everything after position pos of segment seg
// (nil: none) not durable yet: never dropped.
func (l *Log) evictUpTo(seg *segment, pos int64) {
	keep := l.opts.CacheBytes
	if keep < 0 {
		return
	}
	limited := seg != nil
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if keep >= s.readable {
			keep -= s.readable
			if s == seg {
				limited = false
			}
			continue
		}
		to := s.readable - keep
		if limited {
			if s != seg {
				keep = 0 // past the durable segment: look further back
				continue
			}
			limited = false
			to = min(to, pos)
		}
		keep = 0
		from := s.evicted.Load()
		if from >= to {
			return // this one and every older segment are dropped already
		}
		// A segment wholly behind the window is dropped to its end
		// (length 0), folios across its end included.
		switch {
		case s != l.active && to == s.readable:
			dropCache(s.f, max(0, from-evictSlack), 0)
			s.evicted.Store(evictedAll)
		case to-from >= evictChunk:
			lo := max(0, from-evictSlack)
			dropCache(s.f, lo, to-lo)
			s.evicted.Store(to)
		}
	}
}

// evictedAll in segment.evicted: the writer dropped the whole segment,
// which no longer grows.
const evictedAll = math.MaxInt64

// dropBehind is called by a reader that read s up to position end (to the
// segment's end if atEnd): what the writer dropped already is dropped
// again, so a reader of old records leaves no pages behind. Safe for
// concurrent use; the caller holds a reference to s.
func (s *segment) dropBehind(end int64, atEnd bool) {
	ev := s.evicted.Load()
	if atEnd && ev == evictedAll {
		dropCache(s.f, 0, 0)
		return
	}
	end = min(end, ev)
	if last := s.readDropped.Load(); end-last >= evictChunk && s.readDropped.CompareAndSwap(last, end) {
		lo := max(0, last-evictSlack)
		dropCache(s.f, lo, end-lo)
	}
}

// dropCache asks the kernel to drop the file's cached pages in
// [off, off+n). It is advice: an error changes nothing the log relies on,
// so it is ignored.
func dropCache(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
	})
}
