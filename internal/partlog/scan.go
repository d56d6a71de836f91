package partlog

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// scanChunk is how much a scanner reads ahead: small batches then cost no
// system call each.
const scanChunk = 1 << 20

// scanner reads the whole batches of a segment file in order from a
// position up to a bound, for recovery and index rebuilds.
type scanner struct {
	seg    *segment
	end    int64 // scan bound (file size)
	pos    int64 // position of the next batch
	buf    []byte
	bufPos int64 // file position of buf[0]
}

// window returns the bytes [pos, min(pos+n, end)), reading if needed.
func (s *scanner) window(n int) ([]byte, error) {
	n = int(min(int64(n), s.end-s.pos))
	if s.pos >= s.bufPos && s.pos+int64(n) <= s.bufPos+int64(len(s.buf)) {
		off := s.pos - s.bufPos
		return s.buf[off : off+int64(n)], nil
	}
	want := int(min(int64(max(n, scanChunk)), s.end-s.pos))
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	s.bufPos = s.pos
	if err := s.seg.readAt(s.buf, s.pos); err != nil {
		s.buf = s.buf[:0]
		return nil, err
	}
	return s.buf[:n], nil
}

// next returns the batch at pos and its header, checked by parseHeader
// only; the bytes alias the scanner's buffer until the next call. It
// returns io.EOF at the bound, ErrShortBatch for a batch cut by the bound
// (a torn write), ErrCorrupt-wrapped errors for a bad header, and I/O
// errors as they are.
func (s *scanner) next() ([]byte, BatchHeader, error) {
	if s.pos >= s.end {
		return nil, BatchHeader{}, io.EOF
	}
	w, err := s.window(BatchHeaderSize)
	if err != nil {
		return nil, BatchHeader{}, err
	}
	h, err := parseHeader(w)
	if err != nil {
		return nil, h, err
	}
	if w, err = s.window(h.Size()); err != nil {
		return nil, h, err
	}
	if len(w) < h.Size() {
		return nil, h, ErrShortBatch
	}
	return w, h, nil
}

// scratchPool holds buffers for findBatch's header walks.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// errNotFound is findBatch's answer when no batch up to the bound matches.
var errNotFound = errors.New("partlog: no matching batch")

// findBatch walks batch headers from pos (where a batch with base offset
// base starts) up to end, reading only headers, and returns the position
// and header of the first batch for which stop returns true. Errors:
// errNotFound when it reaches end; ErrCorrupt-wrapped naming the file and
// position when a header is bad or does not continue the offsets; read
// errors from segment.readAt.
//
// REQUIRES: [pos, end) holds whole batches (end <= readable).
func findBatch(seg *segment, pos, end, base int64, stop func(BatchHeader) bool) (int64, BatchHeader, error) {
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	buf := *bp
	bufPos, n := int64(0), 0 // buf[:n] holds the file's [bufPos, bufPos+n)
	for pos < end {
		if pos < bufPos || pos+BatchHeaderSize > bufPos+int64(n) {
			n = int(min(int64(len(buf)), end-pos))
			if err := seg.readAt(buf[:n], pos); err != nil {
				return pos, BatchHeader{}, err
			}
			bufPos = pos
		}
		h, err := parseHeader(buf[pos-bufPos : n])
		if errors.Is(err, ErrShortBatch) {
			err = fmt.Errorf("%w: header cut by the end %d", ErrCorrupt, end)
		}
		if err == nil && h.BaseOffset != base {
			err = fmt.Errorf("%w: base offset %d, want %d", ErrCorrupt, h.BaseOffset, base)
		}
		if err == nil && pos+int64(h.Size()) > end {
			err = fmt.Errorf("%w: %d-byte batch crosses the end %d", ErrCorrupt, h.Size(), end)
		}
		if err != nil {
			return pos, h, fmt.Errorf("%s at position %d: %w", seg.path(logSuffix), pos, err)
		}
		if stop(h) {
			return pos, h, nil
		}
		pos += int64(h.Size())
		base = h.NextOffset()
	}
	return pos, BatchHeader{}, errNotFound
}
