package partlog

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/hermes-mq/hermes/pkg/record"
)

// segView is what a reader needs of a segment, taken under Log.mu with a
// reference held: the reader then does its I/O without the lock and
// releases the reference after.
type segView struct {
	seg      *segment
	readable int64
	entries  []indexEntry
	indexOut bool   // entries are not in memory (see Log.withIndex)
	gen      uint64 // the log's cuts when the view was taken (Log.gen)
}

// Read returns whole raw batches starting with the batch that contains
// offset: the first batch may hold records below offset, which callers
// skip. It adds following batches of the same segment while their total
// stays within maxBytes, but always returns the first batch even if it is
// larger; it stops before any batch whose base offset is >= limit (the
// broker's high watermark; a batch that starts below limit is whole, so
// limit should be a batch boundary). It never returns bytes not yet
// written to a file (see Sync). The batches are checked by ParseBatch.
//
// It returns (nil, nil) when offset >= limit or nothing readable is at
// offset. The slice is a fresh allocation owned by the caller. A read
// reaches at most the end of one segment: call again at the next offset.
//
// Safe for concurrent use. Errors: ErrClosed; ErrOffsetOutOfRange, with
// the valid range, when offset < StartOffset() or offset > NextOffset();
// ErrCorrupt-wrapped naming file and position when a batch read is bad.
func (l *Log) Read(offset int64, maxBytes int, limit int64) ([]byte, error) {
	b, err := l.ReadAppend(nil, offset, maxBytes, limit)
	return b[:len(b):len(b)], err
}

// ReadAppend is Read appending the batches to dst instead of a fresh
// slice: a caller that knows how many bytes it reads can read them once,
// into a buffer of the right size. It returns dst unchanged when Read
// would return nil.
func (l *Log) ReadAppend(dst []byte, offset int64, maxBytes int, limit int64) ([]byte, error) {
	v, err := l.viewAt(offset, limit)
	if err != nil || v.seg == nil {
		return dst, err
	}
	defer v.seg.release()
	pos, base := lookupOffset(v.entries, v.seg.base, offset)
	pos, h, err := findBatch(v.seg, pos, v.readable, base, func(h BatchHeader) bool { return h.NextOffset() > offset })
	if errors.Is(err, errNotFound) {
		err = fmt.Errorf("%w: %s has no batch holding offset %d", ErrCorrupt, v.seg.path(logSuffix), offset)
	}
	if err != nil {
		return dst, err
	}
	return v.collect(dst, pos, h, maxBytes, limit)
}

// viewAt checks offset and returns a view of the segment holding it, or a
// zero view if nothing is readable at offset below limit.
func (l *Log) viewAt(offset, limit int64) (segView, error) {
	v, err := l.findView(offset, limit)
	if err != nil || v.seg == nil {
		return v, err
	}
	return l.withIndex(v), nil
}

// findView is viewAt without loading the segment's index (withIndex),
// which must not happen under mu.
func (l *Log) findView(offset, limit int64) (segView, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.segs == nil {
		return segView{}, ErrClosed
	}
	if start, next := l.segs[0].base, l.next.Load(); offset < start || offset > next {
		return segView{}, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, next)
	}
	if offset >= min(limit, l.readEnd) {
		return segView{}, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	return l.view(l.segs[i]), nil
}

// view takes a reference to seg. Lock should be held (for reading).
func (l *Log) view(seg *segment) segView {
	seg.acquire()
	return l.peek(seg)
}

// peek is view without the reference (the writer's own segments: the
// writer is the one that would remove them). Lock: mu held.
func (l *Log) peek(seg *segment) segView {
	return segView{seg: seg, readable: seg.readable, entries: seg.entries, indexOut: seg.indexOut, gen: l.gen}
}

