package partlog

import "fmt"

// A SyncPoint is the fsync that makes durable what the writer had
// appended when it took it (Flush): the writer goes on appending while
// another goroutine runs the fsync (SyncPoint.Sync), then records it
// (MarkSynced). This is how a Raft group keeps stepping messages and
// proposals while its log is fsynced (asynchronous storage writes).
//
// A SyncPoint holds a reference to its segment: a segment that Truncate,
// Reset or retention removes meanwhile stays open until the point is
// synced or released.
type SyncPoint struct {
	seg  *segment
	next int64  // the log's NextOffset when the point was taken
	gen  uint64 // the log's cut generation then (see Log.gen)
}

// Flush writes every appended batch to the active segment (readers see
// it) and returns the SyncPoint that makes it durable; ok is false when
// everything written is durable already (nothing to fsync). The caller
// must Sync or Release a returned point exactly once. Writer only.
//
// Errors: ErrClosed; the sticky write error.
func (l *Log) Flush() (p SyncPoint, ok bool, err error) {
	if err := l.writable(); err != nil {
		return SyncPoint{}, false, err
	}
	if err := l.flush(); err != nil {
		return SyncPoint{}, false, err
	}
	if !l.dirty {
		return SyncPoint{}, false, nil
	}
	l.dirty = false // Sync checks synced against next too
	seg := l.active
	seg.acquire()
	l.mu.RLock()
	gen := l.gen
	l.mu.RUnlock()
	return SyncPoint{seg: seg, next: l.next.Load(), gen: gen}, true, nil
}

// Sync fsyncs the point's segment and releases it. Any goroutine, at most
// once per point; the writer keeps writing meanwhile. After an error the
// bytes' state on disk is unknown: the log must be closed and reopened
// (its recovery checks what is there).
func (p SyncPoint) Sync() error {
	defer p.seg.release()
	if err := p.seg.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", p.seg.path(logSuffix), err)
	}
	return nil
}

// Release gives up a point without syncing it.
func (p SyncPoint) Release() { p.seg.release() }

// Next is the offset after the last batch the point covers.
func (p SyncPoint) Next() int64 { return p.next }

// Segment is the base offset of the point's segment.
func (p SyncPoint) Segment() int64 { return p.seg.base }

// MarkSynced records that p was synced: SyncedOffset moves up to the
// point's offset, unless the log was cut (Truncate, Reset) after it was
// taken. Any goroutine.
func (l *Log) MarkSynced(p SyncPoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.gen != l.gen {
		return
	}
	if n := min(p.next, l.next.Load()); n > l.synced.Load() {
		l.synced.Store(n)
	}
}

// Evict drops from the page cache what lies more than CacheBytes behind
// the durable end of the log (a Sync does it itself). Writer only, after
// MarkSynced.
func (l *Log) Evict() {
	if l.writable() == nil {
		l.evict()
	}
}
