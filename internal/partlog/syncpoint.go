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
	l    *Log
	seg  *segment
	pos  int64  // the segment's readable bytes then
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
	return SyncPoint{l: l, seg: seg, pos: seg.readable, next: l.next.Load(), gen: gen}, true, nil
}

// Sync fsyncs the point's segment and releases it. Any goroutine, at most
// once per point; the writer keeps writing meanwhile. After an error the
// bytes' state on disk is unknown: the log fails (every write method,
// Close included, returns the error; an fsync retried after a failure may
// succeed without the lost pages), and must be reopened, whose recovery
// checks what is there.
func (p SyncPoint) Sync() error {
	defer p.seg.release()
	if err := p.seg.f.Sync(); err != nil {
		err = fmt.Errorf("partlog: log %s failed: sync %s: %w", p.l.dir, p.seg.path(logSuffix), err)
		p.l.syncErr.CompareAndSwap(nil, &err)
		return err
	}
	return nil
}

// Release gives up a point without syncing it.
func (p SyncPoint) Release() { p.seg.release() }

// Next is the offset after the last batch the point covers.
func (p SyncPoint) Next() int64 { return p.next }

// SameFile reports whether p and q fsync the same segment file.
func (p SyncPoint) SameFile(q SyncPoint) bool { return p.seg == q.seg }

// MarkSynced records that p was synced: SyncedOffset moves up to the
// point's offset, unless the log was cut (Truncate, Reset) after it was
// taken. Any goroutine.
func (l *Log) MarkSynced(p SyncPoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.gen != l.gen {
		return
	}
	l.raiseSynced(min(p.next, l.next.Load()))
}

// Evict drops from the page cache what lies more than CacheBytes behind
// the end of the log, but nothing past p, which was synced (fadvise does
// not drop dirty pages: the writer would take them for dropped). A Sync
// does it itself. Writer only.
func (l *Log) Evict(p SyncPoint) {
	if l.writable() == nil {
		l.evictUpTo(p.seg, p.pos)
	}
}
