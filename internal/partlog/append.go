package partlog

import (
	"fmt"
	"github.com/hermes-mq/hermes/pkg/record"
	"math"
)

// Append appends one batch, giving it base offset NextOffset(), and
// returns that offset. The bytes are copied (into the write buffer, or
// straight to the file for a batch larger than the buffer), then rebased
// and re-checksummed in the copy: batch itself is not modified and may be
// reused once Append returns. The batch is neither durable nor readable
// until Sync (or until the buffer fills); see SyncedOffset.
//
// The active segment is rolled first if the batch would take it past
// SegmentBytes (a batch larger than that goes alone into a new segment).
//
// REQUIRES: ValidateBatch accepted batch; only its header is checked
// again. Writer only. Errors: ErrClosed; an error wrapping ErrCorrupt if
// batch is not one whole batch; the sticky write error (see Log).
func (l *Log) Append(batch []byte) (int64, error) {
	h, err := l.checkAppend(batch)
	if err != nil {
		return 0, err
	}
	base := l.next.Load()
	if base > math.MaxInt64-int64(h.RecordCount) {
		return 0, fmt.Errorf("%w: offsets would overflow", ErrOffsetOutOfRange)
	}
	h.BaseOffset = base
	return base, l.append(batch, h, true)
}

// AppendRaw appends a batch as it is: its base offset must already be
// NextOffset() (a replica copying its leader's log). Otherwise as Append.
// Errors: as Append, and ErrOffsetMismatch.
func (l *Log) AppendRaw(batch []byte) error {
	h, err := l.checkAppend(batch)
	if err != nil {
		return err
	}
	if next := l.next.Load(); h.BaseOffset != next {
		return fmt.Errorf("%w: batch base offset %d, next offset %d", ErrOffsetMismatch, h.BaseOffset, next)
	}
	return l.append(batch, h, false)
}

// AppendShared is AppendRaw without the copy: the log keeps batch and
// writes it (with pwritev, many batches per call) at the next Sync or
// when WriteBufferBytes are pending. It is how a broker that keeps batches
// in its own cache saves a memmove of every byte it stores.
//
// REQUIRES: nobody modifies batch after the call (readers may share it).
// Errors: as AppendRaw.
func (l *Log) AppendShared(batch []byte) error {
	h, err := l.checkAppend(batch)
	if err != nil {
		return err
	}
	if next := l.next.Load(); h.BaseOffset != next {
		return fmt.Errorf("%w: batch base offset %d, next offset %d", ErrOffsetMismatch, h.BaseOffset, next)
	}
	if len(l.buf) > 0 {
		if err := l.flush(); err != nil {
			return err
		}
	}
	return l.appendAt(batch, h, func() error {
		l.iov = append(l.iov, batch)
		l.iovBytes += len(batch)
		if l.iovBytes >= l.opts.WriteBufferBytes || len(l.iov) >= maxIOV {
			return l.flush()
		}
		return nil
	})
}

func (l *Log) checkAppend(batch []byte) (BatchHeader, error) {
	if err := l.writable(); err != nil {
		return BatchHeader{}, err
	}
	h, err := parseHeader(batch)
	if err == nil && len(batch) != h.Size() {
		err = fmt.Errorf("%w: %d bytes given for a %d-byte batch", ErrCorrupt, len(batch), h.Size())
	}
	return h, err
}

// append adds batch, whose header is h with the final base offset, to the
// active segment, rewriting the copy's base offset if rebase.
func (l *Log) append(batch []byte, h BatchHeader, rebase bool) error {
	if len(l.iov) > 0 || len(l.buf)+len(batch) > l.opts.WriteBufferBytes {
		if err := l.flush(); err != nil {
			return err
		}
	}
	return l.appendAt(batch, h, func() error {
		if len(batch) > l.opts.WriteBufferBytes {
			return l.writeDirect(batch, h.BaseOffset, rebase)
		}
		start := len(l.buf)
		l.buf = append(l.buf, batch...)
		if rebase {
			record.SetBaseOffset(l.buf[start:], h.BaseOffset)
		}
		return nil
	})
}

// appendAt rolls the segment if needed, accounts for batch (offsets,
// sizes, index entries) and then calls store to put its bytes on the way
// to the file.
func (l *Log) appendAt(batch []byte, h BatchHeader, store func() error) error {
	if l.mustRoll(h) {
		if err := l.roll(h.BaseOffset); err != nil {
			return err
		}
	}
	seg := l.active
	if need := seg.size + int64(len(batch)); l.fill == nil || !l.fill.prepare(seg, need) {
		l.preallocate(seg, need)
	}
	maxTS := max(seg.maxTS.Load(), h.MaxTimestamp)
	seg.maxTS.Store(maxTS)
	last := lastPos(seg.entries)
	if len(seg.pending) > 0 {
		last = lastPos(seg.pending)
	}
	if wantEntry(last, seg.size, l.opts.IndexIntervalBytes) {
		seg.pending = append(seg.pending, indexEntry{rel: uint32(h.BaseOffset - seg.base), pos: uint32(seg.size), ts: maxTS})
	}
	seg.size += int64(len(batch))
	seg.end = h.NextOffset()
	l.next.Store(seg.end)
	l.size.Add(int64(len(batch)))
	return store()
}

