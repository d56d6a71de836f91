package partlog

import (
	"errors"
	"fmt"
	"github.com/hermes-mq/hermes/pkg/record"
	"io"
	"math"
	"os"
	"slices"
)

// scanResult is what scanning a segment file found.
type scanResult struct {
	pos     int64        // position after the last good batch
	next    int64        // offset after the last good batch
	maxTS   int64        // newest record timestamp seen (with the start entry's)
	entries []indexEntry // the index: the given entries plus new ones
	stop    error        // why the scan stopped before the end; nil if it got there
}

// scanSegment validates the batches of seg from the last of entries (or
// the segment start) to end, each with ValidateBatch and with base offsets
// following on, adding index entries by the append rule. A bad or torn
// batch ends the scan with res.stop set; an I/O error is returned.
//
// With headersOnly, batches are checked by their headers alone (length,
// offsets), not their bodies: what a segment sealed long ago with a bit
// flipped in a batch's body is made of.
func scanSegment(seg *segment, entries []indexEntry, end int64, interval int, headersOnly ...bool) (scanResult, error) {
	res := scanResult{next: seg.base, maxTS: math.MinInt64, entries: entries}
	if n := len(entries); n > 0 {
		res.pos, res.next, res.maxTS = int64(entries[n-1].pos), seg.base+int64(entries[n-1].rel), entries[n-1].ts
	}
	sc := scanner{seg: seg, end: end, pos: res.pos}
	for {
		b, h, err := sc.next()
		if err == io.EOF {
			return res, nil
		}
		if err == nil && (len(headersOnly) == 0 || !headersOnly[0]) {
			h, err = record.ValidateBatch(b)
		}
		if err == nil && h.BaseOffset != res.next {
			err = fmt.Errorf("%w: base offset %d, want %d", ErrCorrupt, h.BaseOffset, res.next)
		}
		if err == nil && (h.NextOffset()-seg.base > math.MaxUint32 || res.pos > math.MaxUint32) {
			err = fmt.Errorf("%w: batch at offset %d, position %d: too far into the segment for its index", ErrCorrupt, h.BaseOffset, res.pos)
		}
		if errors.Is(err, ErrShortBatch) || errors.Is(err, ErrCorrupt) {
			res.stop = err
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.maxTS = max(res.maxTS, h.MaxTimestamp)
		if wantEntry(lastPos(res.entries), res.pos, interval) {
			res.entries = append(res.entries, indexEntry{rel: uint32(h.BaseOffset - seg.base), pos: uint32(res.pos), ts: res.maxTS})
		}
		res.pos += int64(h.Size())
		res.next = h.NextOffset()
		sc.pos = res.pos
	}
}

// recoverLast scans the last segment from its start, cuts the file at the
// first bad or torn batch (reporting it), rebuilds its index files and
// leaves them open: it becomes the active segment.
func (l *Log) recoverLast(seg *segment, size int64) error {
	res, err := scanSegment(seg, nil, size, l.opts.IndexIntervalBytes)
	if err != nil {
		return err
	}
	seg.alloc = res.pos
	if res.stop != nil {
		// Zeros from the last batch to the end of the file are space
		// preallocated and not written yet: kept for the next appends.
		zeros, err := zeroTail(seg, res.pos, size)
		if err != nil {
			return err
		}
		if zeros {
			res.stop, seg.alloc = nil, size
		}
	}
	if res.stop != nil {
		l.opts.Logger.Warn("partlog: cutting the corrupt or torn tail of the last segment",
			"segment", seg.path(logSuffix), "position", res.pos, "bytes_cut", size-res.pos, "reason", res.stop)
		if err := seg.f.Truncate(res.pos); err != nil {
			return fmt.Errorf("partlog: truncate %s: %w", seg.path(logSuffix), err)
		}
	}
	// What the scan read may sit only in the page cache if the last
	// process crashed: make it durable before anything builds on it.
	if err := seg.f.Sync(); err != nil {
		return fmt.Errorf("partlog: sync %s: %w", seg.path(logSuffix), err)
	}
	seg.setScanned(res)
	return nil // its index is written when it is sealed (see sealIndex)
}

// loadOlder opens the index of a segment that is not the last, checks it
// against the file (the batches after its last entry must validate and end
// exactly at the file end, at offset nextBase where the next segment
// starts) and rebuilds it by a full scan if that fails. A segment whose
// batches' headers still follow on to nextBase, but a body of which is
// corrupt (a bit flipped on the disk), is opened: reads of that batch
// report it (see Read), the others are served. A segment whose headers do
// not follow on is corrupt: the error names it and wraps ErrCorrupt, and
// nothing is truncated, as later segments hold acknowledged data.
func (l *Log) loadOlder(seg *segment, size, nextBase int64) error {
	entries, reason := seg.loadIndex(size)
	if reason == nil {
		res, err := scanSegment(seg, entries, size, l.opts.IndexIntervalBytes)
		if err != nil {
			return err
		}
		if err := l.cutZeroTail(seg, &res, size, nextBase); err != nil {
			return err
		}
		if res.stop == nil && res.next == nextBase {
			seg.setScanned(res)
			if len(res.entries) != len(entries) {
				return seg.rewriteIndex()
			}
			seg.idxWritten = len(entries)
			return nil
		}
		reason = fmt.Errorf("%w: the batches after its last entry end at offset %d (next segment: %d): %v",
			errBadIndex, res.next, nextBase, res.stop)
	}
	l.opts.Logger.Warn("partlog: rebuilding a segment index", "segment", seg.path(logSuffix), "reason", reason)
	res, err := scanSegment(seg, nil, size, l.opts.IndexIntervalBytes)
	if err == nil {
		err = l.cutZeroTail(seg, &res, size, nextBase)
	}
	if err == nil && res.stop != nil {
		bad := res
		if hres, herr := scanSegment(seg, nil, size, l.opts.IndexIntervalBytes, true); herr == nil && hres.stop == nil && hres.next == nextBase {
			l.opts.Logger.Warn("partlog: a batch of an older segment is corrupt; reads of it fail, the rest is served",
				"segment", seg.path(logSuffix), "position", bad.pos, "offset", bad.next, "reason", bad.stop)
			res = hres
		}
	}
	switch {
	case err != nil:
		return err
	case res.stop != nil:
		return fmt.Errorf("%w: segment %s at position %d (not the last segment, so not truncated): %w",
			ErrCorrupt, seg.path(logSuffix), res.pos, res.stop)
	case res.next != nextBase:
		return fmt.Errorf("%w: segment %s ends at offset %d but the next segment starts at %d",
			ErrCorrupt, seg.path(logSuffix), res.next, nextBase)
	}
	seg.setScanned(res)
	return seg.rewriteIndex()
}

// cutZeroTail handles a segment other than the last whose scan stopped
// where the batches reach nextBase, at zeros that run to the end of the
// file: space preallocated while it was the active segment, which a crash
// kept from being cut when it was rolled. The file is cut to its data
// (and fsynced) and res no longer reports a stop.
func (l *Log) cutZeroTail(seg *segment, res *scanResult, size, nextBase int64) error {
	if res.stop == nil || res.next != nextBase {
		return nil
	}
	zeros, err := zeroTail(seg, res.pos, size)
	if err != nil || !zeros {
		return err
	}
	if err := seg.f.Truncate(res.pos); err != nil {
		return fmt.Errorf("partlog: truncate %s to its data: %w", seg.path(logSuffix), err)
	}
	if err := seg.f.Sync(); err != nil {
		return fmt.Errorf("partlog: sync %s: %w", seg.path(logSuffix), err)
	}
	res.stop = nil
	return nil
}

// setScanned makes a freshly opened segment reflect a scan's result.
func (s *segment) setScanned(res scanResult) {
	s.size, s.readable, s.end = res.pos, res.pos, res.next
	s.alloc = max(s.alloc, res.pos)
	s.entries = res.entries
	s.maxTS.Store(res.maxTS)
}

// listSegments returns the base offsets of the .log files in dir, in
// order. It removes index files without a .log file (left by a crash
// during a deletion) and ignores other files.
func listSegments(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("partlog: list %s: %w", dir, err)
	}
	var bases []int64
	logs := map[int64]bool{}
	for _, e := range ents {
		if base, ok := parseSegmentFile(e.Name(), logSuffix); ok && e.Type().IsRegular() {
			bases = append(bases, base)
			logs[base] = true
		}
	}
	for _, e := range ents {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if base, ok := parseSegmentFile(e.Name(), suffix); ok && !logs[base] {
				s := &segment{base: base, dir: dir}
				if err := os.Remove(s.path(suffix)); err != nil {
					return nil, fmt.Errorf("partlog: remove orphan index: %w", err)
				}
			}
		}
	}
	slices.Sort(bases)
	return bases, nil
}
