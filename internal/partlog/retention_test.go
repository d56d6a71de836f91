package partlog

import (
	"testing"
	"time"
)

var timeZero = time.Unix(0, 0)

func TestRetentionByAge(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, RetentionAge: time.Hour})
	f.appendMany(100, 20)
	segs := f.l.Segments()
	// tsOf(o) is about 1e6+10*o ns: "now" one hour after record 50's time.
	now := time.Unix(0, tsOf(50)).Add(time.Hour)
	n, err := f.l.EnforceRetention(now)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || f.l.Segments() != segs-n {
		t.Fatalf("deleted %d of %d segments, %d left", n, segs, f.l.Segments())
	}
	start := f.l.StartOffset()
	if start > 51 || f.want[start-1].Timestamp >= tsOf(50) {
		t.Fatalf("start offset %d after deleting segments older than offset 50", start)
	}
	f.check()
	// Far in the future everything is old, but the active segment stays.
	if _, err := f.l.EnforceRetention(now.Add(1000 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if f.l.Segments() != 1 || f.l.NextOffset() != 100 {
		t.Fatalf("%d segments, next %d", f.l.Segments(), f.l.NextOffset())
	}
	f.check()
	f.reopen()
	f.check()
	f.appendMany(5, 5)
	f.check()
}

func TestRetentionBySize(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, RetentionBytes: 3000})
	f.appendMany(200, 20)
	if _, err := f.l.EnforceRetention(timeZero); err != nil {
		t.Fatal(err)
	}
	if f.l.Size() > 3000 || f.l.Size()+1024 <= 3000 {
		t.Fatalf("size %d after retention to 3000 bytes with 1 KiB segments", f.l.Size())
	}
	f.check()

	// A limit below one segment keeps the active segment.
	g := newFixture(t, Options{SegmentBytes: 1024, RetentionBytes: 1})
	g.appendMany(100, 20)
	if _, err := g.l.EnforceRetention(timeZero); err != nil {
		t.Fatal(err)
	}
	if g.l.Segments() != 1 {
		t.Fatalf("%d segments left", g.l.Segments())
	}
	g.check()
}

// SetRetention changes the limits of an open log: none deletes nothing,
// a size limit set later applies at the next enforcement.
func TestSetRetention(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024})
	f.appendMany(200, 20)
	segs := f.l.Segments()
	if n, err := f.l.EnforceRetention(timeZero); err != nil || n != 0 {
		t.Fatalf("no retention deleted %d segments (%v)", n, err)
	}
	f.l.SetRetention(0, 3000)
	if n, err := f.l.EnforceRetention(timeZero); err != nil || n == 0 || f.l.Size() > 3000 {
		t.Fatalf("retention to 3000 bytes set later: deleted %d of %d segments, size %d (%v)", n, segs, f.l.Size(), err)
	}
	f.check()
	f.l.SetRetention(0, 0)
	f.appendMany(200, 20)
	if n, err := f.l.EnforceRetention(timeZero); err != nil || n != 0 {
		t.Fatalf("retention removed, yet %d segments deleted (%v)", n, err)
	}
	f.check()
}

// SetFloor: retention deletes the segments wholly below the floor, never
// the one holding it.
func TestSetFloor(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024})
	f.appendMany(200, 20)
	f.l.SetFloor(100)
	if _, err := f.l.EnforceRetention(timeZero); err != nil {
		t.Fatal(err)
	}
	if start := f.l.StartOffset(); start > 100 || start < 50 {
		t.Fatalf("start offset %d after a floor at 100", start)
	}
	f.l.SetFloor(10) // never back
	before := f.l.StartOffset()
	if _, err := f.l.EnforceRetention(timeZero); err != nil || f.l.StartOffset() != before {
		t.Fatalf("a lower floor moved the start from %d to %d (%v)", before, f.l.StartOffset(), err)
	}
	f.check()
}
