package partlog

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
)

// Index files. The offset index (.index) holds 8-byte entries: relative
// offset uint32, file position uint32. The time index (.timeindex) holds
// 12-byte entries: timestamp int64, relative offset uint32. Entry k of both
// describes the same batch; little-endian like the batches.
//
// An entry goes before a batch that starts at least IndexIntervalBytes
// after the previous entry (or the segment start): the same rule at append
// and at rebuild. Its timestamp is the running maximum of the batches'
// MaxTimestamp up to and including that batch, so it never decreases.
//
// The index files are rebuildable: the last segment's are always rebuilt on
// Open, older segments' are checked and rebuilt if they look wrong.
const (
	indexEntrySize     = 8
	timeIndexEntrySize = 12
)

// indexEntry marks one batch of a segment.
type indexEntry struct {
	rel uint32 // batch base offset - segment base
	pos uint32 // file position of the batch
	ts  int64  // max timestamp of this batch and all before it in the segment
}

// wantEntry reports whether a batch at pos gets an index entry when the
// previous entry is at lastPos (0 if none): the rule shared by append and
// rebuild.
func wantEntry(lastPos, pos int64, interval int) bool {
	return pos-lastPos >= int64(interval)
}

// lastPos returns the position of the last of entries, or 0.
func lastPos(entries []indexEntry) int64 {
	if len(entries) == 0 {
		return 0
	}
	return int64(entries[len(entries)-1].pos)
}

// lookupOffset returns the position and base offset of the last indexed
// batch with base offset <= offset, or the segment start.
func lookupOffset(entries []indexEntry, segBase, offset int64) (pos, base int64) {
	i := sort.Search(len(entries), func(i int) bool { return segBase+int64(entries[i].rel) > offset })
	if i == 0 {
		return 0, segBase
	}
	return int64(entries[i-1].pos), segBase + int64(entries[i-1].rel)
}

// lookupTime returns where to start scanning for the first record with
// timestamp >= ts: the last indexed batch whose running maximum is < ts
// (no batch up to it qualifies), or the segment start.
func lookupTime(entries []indexEntry, segBase, ts int64) (pos, base int64) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].ts >= ts })
	if i == 0 {
		return 0, segBase
	}
	return int64(entries[i-1].pos), segBase + int64(entries[i-1].rel)
}

// appendIndexBytes encodes entries into the two index formats.
func appendIndexBytes(idx, tidx []byte, entries []indexEntry) ([]byte, []byte) {
	for _, e := range entries {
		idx = le.AppendUint32(idx, e.rel)
		idx = le.AppendUint32(idx, e.pos)
		tidx = le.AppendUint64(tidx, uint64(e.ts))
		tidx = le.AppendUint32(tidx, e.rel)
	}
	return idx, tidx
}

// writeIndex writes the entries not yet in the open index files. The
// files are not synced here (see syncIndex).
func (s *segment) writeIndex() error {
	todo := s.entries[s.idxWritten:]
	if len(todo) == 0 {
		return nil
	}
	idx, tidx := appendIndexBytes(nil, nil, todo)
	if _, err := s.idx.WriteAt(idx, int64(s.idxWritten)*indexEntrySize); err != nil {
		return fmt.Errorf("partlog: write index: %w", err)
	}
	if _, err := s.tidx.WriteAt(tidx, int64(s.idxWritten)*timeIndexEntrySize); err != nil {
		return fmt.Errorf("partlog: write time index: %w", err)
	}
	s.idxWritten = len(s.entries)
	return nil
}

// rewriteIndex replaces the index files' contents with s.entries. The
// files are opened for it if they are not open, and closed again then.
func (s *segment) rewriteIndex() error {
	wasOpen := s.idx != nil
	if !wasOpen {
		if err := s.openIndexFiles(true); err != nil {
			return err
		}
	}
	err := s.idx.Truncate(0)
	if err == nil {
		err = s.tidx.Truncate(0)
	}
	if err == nil {
		s.idxWritten = 0
		err = s.writeIndex()
	}
	if !wasOpen {
		err = errors.Join(err, s.closeIndexFiles())
	}
	if err != nil {
		return fmt.Errorf("partlog: rewrite index of %s: %w", s.path(logSuffix), err)
	}
	return nil
}

// sealIndex writes the segment's index files whole and fsyncs them, when
// it stops being the active segment (roll): from then on Open trusts
// them. The active segment's index lives in memory only (Open rebuilds
// the last segment's by a scan), so a partition keeps no index file
// open and a Sync writes nothing but its batches.
func (s *segment) sealIndex() error {
	if err := s.openIndexFiles(true); err != nil {
		return err
	}
	s.idxWritten = 0
	err := s.writeIndex()
	if err == nil {
		err = s.syncIndex()
	}
	if err = errors.Join(err, s.closeIndexFiles()); err != nil {
		return fmt.Errorf("partlog: seal index of %s: %w", s.path(logSuffix), err)
	}
	return nil
}

