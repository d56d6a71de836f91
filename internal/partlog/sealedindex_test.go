package partlog

import (
	"os"
	"testing"
)

// inMemory counts the sealed segments whose index entries are in memory,
// and those whose entries are only in their files.
func inMemory(l *Log) (in, out int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.indexOut {
			out++
		} else {
			in++
		}
	}
	return in, out
}

// Sealed segments keep their index entries in memory only while they are
// among the last few loaded: a long log's index costs a bounded amount of
// memory, and lookups in any segment still find every record, through its
// index files or, when those are gone, by a scan of its headers.
func TestSealedIndexesLeaveMemory(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, IndexIntervalBytes: 100})
	f.appendMany(400, 20)
	bounded := func(when string) {
		t.Helper()
		if in, out := inMemory(f.l); in > keepSealedIndexes || out == 0 {
			t.Fatalf("%s: %d sealed indexes in memory, %d in files only; want at most %d in memory", when, in, out, keepSealedIndexes)
		}
	}
	bounded("written")
	// Every offset, through the index (loaded again) of its segment.
	for o := int64(0); o < f.l.NextOffset(); o++ {
		base, next, err := f.l.BatchAt(o)
		if err != nil || base > o || next <= o {
			t.Fatalf("BatchAt(%d) = [%d, %d), %v", o, base, next, err)
		}
		if got := readAll(t, f.l, o, 0); len(got) == 0 || got[0].Offset != o {
			t.Fatalf("read from %d starts at %v", o, got)
		}
	}
	f.l.mu.RLock()
	first := f.l.segs[0]
	f.l.mu.RUnlock()
	if _, _, err := f.l.BatchAt(first.base); err != nil {
		t.Fatal(err)
	}
	f.l.mu.RLock()
	loaded := !first.indexOut && len(first.entries) > 0
	f.l.mu.RUnlock()
	if !loaded {
		t.Fatal("a lookup in the first segment did not load its index")
	}
	bounded("read")
	for _, ts := range []int64{0, tsOf(3), tsOf(150), tsOf(399), tsOf(399) + 1} {
		want := int64(len(f.want))
		for _, r := range f.want {
			if r.Timestamp >= ts {
				want = r.Offset
				break
			}
		}
		if got, err := f.l.OffsetForTime(ts); err != nil || got != want {
			t.Fatalf("OffsetForTime(%d) = %d, %v; want %d", ts, got, err, want)
		}
	}
	bounded("searched by time")
	f.check()

	// Index files gone: lookups scan the segment instead.
	f.reopen()
	f.l.mu.RLock()
	second := f.l.segs[1]
	f.l.mu.RUnlock()
	if err := os.Remove(second.path(indexSuffix)); err != nil {
		t.Fatal(err)
	}
	for o := second.base; o < second.base+5; o++ {
		if got := readAll(t, f.l, o, 0); len(got) == 0 || got[0].Offset != o {
			t.Fatalf("without its index: read from %d starts at %v", o, got)
		}
	}

	// A cut inside an early segment whose entries are not in memory.
	f.l.mu.RLock()
	third := f.l.segs[2]
	f.l.mu.RUnlock()
	to, _, err := f.l.BatchAt(third.base + 3)
	if err != nil {
		t.Fatal(err)
	}
	f.reopen()
	f.l.mu.RLock()
	third = f.l.segs[2]
	out := third.indexOut
	f.l.mu.RUnlock()
	if !out {
		t.Fatal("the third segment's index is in memory after a reopen")
	}
	if err := f.l.Truncate(to); err != nil {
		t.Fatal(err)
	}
	f.want = f.want[:to]
	f.check()
	f.appendMany(200, 20)
	f.check()
	bounded("cut and written again")
	f.reopen()
	f.check()
	bounded("reopened")
}

// An index read for a view taken before a cut is used neither by the view
// nor by the log: the cut may have rewritten the files it read.
func TestSealedIndexReadAcrossACutIsDropped(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, IndexIntervalBytes: 100})
	f.appendMany(400, 20)
	f.reopen()
	f.l.mu.RLock()
	seg := f.l.segs[1]
	v := f.l.view(seg)
	last := f.l.segs[len(f.l.segs)-1]
	f.l.mu.RUnlock()
	defer seg.release()
	if !v.indexOut {
		t.Fatal("the second segment's index is in memory after a reopen")
	}
	to, _, err := f.l.BatchAt(last.base + 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.l.Truncate(to); err != nil {
		t.Fatal(err)
	}
	f.want = f.want[:to]
	if got := f.l.withIndex(v); !got.indexOut || got.entries != nil {
		t.Fatalf("a view from before the cut got %d entries", len(got.entries))
	}
	f.l.mu.RLock()
	out := seg.indexOut
	f.l.mu.RUnlock()
	if !out {
		t.Fatal("an index read for a view from before the cut was kept")
	}
	// A view taken now loads and keeps it.
	f.l.mu.RLock()
	v = f.l.view(seg)
	f.l.mu.RUnlock()
	defer seg.release()
	if got := f.l.withIndex(v); got.indexOut || len(got.entries) == 0 {
		t.Fatal("a fresh view did not load the index")
	}
	f.check()
}
