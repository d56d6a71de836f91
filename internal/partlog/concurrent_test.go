package partlog

import (
	"errors"
	"fmt"
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
		h, err := ValidateBatch(b)
		if err != nil {
			return err
		}
		err = ForEachRecord(b, func(r Record) bool {
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
