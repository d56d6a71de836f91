package partlog

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Truncate removes every record with an offset >= offset: later segments
// are deleted, the segment holding offset is cut there and its indexes
// shortened, and the result is fsynced. offset must be a batch's base
// offset or NextOffset() (a no-op). Readers racing with Truncate over the
// removed bytes may get ErrOffsetOutOfRange. Writer only.
//
// Errors: ErrClosed; ErrOffsetOutOfRange when offset is outside
// [StartOffset(), NextOffset()]; ErrNotBatchBoundary when offset falls
// inside a batch; the sticky write error; ErrCorrupt-wrapped read errors.
func (l *Log) Truncate(offset int64) error {
	if err := l.writable(); err != nil {
		return err
	}
	start, next := l.segs[0].base, l.next.Load()
	if offset < start || offset > next {
		return fmt.Errorf("%w: truncate to %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, next)
	}
	if offset == next {
		return nil
	}
	if err := l.flush(); err != nil {
		return err
	}
	if l.fill != nil {
		l.fill.release(l.active) // the cut may remove or shorten the segment it prepares
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	seg := l.segs[i]
	pos, kept, err := l.cutPoint(seg, offset)
	if err != nil {
		return err
	}
	removed := l.publishCut(i, pos, offset, kept.entries)
	return l.cutFiles(seg, removed, kept)
}

// cutPoint returns the position of the batch starting at offset in seg
// and the segment's state once cut there.
func (l *Log) cutPoint(seg *segment, offset int64) (int64, scanResult, error) {
	l.mu.RLock()
	v := l.peek(seg)
	l.mu.RUnlock()
	entries := l.withIndex(v).entries
	pos, base := lookupOffset(entries, seg.base, offset)
	pos, h, err := findBatch(seg, pos, seg.readable, base, func(h BatchHeader) bool { return h.NextOffset() > offset })
	if err != nil {
		return 0, scanResult{}, err
	}
	if h.BaseOffset != offset {
		return 0, scanResult{}, fmt.Errorf("%w: offset %d is inside the batch [%d, %d)", ErrNotBatchBoundary, offset, h.BaseOffset, h.NextOffset())
	}
	k := sort.Search(len(entries), func(k int) bool { return int64(entries[k].pos) >= pos })
	kept, err := scanSegment(seg, slices.Clone(entries[:k]), pos, l.opts.IndexIntervalBytes)
	switch {
	case err != nil:
	case kept.stop != nil:
		err = fmt.Errorf("partlog: rescanning %s up to position %d: %w", seg.path(logSuffix), pos, kept.stop)
	case kept.next != offset:
		err = fmt.Errorf("%w: %s up to position %d ends at offset %d, want %d", ErrCorrupt, seg.path(logSuffix), pos, kept.next, offset)
	}
	return pos, kept, err
}

// publishCut shows readers the log cut at offset (position pos of segment
// i, keeping entries) and returns the segments removed after i.
func (l *Log) publishCut(i int, pos, offset int64, entries []indexEntry) []*segment {
	seg := l.segs[i]
	l.mu.Lock()
	removed := l.segs[i+1:]
	l.segs = slices.Clone(l.segs[:i+1])
	seg.readable = pos
	seg.entries, seg.indexOut = entries, false
	// seg is the active segment again: it leaves the sealed ones.
	l.indexIn = slices.DeleteFunc(l.indexIn, func(s *segment) bool { return s == seg })
	l.readEnd = offset
	l.gen++
	l.next.Store(offset)
	l.synced.Store(min(l.synced.Load(), offset))
	l.mu.Unlock()
	return removed
}

// cutFiles makes the cut on disk: removes the files of removed, cuts seg's
// file and rewrites its indexes, making seg the active segment.
func (l *Log) cutFiles(seg *segment, removed []*segment, kept scanResult) error {
	var errs []error
	for _, s := range removed {
		errs = append(errs, s.remove())
		l.size.Add(-s.size)
		s.release()
	}
	l.size.Add(kept.pos - seg.size)
	seg.size, seg.end, seg.pending = kept.pos, kept.next, nil
	seg.maxTS.Store(kept.maxTS)
	seg.evicted.Store(min(seg.evicted.Load(), kept.pos))
	seg.readDropped.Store(min(seg.readDropped.Load(), kept.pos))
	l.active = seg
	if err := seg.f.Truncate(kept.pos); err != nil {
		errs = append(errs, fmt.Errorf("truncate %s: %w", seg.path(logSuffix), err))
	}
	seg.alloc = kept.pos
	// seg is the active segment now: its index lives in memory until it
	// is sealed again; index files it had are rewritten then, and Open
	// does not read the last segment's.
	if err := seg.f.Sync(); err != nil {
		errs = append(errs, fmt.Errorf("sync %s: %w", seg.path(logSuffix), err))
	}
	if len(removed) > 0 {
		errs = append(errs, syncDir(l.dir))
	}
	l.dirty = false
	if err := errors.Join(errs...); err != nil {
		return l.fail(err)
	}
	return nil
}
