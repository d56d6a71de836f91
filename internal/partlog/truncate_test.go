package partlog

import (
	"errors"
	"testing"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		to   func(f *fixture) int64 // the offset to truncate to
	}{
		{"nothing", func(f *fixture) int64 { return f.l.NextOffset() }},
		{"last batch", func(f *fixture) int64 { return f.l.NextOffset() - 4 }},
		{"into an older segment", func(f *fixture) int64 { return 60 }},
		{"at a segment base", func(f *fixture) int64 { return f.segmentBase(3) }},
		{"everything", func(f *fixture) int64 { return 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{SegmentBytes: 1024, IndexIntervalBytes: 150})
			f.appendMany(200, 20) // batches of 1,2,3,4 records: 60 and 200-4 are boundaries
			to := tt.to(f)
			if err := f.l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			f.want = f.want[:to]
			if f.l.NextOffset() != to || f.l.SyncedOffset() > to {
				t.Fatalf("next %d synced %d after truncating to %d", f.l.NextOffset(), f.l.SyncedOffset(), to)
			}
			f.check()
			if ts := tsOf(to); to < 200 {
				if got, _ := f.l.OffsetForTime(ts); got != to {
					t.Fatalf("OffsetForTime after truncation: %d, want %d", got, to)
				}
			}
			f.appendMany(30, 20)
			f.check()
			f.reopen()
			f.check()
		})
	}
}

// segmentBase returns the base offset of segment i.
func (f *fixture) segmentBase(i int) int64 {
	f.l.mu.RLock()
	defer f.l.mu.RUnlock()
	return f.l.segs[i].base
}

func TestTruncateErrors(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, RetentionBytes: 2000})
	f.appendMany(100, 20)
	if _, err := f.l.EnforceRetention(timeZero); err != nil {
		t.Fatal(err)
	}
	start := f.l.StartOffset()
	if err := f.l.Truncate(start - 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("truncate below the start: %v", err)
	}
	if err := f.l.Truncate(f.l.NextOffset() - 1); !errors.Is(err, ErrNotBatchBoundary) {
		t.Fatalf("truncate inside the last batch: %v", err)
	}
	f.check()
}
