package partlog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Log is one partition's log: a directory of segment files named by
// their base offset, each with a sparse offset index and a time index.
//
// Concurrency contract: ONE writer goroutine calls Append, AppendRaw,
// Sync, Truncate, EnforceRetention, Close and Delete; any number of
// goroutines call Read, OffsetForTime, StartOffset, NextOffset,
// SyncedOffset, Size and Segments concurrently with it and with each other.
//
// Lock rules: mu is the only lock, held for in-memory bookkeeping only,
// never across a system call. Readers hold it for reading while they pick
// a segment and take a reference to it, then do their I/O without it, so a
// slow disk read never stalls the writer. The writer holds it for writing
// when it publishes bytes it wrote (new readable size and index entries),
// and when it adds or removes segments. A removed segment's file is
// unlinked at once but closed with its last reference.
//
// Visibility: appended batches sit in a write buffer until it fills or
// Sync; readers see only bytes written to the file (see Read).
type Log struct {
	dir  string
	opts Options // with defaults filled

	next   atomic.Int64 // offset the next appended record gets
	synced atomic.Int64 // offset after the last fsynced batch. Invariant: synced <= next
	size   atomic.Int64 // bytes of all segments, write buffer included
	closed atomic.Bool
	// retentionAge (ns) and retentionBytes: opts' retention, changed by
	// SetRetention.
	retentionAge, retentionBytes atomic.Int64
	// floor: records below it were deleted (SetFloor); retention deletes
	// the segments wholly below it.
	floor atomic.Int64

	mu sync.RWMutex
	// Guarded by mu. segs is in base-offset order, segs[i].end ==
	// segs[i+1].base, and has at least one segment (the last is the
	// active one) until Close sets it to nil. The writer replaces it
	// rather than editing it when removing segments.
	segs []*segment
	// readEnd is the offset after the last batch written to a file.
	// Invariant: synced <= readEnd <= next.
	readEnd int64
	// gen counts the cuts (Truncate, Reset): a SyncPoint taken before
	// one no longer says what is durable.
	gen uint64
	// indexIn lists the sealed segments whose index entries are in
	// memory, in the order they were loaded (keepIndex).
	indexIn []*segment
	// syncErr is the first failed fsync of a SyncPoint (another
	// goroutine's): the writer takes it as its sticky write error.
	syncErr atomic.Pointer[error]

	// Writer-owned.
	active *segment // == segs[len(segs)-1]
	// buf holds batches not yet written, to go at active.readable. It
	// grows on demand up to Options.WriteBufferBytes, so an idle log costs
	// no buffer, and keeps its capacity.
	buf []byte
	// iov holds batches appended by AppendShared, not yet written; the
	// caller owns them and never modifies them.
	iov      [][]byte
	iovBytes int
	dirty    bool // bytes were written to active since its last fsync
	// preallocOff: the file system refused to preallocate the active
	// segment; appends extend it until the next roll.
	preallocOff bool
	// fill writes the active segment's preallocation (with
	// Options.PreallocateWrite); nil otherwise.
	fill *filler
	// werr is the first write-path I/O error. After it the files may hold
	// bytes the log does not account for, so every write method returns it
	// until the log is closed and reopened (recovery then cuts the tail).
	werr error
}

// Open opens the log in dir, creating dir and an empty first segment
// (base offset 0) if needed, and recovers it: the last segment is scanned
// from its start and cut at its first invalid or torn batch (reported as a
// Warn on opts.Logger); the indexes of the others are checked and rebuilt
// if missing or inconsistent.
//
// Errors: ErrInvalidOptions; an error wrapping ErrCorrupt naming the file
// when the batches of a segment other than the last do not follow on (a
// header damaged, bytes missing) or the segments do not follow on (nothing
// is cut then); I/O errors. A corrupt batch body in such a segment (a bit
// flipped on the disk) is found when the batch is read (see Read).
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("partlog: create %s: %w", dir, err)
	}
	l := &Log{dir: dir, opts: opts}
	l.SetRetention(opts.RetentionAge, opts.RetentionBytes)
	if err := l.openSegments(); err != nil {
		for _, s := range l.segs {
			s.closeIndexFiles()
			s.release()
		}
		return nil, err
	}
	l.active = l.segs[len(l.segs)-1]
	l.next.Store(l.active.end)
	l.synced.Store(l.active.end)
	if opts.PreallocateWrite && opts.PreallocateBytes > 0 {
		l.fill = newFiller(l)
	}
	l.readEnd = l.active.end
	for _, s := range l.segs {
		l.size.Add(s.size)
	}
	return l, nil
}

// openSegments opens and recovers the segments, appending them to l.segs
// (before l is shared, so without the lock).
func (l *Log) openSegments() error {
	bases, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	if len(bases) == 0 {
		s, err := createSegment(l.dir, 0)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		return syncDir(l.dir)
	}
	for i, base := range bases {
		s, size, err := openSegment(l.dir, base)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		if i < len(bases)-1 {
			err = l.loadOlder(s, size, bases[i+1])
		} else {
			err = l.recoverLast(s, size)
		}
		if err != nil {
			return err
		}
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		l.keepIndex(s) // the newest sealed ones stay in memory
	}
	return nil
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// NextOffset returns the offset the next appended record will get:
// buffered and unsynced batches count. Safe for concurrent use.
func (l *Log) NextOffset() int64 { return l.next.Load() }

// SyncedOffset returns the offset after the last batch made durable by
// Sync (or by a roll, or found on disk by Open). Safe for concurrent use.
func (l *Log) SyncedOffset() int64 { return l.synced.Load() }

// Size returns the bytes of all segments, the write buffer included.
// Safe for concurrent use.
func (l *Log) Size() int64 { return l.size.Load() }

// StartOffset returns the offset of the oldest record kept (equal to
// NextOffset when the log is empty), or 0 after Close. Safe for concurrent use.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.segs == nil {
		return 0
	}
	return l.segs[0].base
}

// Segments returns the number of segment files, or 0 after Close. Safe
// for concurrent use.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// writable returns the error a write method must return now, if any.
// Writer only.
func (l *Log) writable() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.werr == nil {
		if e := l.syncErr.Load(); e != nil {
			l.werr = *e // a SyncPoint's fsync failed: see SyncPoint.Sync
		}
	}
	return l.werr
}

// fail records a write-path I/O error (see werr) and returns it.
func (l *Log) fail(err error) error {
	if l.werr == nil {
		l.werr = fmt.Errorf("partlog: log %s failed: %w", l.dir, err)
	}
	return l.werr
}

// Close writes and fsyncs what is buffered and closes the files (a reader
// still in a Read finishes it first). Every later call of any method
// returns ErrClosed. An error from the final sync is returned, but the log
// is closed anyway. Writer only.
func (l *Log) Close() error {
	if l.closed.Load() {
		return ErrClosed
	}
	err := l.werr
	if l.fill != nil {
		l.fill.release(l.active)
		l.fill.close()
	}
	if err == nil {
		if err = l.flush(); err == nil {
			if err = l.trimAlloc(l.active); err != nil {
				err = l.fail(err)
			}
		}
	}
	if err == nil {
		err = l.Sync()
	}
	l.closed.Store(true)
	l.mu.Lock()
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
	return err
}

// Delete closes the log if it is open and removes its whole directory
// (for topic deletion). Writer only; readers get ErrClosed.
func (l *Log) Delete() error {
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
		l.opts.Logger.Warn("partlog: close before delete", "dir", l.dir, "err", err)
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("partlog: delete %s: %w", l.dir, err)
	}
	return nil
}
