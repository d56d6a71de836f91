package partlog

import (
	"errors"
	"fmt"
)

// DeleteBefore deletes the oldest whole segments whose records all have
// offsets below offset (a Raft group compacted up to there no longer
// needs them). It never deletes the active segment. Readers holding a
// deleted segment finish their read. Returns the number of segments
// deleted. Writer only.
//
// Errors: ErrClosed; the sticky write error; errors removing files (the
// segments are gone from the log all the same).
func (l *Log) DeleteBefore(offset int64) (deletedSegments int, err error) {
	if err := l.writable(); err != nil {
		return 0, err
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= offset {
		n++
	}
	return l.deleteOldest(n)
}

// Reset empties the log and starts it again at base: every segment is
// deleted, unwritten batches are dropped, and the next record appended
// gets offset base. A follower installing a snapshot of its Raft group
// does this: its old records are replaced by the snapshot's. Readers get
// ErrOffsetOutOfRange for the old offsets. Writer only.
//
// Errors: ErrClosed; the sticky write error; I/O errors (the log is then
// failed: reopen it).
func (l *Log) Reset(base int64) error {
	if err := l.writable(); err != nil {
		return err
	}
	if base < 0 {
		return fmt.Errorf("%w: reset to offset %d", ErrOffsetOutOfRange, base)
	}
	l.buf = l.buf[:0]
	l.iov, l.iovBytes = nil, 0
	if l.fill != nil {
		l.fill.release(l.active) // its segments are about to go
	}
	var errs []error
	errs = append(errs, l.active.closeIndexFiles())
	// The lock is held across the file work: a reader must never see the
	// log without segments. Resets are rare (a snapshot install).
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		errs = append(errs, s.remove())
		s.release()
	}
	l.segs = nil
	if err := errors.Join(errs...); err != nil {
		return l.fail(err)
	}
	seg, err := createSegment(l.dir, base)
	if err != nil {
		return l.fail(err)
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	l.segs = []*segment{seg}
	l.active = seg
	l.readEnd = base
	l.gen++
	l.next.Store(base)
	l.synced.Store(base)
	l.size.Store(0)
	l.dirty = false
	return nil
}
