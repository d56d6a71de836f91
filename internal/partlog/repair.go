package partlog

import (
	"bytes"
	"fmt"
	"math"
	"os"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Repair puts good, a whole valid batch, in place of the batch of this log
// that starts at the same offset, one whose bytes were damaged on the disk
// (a read of it fails its checksum). The replicas of a partition hold the
// same batches byte for byte, so another replica's copy is the batch
// itself. The batch is found by following the headers from the nearest
// index entry; its own header may be damaged too, as long as the batch
// after it (or the segment's end) starts exactly len(good) bytes later at
// good's next offset. It writes good over the damaged bytes and fsyncs
// the file; nothing around it moves, and no index changes.
//
// It returns false when the batch in place is already good (another
// repair came first). Safe for concurrent use with readers and the writer
// (who only appends past it); a read of the batch while it is rewritten
// may fail its checksum once more. Errors: ErrClosed;
// ErrOffsetOutOfRange when the log does not hold good's offset;
// ErrCorrupt-wrapped when good is not a valid batch, or this log does not
// have a batch of good's offsets and length where good belongs (not
// repairable in place).
func (l *Log) Repair(good []byte) (bool, error) {
	h, err := record.ParseBatch(good)
	if err != nil {
		return false, fmt.Errorf("%w: the repair batch: %w", ErrCorrupt, err)
	}
	if h.Size() != len(good) {
		return false, fmt.Errorf("%w: the repair batch is %d bytes, its header says %d", ErrCorrupt, len(good), h.Size())
	}
	v, err := l.viewAt(h.BaseOffset, math.MaxInt64)
	if err != nil {
		return false, err
	}
	if v.seg == nil {
		return false, fmt.Errorf("%w: offset %d is not written yet", ErrOffsetOutOfRange, h.BaseOffset)
	}
	defer v.seg.release()
	path := v.seg.path(logSuffix)
	pos, base := lookupOffset(v.entries, v.seg.base, h.BaseOffset)
	if base > h.BaseOffset {
		return false, fmt.Errorf("%w: %s: offset %d is inside the batch before the index entry at %d", ErrCorrupt, path, h.BaseOffset, base)
	}
	if base < h.BaseOffset {
		// Follow the (whole) headers up to the batch before good.
		pos, _, err = findBatch(v.seg, pos, v.readable, base, func(bh BatchHeader) bool { return bh.NextOffset() >= h.BaseOffset })
		if err != nil {
			return false, err
		}
		bh, err := v.headerAt(pos)
		if err != nil {
			return false, err
		}
		if bh.NextOffset() != h.BaseOffset {
			return false, fmt.Errorf("%w: %s: no batch starts at offset %d (the one at position %d holds [%d, %d))",
				ErrCorrupt, path, h.BaseOffset, pos, bh.BaseOffset, bh.NextOffset())
		}
		pos += int64(bh.Size())
	}
	// good belongs at pos: the next batch, or the segment's end, must be
	// where good ends.
	end := pos + int64(len(good))
	switch {
	case end > v.readable:
		return false, fmt.Errorf("%w: %s: a %d-byte batch at position %d crosses the end %d", ErrCorrupt, path, len(good), pos, v.readable)
	case end < v.readable:
		nh, err := v.headerAt(end)
		if err != nil || nh.BaseOffset != h.NextOffset() {
			return false, fmt.Errorf("%w: %s: the batch after position %d does not start at offset %d where the repair batch ends (%v)",
				ErrCorrupt, path, pos, h.NextOffset(), err)
		}
	default: // good would be the last batch written to this segment
		if next, ok := l.nextSegmentBase(v.seg); ok && next != h.NextOffset() {
			return false, fmt.Errorf("%w: %s is followed by offset %d, the repair batch ends at %d", ErrCorrupt, path, next, h.NextOffset())
		} else if !ok {
			// The segment being written: nothing after it to go by,
			// so its header must be whole and the same.
			cur, err := v.headerAt(pos)
			if err != nil || cur.BaseOffset != h.BaseOffset || cur.Size() != h.Size() {
				return false, fmt.Errorf("%w: %s: the last batch at position %d is not the repair batch's (%v)", ErrCorrupt, path, pos, err)
			}
		}
	}
	old := make([]byte, len(good))
	if err := v.seg.readAt(old, pos); err != nil {
		return false, err
	}
	if bytes.Equal(old, good) {
		return false, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false, fmt.Errorf("partlog: repair %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteAt(good, pos); err != nil {
		return false, fmt.Errorf("partlog: repair %s at position %d: %w", path, pos, err)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("partlog: repair %s: fsync: %w", path, err)
	}
	l.opts.Logger.Warn("partlog: a damaged batch was rewritten from another replica's copy",
		"segment", path, "position", pos, "offsets", fmt.Sprintf("[%d, %d)", h.BaseOffset, h.NextOffset()))
	return true, nil
}

// nextSegmentBase is the base offset of the segment after seg; false when
// seg is the last.
func (l *Log) nextSegmentBase(seg *segment) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, s := range l.segs {
		if s == seg && i+1 < len(l.segs) {
			return l.segs[i+1].base, true
		}
	}
	return 0, false
}

// headerAt parses the batch header at pos (not the body).
func (v segView) headerAt(pos int64) (BatchHeader, error) {
	var b [BatchHeaderSize]byte
	if pos+BatchHeaderSize > v.readable {
		return BatchHeader{}, fmt.Errorf("%w: header at position %d crosses the end %d", ErrCorrupt, pos, v.readable)
	}
	if err := v.seg.readAt(b[:], pos); err != nil {
		return BatchHeader{}, err
	}
	return parseHeader(b[:])
}

// BatchAt returns the offsets [base, next) of the batch holding offset,
// from the headers alone (no body is checked): a reader that found that
// batch damaged goes on after it. Errors: as HeaderAt.
func (l *Log) BatchAt(offset int64) (base, next int64, err error) {
	h, err := l.HeaderAt(offset)
	if err != nil {
		return 0, 0, err
	}
	return h.BaseOffset, h.NextOffset(), nil
}

// HeaderAt returns the header of the batch holding offset, read from the
// headers alone (no body is checked), through the segment's offset index:
// at most IndexIntervalBytes of headers are read. Errors: ErrClosed;
// ErrOffsetOutOfRange when offset is outside the log or not written yet;
// ErrCorrupt-wrapped when the headers do not follow on up to it.
func (l *Log) HeaderAt(offset int64) (BatchHeader, error) {
	v, err := l.viewAt(offset, math.MaxInt64)
	if err != nil {
		return BatchHeader{}, err
	}
	if v.seg == nil {
		return BatchHeader{}, fmt.Errorf("%w: offset %d is not written yet", ErrOffsetOutOfRange, offset)
	}
	defer v.seg.release()
	pos, b := lookupOffset(v.entries, v.seg.base, offset)
	_, h, err := findBatch(v.seg, pos, v.readable, b, func(bh BatchHeader) bool { return bh.NextOffset() > offset })
	return h, err
}
