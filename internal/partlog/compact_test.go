package partlog

import (
	"errors"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

func TestDeleteBefore(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024})
	f.appendMany(200, 20)
	segs := f.l.Segments()
	n, err := f.l.DeleteBefore(100)
	if err != nil {
		t.Fatal(err)
	}
	start := f.l.StartOffset()
	if n == 0 || f.l.Segments() != segs-n || start > 100 {
		t.Fatalf("deleted %d of %d segments, start %d: want whole segments below offset 100 gone", n, segs, start)
	}
	if _, err := f.l.Read(start-1, 1000, f.l.NextOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	f.check()
	if n, _ := f.l.DeleteBefore(start); n != 0 {
		t.Fatalf("a second DeleteBefore(%d) deleted %d segments", start, n)
	}
	// Past the end: everything but the active segment goes.
	if _, err := f.l.DeleteBefore(1 << 40); err != nil || f.l.Segments() != 1 {
		t.Fatalf("%d segments left, %v", f.l.Segments(), err)
	}
	f.check()
	f.reopen()
	f.check()
}

func TestReset(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024})
	f.appendMany(100, 20)
	f.appendBatch(3, 20) // unsynced: dropped by the reset
	if err := f.l.Reset(5000); err != nil {
		t.Fatal(err)
	}
	if f.l.StartOffset() != 5000 || f.l.NextOffset() != 5000 || f.l.Segments() != 1 || f.l.Size() != 0 {
		t.Fatalf("after Reset(5000): start %d, next %d, %d segments, %d bytes", f.l.StartOffset(), f.l.NextOffset(), f.l.Segments(), f.l.Size())
	}
	if _, err := f.l.Read(10, 1000, f.l.NextOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of an old offset: %v", err)
	}
	recs := testRecords(4, 10, 1)
	base, err := f.l.Append(record.AppendBatch(nil, 0, recs))
	if err != nil || base != 5000 {
		t.Fatalf("append after reset: base %d, %v", base, err)
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if f.l.StartOffset() != 5000 || f.l.NextOffset() != 5004 {
		t.Fatalf("reopened: start %d, next %d, want [5000, 5004)", f.l.StartOffset(), f.l.NextOffset())
	}
	got := readAll(t, f.l, 5000, 1000)
	if len(got) != 4 || got[0].Offset != 5000 || !recordsEqual(got[3], Record{Offset: 5003, MessageID: recs[3].MessageID, Timestamp: recs[3].Timestamp, Key: recs[3].Key, Headers: recs[3].Headers, Payload: recs[3].Payload}) {
		t.Fatalf("read after reopen: %+v", got)
	}
	// Reset to an offset a segment already starts at.
	if err := f.l.Reset(5000); err != nil || f.l.NextOffset() != 5000 {
		t.Fatalf("reset to the current start: next %d, %v", f.l.NextOffset(), err)
	}
}
