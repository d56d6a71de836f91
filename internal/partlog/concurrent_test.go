package partlog

import (
	"errors"
	"fmt"
	"github.com/hermes-mq/hermes/pkg/record"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReaders runs readers against one writer that appends,
// syncs, rolls segments, enforces retention and finally truncates. Every
// record a reader gets must be the one the writer put at its offset. Run
// it with -race.
func TestConcurrentReaders(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 2048, IndexIntervalBytes: 256, RetentionBytes: 8192, WriteBufferBytes: 4096})
	const batches, readers = 1500, 4
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	var reads atomic.Int64
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for !done.Load() {
				if err := readOnce(f.l, rng); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}(uint64(r))
	}
	for i := 0; i < batches; i++ {
		base := f.appendBatch(1+i%5, 20)
		if i%3 == 0 {
			if err := f.l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if i%50 == 0 {
			if _, err := f.l.EnforceRetention(timeZero); err != nil {
				t.Fatal(err)
			}
		}
		if i == batches-100 {
			if err := f.l.Truncate(base); err != nil {
				t.Fatal(err)
			}
			f.want = f.want[:f.l.NextOffset()]
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no reads ran")
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	f.check()
}

// readOnce reads from a random readable offset and checks what it got.
func readOnce(l *Log, rng *rand.Rand) error {
	start, end := l.StartOffset(), l.SyncedOffset()
	if end <= start {
		return nil
	}
	off := start + rng.Int64N(end-start)
	if rng.IntN(4) == 0 {
		if _, err := l.OffsetForTime(tsOf(off)); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
			return err
		}
	}
	b, err := l.Read(off, 512, end)
	if errors.Is(err, ErrOffsetOutOfRange) {
		return nil // retention or truncation got there first
	}
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("Read(%d) below the synced offset %d returned nothing", off, end)
	}
	for len(b) > 0 {
		h, err := record.ValidateBatch(b)
		if err != nil {
			return err
		}
		err = record.ForEachRecord(b, func(r Record) bool {
			if string(r.Payload) != fmt.Sprintf("%020d", r.Offset) {
				err = fmt.Errorf("record %d holds %q", r.Offset, r.Payload)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
		b = b[h.Size():]
	}
	return nil
}

// TestReaderKeepsDeletedSegment holds a reader's view of the oldest
// segment while retention deletes it: the read still works, and the file
// is closed when the reader lets go.
func TestReaderKeepsDeletedSegment(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, RetentionBytes: 1})
	f.appendMany(100, 20)
	f.l.mu.RLock()
	v := f.l.view(f.l.segs[0])
	f.l.mu.RUnlock()
	if n, err := f.l.EnforceRetention(timeZero); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	pos, h, err := findBatch(v.seg, 0, v.readable, v.seg.base, func(BatchHeader) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.collect(nil, pos, h, 1<<20, f.l.NextOffset())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := record.DecodeRecords(nil, b)
	if err != nil || recs[0].Offset != 0 || string(recs[0].Payload) != string(f.want[0].Payload) {
		t.Fatalf("read from the deleted segment: %v, %v", recs, err)
	}
	v.seg.release()
	if _, err := v.seg.f.Stat(); err == nil {
		t.Fatal("the deleted segment's file is still open after the last reference went")
	}
}

// TestCrashLosesOnlyUnsynced abandons a log without Close (as a crash
// would): what Sync acknowledged survives, the unwritten buffer does not.
func TestCrashLosesOnlyUnsynced(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 2048})
	f.appendMany(50, 20)
	f.appendBatch(3, 20) // buffered, never written
	crashed := f.l
	f.want = f.want[:50]
	f.l = nil
	f.reopen()
	f.check()
	f.appendMany(10, 20)
	f.check()
	_ = crashed // never closed: its buffer must not reach the files
}