// collect reads the batch at pos (header h) and those after it that fit
// maxBytes and start below limit, with one read.
func (v segView) collect(dst []byte, pos int64, h BatchHeader, maxBytes int, limit int64) ([]byte, error) {
	n := int(min(v.readable-pos, max(int64(maxBytes), int64(h.Size())), max(v.endBefore(limit)-pos, int64(h.Size()))))
	out := slices.Grow(dst, n)
	buf := out[len(dst) : len(dst)+n]
	if err := v.seg.readAt(buf, pos); err != nil {
		return dst, err
	}
	v.seg.dropBehind(pos+int64(n), pos+int64(n) == v.readable)
	end, next := 0, h.BaseOffset
	for end < len(buf) {
		bh, err := record.ParseBatch(buf[end:])
		if end > 0 && (errors.Is(err, ErrShortBatch) || err == nil && bh.BaseOffset >= limit) {
			break // the batch does not fit maxBytes, or is at or past limit
		}
		if err == nil && bh.BaseOffset != next {
			err = fmt.Errorf("%w: base offset %d, want %d", ErrCorrupt, bh.BaseOffset, next)
		}
		if err != nil && end > 0 {
			break // the good batches first: the next read, at this one, reports it
		}
		if err != nil {
			return dst, v.corrupt(buf[end:], pos+int64(end), next, err)
		}
		end += bh.Size()
		next = bh.NextOffset()
	}
	return out[:len(dst)+end], nil
}

// endBefore returns a file position at or after the end of the last batch
// that starts below offset limit: the first indexed batch at or past
// limit, or the readable end. A reader asked for few records then reads
// about what it returns (to the index's granularity), not maxBytes.
func (v segView) endBefore(limit int64) int64 {
	i := sort.Search(len(v.entries), func(i int) bool { return v.seg.base+int64(v.entries[i].rel) >= limit })
	if i == len(v.entries) {
		return v.readable
	}
	return min(int64(v.entries[i].pos), v.readable)
}

// corrupt describes the bad batch b at pos, which was to start at
// offset from: the file, the position and the offsets it spans (from its
// header if that is whole and in place, else up to the next indexed
// batch, or open-ended).
func (v segView) corrupt(b []byte, pos, from int64, err error) error {
	to := "…"
	if h, herr := parseHeader(b); herr == nil && h.BaseOffset == from && h.RecordCount > 0 {
		to = fmt.Sprint(h.NextOffset())
	} else {
		for _, e := range v.entries {
			if int64(e.pos) > pos {
				to = fmt.Sprint(v.seg.base + int64(e.rel))
				break
			}
		}
	}
	return fmt.Errorf("%w: offsets [%d, %s) of %s: the batch at position %d: %w", ErrCorrupt, from, to, v.seg.path(logSuffix), pos, err)
}

// OffsetForTime returns the first offset whose record timestamp is >= ts,
// found through the time index and a scan. Only records written to a file
// are searched (see Read): if none of them qualifies it returns the offset
// after them, which is NextOffset() after a Sync.
//
// Safe for concurrent use. Errors: ErrClosed; ErrCorrupt-wrapped naming
// the file when a batch read is bad.
func (l *Log) OffsetForTime(ts int64) (int64, error) {
	views, readEnd, err := l.viewsForTime(ts)
	defer func() {
		for _, v := range views {
			v.seg.release()
		}
	}()
	if err != nil {
		return 0, err
	}
	for _, v := range views {
		off, ok, err := l.withIndex(v).offsetForTime(ts)
		if err != nil || ok {
			return off, err
		}
	}
	return readEnd, nil
}

// viewsForTime returns views of the segments whose newest record is at or
// after ts, in order, and the readable end of the log.
func (l *Log) viewsForTime(ts int64) ([]segView, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.segs == nil {
		return nil, 0, ErrClosed
	}
	var views []segView
	for _, s := range l.segs {
		if s.maxTS.Load() >= ts {
			views = append(views, l.view(s))
		}
	}
	return views, l.readEnd, nil
}

// offsetForTime searches the segment's readable part for the first record
// with timestamp >= ts; ok is false when there is none.
func (v segView) offsetForTime(ts int64) (off int64, ok bool, err error) {
	pos, base := lookupTime(v.entries, v.seg.base, ts)
	pos, h, err := findBatch(v.seg, pos, v.readable, base, func(h BatchHeader) bool { return h.MaxTimestamp >= ts })
	if errors.Is(err, errNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	b := make([]byte, h.Size())
	if err := v.seg.readAt(b, pos); err != nil {
		return 0, false, err
	}
	if _, err := record.ValidateBatch(b); err != nil {
		return 0, false, fmt.Errorf("%s at position %d: %w", v.seg.path(logSuffix), pos, err)
	}
	err = record.ForEachRecord(b, func(r Record) bool {
		off, ok = r.Offset, r.Timestamp >= ts
		return !ok
	})
	if !ok && err == nil {
		panic(fmt.Sprintf("partlog: batch at %d has max timestamp %d but no record at or after %d", pos, h.MaxTimestamp, ts))
	}
	return off, ok, err
}
