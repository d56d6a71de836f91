package partlog

import (
	"errors"
	"slices"
	"time"
)

// EnforceRetention deletes the oldest whole segments that retention
// allows to go: while the oldest one's newest record is older than
// now-RetentionAge, or the log is larger than RetentionBytes. It never
// deletes the active (last) segment, so a log keeps its newest records
// whatever the limits. Readers holding a deleted segment finish their
// read. Returns the number of segments deleted. Writer only.
//
// Errors: ErrClosed; the sticky write error; errors removing files (the
// segments are gone from the log all the same).
func (l *Log) EnforceRetention(now time.Time) (deletedSegments int, err error) {
	if err := l.writable(); err != nil {
		return 0, err
	}
	return l.deleteOldest(l.expired(now))
}

// deleteOldest deletes the n oldest segments (never the active one).
// Readers holding one finish their read. Writer only.
func (l *Log) deleteOldest(n int) (int, error) {
	if n == 0 {
		return 0, nil
	}
	l.mu.Lock()
	dead := l.segs[:n]
	l.segs = slices.Clone(l.segs[n:])
	l.mu.Unlock()
	var errs []error
	for _, s := range dead {
		errs = append(errs, s.remove())
		l.size.Add(-s.size)
		s.release()
	}
	errs = append(errs, syncDir(l.dir))
	return n, errors.Join(errs...)
}

// RetentionBoundary returns the offset retention would keep the log from
// now: the base of the oldest segment it would not delete (StartOffset
// when it deletes none). A replicated log compacts its Raft log up to
// there instead of deleting segments under it. Writer only.
func (l *Log) RetentionBoundary(now time.Time) int64 {
	if l.writable() != nil {
		return l.segs[0].base
	}
	return l.segs[l.expired(now)].base
}

// expired returns how many segments, from the oldest, retention deletes.
func (l *Log) expired(now time.Time) int {
	age, limit := time.Duration(l.retentionAge.Load()), l.retentionBytes.Load()
	cutoff := now.Add(-age).UnixNano()
	total := l.size.Load()
	n := 0
	for ; n < len(l.segs)-1; n++ {
		s := l.segs[n]
		byAge := age > 0 && s.maxTS.Load() < cutoff
		bySize := limit > 0 && total > limit
		byFloor := l.segs[n+1].base <= l.floor.Load()
		if !byAge && !bySize && !byFloor {
			break
		}
		total -= s.size
	}
	return n
}

// SetRetention changes the retention limits (as Options.RetentionAge and
// RetentionBytes; 0: none); the next EnforceRetention applies them. Safe
// for concurrent use.
func (l *Log) SetRetention(age time.Duration, bytes int64) {
	l.retentionAge.Store(int64(max(age, 0)))
	l.retentionBytes.Store(max(bytes, 0))
}

// SetFloor records that the records below offset are deleted (Kafka's
// DeleteRecords): the next EnforceRetention deletes the segments wholly
// below it. Reads below it are the caller's to refuse. Safe for
// concurrent use; the floor never moves back.
func (l *Log) SetFloor(offset int64) {
	for {
		cur := l.floor.Load()
		if offset <= cur || l.floor.CompareAndSwap(cur, offset) {
			return
		}
	}
}
