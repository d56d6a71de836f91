package partlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
)

// File name suffixes of a segment's three files.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	baseDigits      = 20
)

// segmentFile is the name of a segment's file: its base offset in 20
// zero-padded digits, then suffix.
func segmentFile(base int64, suffix string) string {
	return fmt.Sprintf("%0*d%s", baseDigits, base, suffix)
}

// parseSegmentFile returns the base offset in a name made by segmentFile.
func parseSegmentFile(name, suffix string) (int64, bool) {
	if len(name) != baseDigits+len(suffix) || name[baseDigits:] != suffix {
		return 0, false
	}
	base, err := strconv.ParseInt(name[:baseDigits], 10, 64)
	return base, err == nil && base >= 0
}

// segment is one .log file and its two index files.
//
// Lifetime: the Log's segment list holds one reference; a reader holds
// another for the duration of its I/O (acquire, then release). The .log
// file is closed when the count reaches zero, so a segment that retention
// or Truncate removed from the list (and unlinked) stays readable by the
// readers that already held it.
type segment struct {
	base int64    // offset of the segment's first record; immutable
	dir  string   // immutable
	f    *os.File // the .log file, read-write; closed with the last reference
	refs atomic.Int32
	// evicted: bytes [0, evicted) were dropped from the page cache by the
	// writer (see evict); readers drop what they read below it. Written by
	// the writer only; evictedAll once the whole segment was dropped.
	// readDropped: readers dropped [0, readDropped) again (dropBehind).
	evicted, readDropped atomic.Int64
	// maxTS is the newest record timestamp in the segment, buffered batches
	// included (math.MinInt64 while empty). Written by the writer only.
	maxTS atomic.Int64

	// Guarded by Log.mu: the writer changes them holding it for writing,
	// readers read them holding it for reading.
	readable int64        // bytes written to f. Invariant: readable <= size
	entries  []indexEntry // published index entries, all below readable.
	// Invariant: a published entry is never modified in place (Truncate
	// installs a copy), so readers may keep a slice of them after RUnlock.
	// indexOut: a sealed segment whose entries were dropped from memory
	// (entries is nil): its index files hold them (Log.withIndex).
	indexOut bool

	// Writer-owned: only the writer goroutine touches these.
	size       int64        // bytes including the write buffer's
	alloc      int64        // the file's size as preallocate or a cut left it; above size by the space preallocated, at or below it when not preallocated
	end        int64        // offset after the last batch, buffered included
	pending    []indexEntry // entries of batches not yet published
	idxWritten int          // entries already written to the index files
	idx, tidx  *os.File     // the index files; open only while they are written (sealIndex, rewriteIndex)
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentFile(s.base, suffix))
}

func newSegment(dir string, base int64, f *os.File) *segment {
	s := &segment{base: base, dir: dir, f: f, end: base}
	s.refs.Store(1)
	s.maxTS.Store(math.MinInt64)
	return s
}

// createSegment creates the files of a new, empty segment. It fails if the
// .log file exists. The caller syncs the directory.
func createSegment(dir string, base int64) (*segment, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentFile(base, logSuffix)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("partlog: create segment: %w", err)
	}
	return newSegment(dir, base, f), nil
}

// openSegment opens the .log file of an existing segment and returns it
// with its file size.
func openSegment(dir string, base int64) (*segment, int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentFile(base, logSuffix)), os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("partlog: open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("partlog: stat segment: %w", err)
	}
	return newSegment(dir, base, f), st.Size(), nil
}

func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.f.Close() // read side: nothing to lose; the writer synced it before.
	case n < 0:
		panic(fmt.Sprintf("partlog: segment %d released %d times too often", s.base, -n))
	}
}

// openIndexFiles opens (creating) the index files for writing.
func (s *segment) openIndexFiles(truncate bool) error {
	flag := os.O_RDWR | os.O_CREATE
	if truncate {
		flag |= os.O_TRUNC
	}
	var err error
	if s.idx, err = os.OpenFile(s.path(indexSuffix), flag, 0o644); err != nil {
		return fmt.Errorf("partlog: open index: %w", err)
	}
	if s.tidx, err = os.OpenFile(s.path(timeIndexSuffix), flag, 0o644); err != nil {
		s.idx.Close()
		s.idx = nil
		return fmt.Errorf("partlog: open time index: %w", err)
	}
	return nil
}

// closeIndexFiles closes the index files if they are open.
func (s *segment) closeIndexFiles() error {
	var err error
	if s.idx != nil {
		err = s.idx.Close()
		err = errors.Join(err, s.tidx.Close())
		s.idx, s.tidx = nil, nil
	}
	return err
}

// remove unlinks the segment's files. The .log file stays open for the
// references still held. The caller syncs the directory.
func (s *segment) remove() error {
	var errs []error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(s.path(suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readAt reads len(b) bytes at pos. A short read means the file was cut
// under the reader (retention or Truncate racing with it).
func (s *segment) readAt(b []byte, pos int64) error {
	n, err := s.f.ReadAt(b, pos)
	if n == len(b) {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s was cut during the read at position %d", ErrOffsetOutOfRange, s.path(logSuffix), pos)
	}
	return fmt.Errorf("partlog: read %s: %w", s.path(logSuffix), err)
}

// mkdirDurable creates dir and its missing parents, fsyncing the parent
// of each directory it creates: a new partition's directories (and the
// topic's) then survive a power failure right after their creation.
func mkdirDurable(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirDurable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDirHook, when set (by tests), is told of every directory syncDir
// fsyncs.
var syncDirHook func(dir string)

// syncDir fsyncs a directory so that file creations and deletions in it
// are durable.
func syncDir(dir string) error {
	if syncDirHook != nil {
		syncDirHook(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("partlog: sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partlog: sync dir %s: %w", dir, err)
	}
	return nil
}