// syncIndex fsyncs the open index files.
func (s *segment) syncIndex() error {
	if err := s.idx.Sync(); err != nil {
		return fmt.Errorf("partlog: sync index: %w", err)
	}
	if err := s.tidx.Sync(); err != nil {
		return fmt.Errorf("partlog: sync time index: %w", err)
	}
	return nil
}

// errBadIndex says why stored index files cannot be used; they are rebuilt.
var errBadIndex = errors.New("index unusable")

// loadIndex reads the segment's index files and checks that they are
// consistent with each other and with a log file of logSize bytes: whole
// entries, as many in both, relative offsets and positions strictly
// increasing, timestamps not decreasing, positions inside the file.
// Whether the entries point at batches is for the caller to check.
func (s *segment) loadIndex(logSize int64) ([]indexEntry, error) {
	idx, err := os.ReadFile(s.path(indexSuffix))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadIndex, err)
	}
	tidx, err := os.ReadFile(s.path(timeIndexSuffix))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadIndex, err)
	}
	n := len(idx) / indexEntrySize
	if len(idx)%indexEntrySize != 0 || len(tidx) != n*timeIndexEntrySize {
		return nil, fmt.Errorf("%w: sizes %d and %d do not hold whole, paired entries", errBadIndex, len(idx), len(tidx))
	}
	entries := make([]indexEntry, n)
	for k := range entries {
		e := indexEntry{
			rel: le.Uint32(idx[k*indexEntrySize:]),
			pos: le.Uint32(idx[k*indexEntrySize+4:]),
			ts:  int64(le.Uint64(tidx[k*timeIndexEntrySize:])),
		}
		if trel := le.Uint32(tidx[k*timeIndexEntrySize+8:]); trel != e.rel {
			return nil, fmt.Errorf("%w: entry %d: offsets %d and %d differ", errBadIndex, k, e.rel, trel)
		}
		if int64(e.pos) >= logSize {
			return nil, fmt.Errorf("%w: entry %d: position %d past the file end %d", errBadIndex, k, e.pos, logSize)
		}
		if k > 0 && (e.rel <= entries[k-1].rel || e.pos <= entries[k-1].pos || e.ts < entries[k-1].ts) {
			return nil, fmt.Errorf("%w: entry %d does not follow entry %d", errBadIndex, k, k-1)
		}
		entries[k] = e
	}
	return entries, nil
}

// keepSealedIndexes is how many sealed segments of a log keep their index
// entries in memory (about 256 KiB each with the default sizes): those
// being read now. The others' are read from their index files when a
// reader needs them, so a log's memory does not grow with its length (16
// bytes an entry, one entry per 4 KiB of log: 4 MiB a GiB).
const keepSealedIndexes = 4

// keepIndex records that sealed segment seg has its index entries in
// memory, and drops those of the segments loaded before the last
// keepSealedIndexes: they are in their index files (sealIndex wrote and
// fsynced them, Open checked them). Lock: mu held for writing.
func (l *Log) keepIndex(seg *segment) {
	l.indexIn = append(l.indexIn, seg)
	if n := len(l.indexIn) - keepSealedIndexes; n > 0 {
		for _, s := range l.indexIn[:n] {
			s.entries, s.indexOut = nil, true
		}
		l.indexIn = slices.Delete(l.indexIn, 0, n)
	}
}

// withIndex returns v with its segment's index entries when they are not
// in memory: read from its index files and kept for the next readers
// (keepIndex). A view whose files cannot be read whole (retention deleted
// them) or may have changed since the view was taken (a cut since: its
// files are rewritten) goes without: lookups then scan the segment's
// headers from its start, slower but the same answer.
func (l *Log) withIndex(v segView) segView {
	if !v.indexOut {
		return v
	}
	entries, err := v.seg.loadIndex(v.readable)
	if err != nil {
		return v
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != v.gen {
		return v // the files read may be a later cut's
	}
	if v.seg.indexOut && l.holds(v.seg) {
		v.seg.entries, v.seg.indexOut = entries, false
		l.keepIndex(v.seg)
	}
	v.entries, v.indexOut = entries, false
	return v
}

// holds reports whether seg is one of the log's segments (retention may
// have removed it). Lock: mu held.
func (l *Log) holds(seg *segment) bool {
	i, ok := slices.BinarySearchFunc(l.segs, seg.base, func(s *segment, base int64) int { return cmp.Compare(s.base, base) })
	return ok && l.segs[i] == seg
}
