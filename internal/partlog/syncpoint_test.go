package partlog

import (
	"errors"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// A SyncPoint taken by the writer is synced on another goroutine while
// the writer goes on appending: SyncedOffset moves to the point, not past
// it; a cut after the point keeps it from claiming anything; a Sync of
// the writer meanwhile still fsyncs what the point covers; a point whose
// segment was truncated still syncs (it holds the file).
func TestSyncPointOffTheWriter(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1 << 20, IndexIntervalBytes: 150})
	f.appendMany(20, 20) // synced
	if _, ok, err := f.l.Flush(); err != nil || ok {
		t.Fatalf("Flush with nothing new: ok %v, err %v", ok, err)
	}

	f.appendBatch(3, 20)
	p, ok, err := f.l.Flush()
	if err != nil || !ok {
		t.Fatalf("Flush: ok %v, err %v", ok, err)
	}
	if p.Next() != 23 || f.l.SyncedOffset() != 20 {
		t.Fatalf("point at %d, synced %d: want 23, 20", p.Next(), f.l.SyncedOffset())
	}
	if got := readAll(t, f.l, 20, 1<<20); len(got) != 3 {
		t.Fatalf("flushed records readable: %d, want 3", len(got))
	}
	done := make(chan error)
	go func() { done <- p.Sync() }()
	f.appendBatch(2, 20) // the writer goes on meanwhile
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.l.MarkSynced(p)
	if s := f.l.SyncedOffset(); s != 23 {
		t.Fatalf("synced %d after the point at 23 (next %d)", s, f.l.NextOffset())
	}
	f.l.Evict(p)

	// A point not synced yet: the writer's own Sync covers it.
	f.appendBatch(1, 20)
	p, ok, err = f.l.Flush()
	if err != nil || !ok {
		t.Fatalf("Flush: ok %v, err %v", ok, err)
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.l.SyncedOffset() != f.l.NextOffset() {
		t.Fatalf("Sync left synced at %d, next %d", f.l.SyncedOffset(), f.l.NextOffset())
	}
	if err := p.Sync(); err != nil { // late: harmless
		t.Fatal(err)
	}
	f.l.MarkSynced(p)

	// A cut after the point: the point no longer moves SyncedOffset, and
	// its file still syncs.
	before := f.l.NextOffset()
	f.appendMany(200, 20)
	f.appendBatch(4, 20)
	p, ok, err = f.l.Flush()
	if err != nil || !ok {
		t.Fatalf("Flush: ok %v, err %v", ok, err)
	}
	if err := f.l.Truncate(before); err != nil {
		t.Fatal(err)
	}
	f.want = f.want[:before]
	for range 60 { // past the point again, not synced
		f.appendBatch(4, 20)
	}
	if err := p.Sync(); err != nil {
		t.Fatalf("syncing a point whose segment was cut: %v", err)
	}
	f.l.MarkSynced(p)
	if s := f.l.SyncedOffset(); s > before {
		t.Fatalf("synced %d past the cut at %d (next %d, the point at %d)", s, before, f.l.NextOffset(), p.Next())
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	f.check()
	f.appendMany(10, 20)
	f.reopen()
	f.check()
}

// A SyncPoint whose fsync fails fails the log: the writer's next call
// and Close return the error instead of trusting a later fsync.
func TestSyncPointFailureFailsTheLog(t *testing.T) {
	f := newFixture(t, Options{})
	f.appendBatch(2, 20)
	p, ok, err := f.l.Flush()
	if err != nil || !ok {
		t.Fatalf("Flush: ok %v, err %v", ok, err)
	}
	// A file that can no longer be synced: a descriptor closed under it.
	if err := p.seg.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err == nil {
		t.Fatal("Sync of a closed file succeeded")
	}
	if _, err := f.l.Append(record.AppendBatch(nil, 0, testRecords(1, 10, 0))); err == nil {
		t.Fatal("Append after a failed fsync succeeded")
	}
	if err := f.l.Close(); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("Close after a failed fsync: %v, want the fsync's error", err)
	}
	f.l = nil
}
