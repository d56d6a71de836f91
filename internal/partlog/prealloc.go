package partlog

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// Preallocation (Options.PreallocateBytes). Appending to a file changes
// its size, and on ext4 and XFS the fsync that makes the data durable
// then commits the file system's journal too (the new size, the newly
// allocated blocks): on the disks measured that is a third of a small
// append's fsync. The writer therefore extends the active segment's file
// ahead of its appends, a step at a time (fallocate: blocks reserved,
// reading as zeros, the size set), and writes inside it.
//
// What this changes on disk: the active segment's file may end in up to
// one step of zeros after its last batch. A rolled segment is cut to its
// data (and fsynced) before the next one is created, as is the active one
// when the log is closed; after a crash Open finds the zeros after the
// last batch and cuts them without reporting a torn tail (zeros are what
// unwritten space reads as; a write that was under way when the process
// died leaves non-zero bytes, reported as before).

// preallocate makes the active segment's file at least need bytes long,
// extending it by a step (not past SegmentBytes, unless need is). A file
// system that refuses (no fallocate, no space) costs nothing: the
// appends then extend the file themselves, and the log tries again in
// the next segment. Writer only.
func (l *Log) preallocate(seg *segment, need int64) {
	if need <= seg.alloc || l.opts.PreallocateBytes < 0 || l.preallocOff {
		return
	}
	end := max(need, min(seg.alloc+l.opts.PreallocateBytes, l.opts.SegmentBytes))
	err := unix.Fallocate(int(seg.f.Fd()), 0, seg.alloc, end-seg.alloc)
	if err != nil {
		l.preallocOff = true
		if !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EOPNOTSUPP) {
			l.opts.Logger.Warn("partlog: preallocating the segment failed; appending without", "segment", seg.path(logSuffix), "err", err)
		}
		return
	}
	seg.alloc = end
}

// trimAlloc cuts the segment's file to its data (the buffer written), so
// that a sealed segment's file ends with its last batch. The caller
// fsyncs. Writer only.
func (l *Log) trimAlloc(seg *segment) error {
	if seg.alloc <= seg.size {
		return nil
	}
	if err := seg.f.Truncate(seg.size); err != nil {
		return fmt.Errorf("truncate %s to its data: %w", seg.path(logSuffix), err)
	}
	seg.alloc = seg.size
	l.dirty = true // the new size must reach the disk with the next fsync
	return nil
}

// zeroTail reports whether bytes [from, to) of seg's file all read as
// zeros: preallocated space never written.
func zeroTail(seg *segment, from, to int64) (bool, error) {
	if from >= to {
		return false, nil
	}
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	buf := *bp
	for pos := from; pos < to; {
		// Unwritten space is a hole to SEEK_DATA on ext4 and XFS: skip it
		// without reading (ENXIO: no data up to the end of the file).
		data, err := unix.Seek(int(seg.f.Fd()), pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return true, nil
		}
		if err == nil && data > pos {
			pos = data
			if pos >= to {
				return true, nil
			}
		}
		n := int(min(int64(len(buf)), to-pos))
		if _, err := seg.f.ReadAt(buf[:n], pos); err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("partlog: read %s: %w", seg.path(logSuffix), err)
		}
		for _, b := range buf[:n] {
			if b != 0 {
				return false, nil
			}
		}
		pos += int64(n)
	}
	return true, nil
}