// mustRoll reports whether the batch with header h must go to a new
// segment: the active one is not empty and the batch would take it past
// SegmentBytes, or its offsets past what a relative uint32 can index.
func (l *Log) mustRoll(h BatchHeader) bool {
	seg := l.active
	return seg.size > 0 && (seg.size+int64(h.Size()) > l.opts.SegmentBytes ||
		h.NextOffset()-seg.base > math.MaxUint32)
}

// writeDirect writes a batch too large for the buffer straight to the
// file (the buffer is empty: append flushed it), rebasing a copy of its
// header if rebase, then publishes it.
func (l *Log) writeDirect(batch []byte, base int64, rebase bool) error {
	seg := l.active
	pos := seg.readable
	if rebase {
		var hdr [BatchHeaderSize]byte
		copy(hdr[:], batch)
		record.RebaseHeader(&hdr, batch[BatchHeaderSize:], base)
		if _, err := seg.f.WriteAt(hdr[:], pos); err != nil {
			return l.fail(err)
		}
		batch, pos = batch[BatchHeaderSize:], pos+BatchHeaderSize
	}
	if _, err := seg.f.WriteAt(batch, pos); err != nil {
		return l.fail(err)
	}
	l.dirty = true
	l.publish(seg.size)
	return nil
}

// flush writes the buffer, or the shared batches, to the active segment
// and publishes them. Invariant: at most one of buf and iov is non-empty.
func (l *Log) flush() error {
	if len(l.iov) > 0 {
		return l.flushShared()
	}
	if len(l.buf) == 0 {
		return nil
	}
	seg := l.active
	if _, err := seg.f.WriteAt(l.buf, seg.readable); err != nil {
		return l.fail(err)
	}
	l.dirty = true
	l.publish(seg.readable + int64(len(l.buf)))
	l.buf = l.buf[:0]
	return nil
}

// maxIOV bounds the batches of one pwritev (Linux's IOV_MAX is 1024).
const maxIOV = 1024

func (l *Log) flushShared() error {
	seg := l.active
	pos := seg.readable
	iov := l.iov
	for len(iov) > 0 {
		n, err := pwritev(seg.f, iov, pos)
		if err != nil {
			return l.fail(fmt.Errorf("write %s: %w", seg.path(logSuffix), err))
		}
		pos += int64(n)
		for n > 0 { // drop what was written; a short write resumes mid-batch
			if n >= len(iov[0]) {
				n -= len(iov[0])
				iov = iov[1:]
			} else {
				iov[0] = iov[0][n:]
				n = 0
			}
		}
	}
	clear(l.iov)
	l.iov, l.iovBytes = l.iov[:0], 0
	l.dirty = true
	l.publish(pos)
	return nil
}

// publish makes the active segment readable up to readable bytes (which
// must be everything appended: the buffer is written) along with its
// pending index entries.
func (l *Log) publish(readable int64) {
	seg := l.active
	l.mu.Lock()
	seg.readable = readable
	seg.entries = append(seg.entries, seg.pending...)
	l.readEnd = l.next.Load()
	l.mu.Unlock()
	seg.pending = seg.pending[:0]
}

// Sync writes the buffer and the new index entries of the active segment
// and fsyncs the segment's .log file: on return every appended batch is
// durable and SyncedOffset() == NextOffset(). This is the group commit
// point: append many batches, then Sync once.
//
// Index files are not written here: the active segment's index lives in
// memory (Open rebuilds the last segment's by a scan) and is written and
// fsynced whole when the segment is rolled (sealIndex). Writer only. Errors: ErrClosed; the sticky write error.
func (l *Log) Sync() error {
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.flush(); err != nil {
		return err
	}
	if !l.dirty && l.synced.Load() >= l.next.Load() {
		return nil // (a SyncPoint not synced yet leaves synced behind)
	}
	seg := l.active
	if err := seg.f.Sync(); err != nil {
		return l.fail(fmt.Errorf("sync %s: %w", seg.path(logSuffix), err))
	}
	l.dirty = false
	l.raiseSynced(l.next.Load())
	l.evict()
	return nil
}

// raiseSynced moves SyncedOffset up to n, never down: the writer's Sync
// and a SyncPoint's MarkSynced may race.
func (l *Log) raiseSynced(n int64) {
	for {
		s := l.synced.Load()
		if n <= s || l.synced.CompareAndSwap(s, n) {
			return
		}
	}
}

// roll syncs the active segment and writes its index files, which will
// not change again (so Open can trust them), and starts a new segment at
// base.
// The new segment's data can thus never be durable before the old one's.
func (l *Log) roll(base int64) error {
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.flush(); err != nil {
		return err
	}
	if l.fill != nil {
		l.fill.release(l.active)
	}
	if err := l.trimAlloc(l.active); err != nil {
		return l.fail(err)
	}
	if err := l.Sync(); err != nil {
		return err
	}
	if err := l.active.sealIndex(); err != nil {
		return l.fail(err)
	}
	seg, err := createSegment(l.dir, base)
	if err != nil {
		return l.fail(err)
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, seg)
	l.keepIndex(l.active)
	l.mu.Unlock()
	l.preallocOff = false
	l.active = seg
	return nil
}
