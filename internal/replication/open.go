package replication

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

// LogOptions configure the data log of a group opened with Open.
type LogOptions struct {
	// SegmentBytes, RetentionAge and RetentionBytes as in partlog.Options
	// (zero: partlog's defaults; no retention).
	SegmentBytes   int64
	RetentionAge   time.Duration
	RetentionBytes int64
	// DedupWindow and DedupMaxBatches bound the duplicate window (see
	// internal/dedup); DedupMaxBatches < 0 turns it off.
	DedupWindow     time.Duration
	DedupMaxBatches int
}

// ErrOffsetOutOfRange: a read below the log's start or past its end (the
// data log's error, for readers of LogReader).
var ErrOffsetOutOfRange = partlog.ErrOffsetOutOfRange

// LogReader reads a group's data log. It is what replication lets others
// do with a log it owns: read, never write. Every method is safe for
// concurrent use, with the group's writes too.
type LogReader interface {
	// Read returns whole batches from the one holding offset on, at most
	// about maxBytes (at least one batch), none at or past limit. The
	// returned bytes are the caller's. ErrOffsetOutOfRange below the
	// start or past the end.
	Read(offset int64, maxBytes int, limit int64) ([]byte, error)
	// OffsetForTime returns the first offset whose timestamp is at or
	// after ts (Unix ns), or the log's end when there is none.
	OffsetForTime(ts int64) (int64, error)
	// StartOffset is the oldest offset kept (retention moves it).
	StartOffset() int64
	// Size is the bytes of the log's files.
	Size() int64
}

// dedupRebuildRecords bounds how far back from the end of its log a group
// looks, at open, for the batches of its duplicate window.
const dedupRebuildRecords = 100_000

// Open opens (creating or recovering) the data log in dir and the group's
// Raft log over it (see OpenLogStore), fills the duplicate window from the
// log's newest batches, and starts the replica. The replica owns the log
// from then on: Stop closes it, Delete removes it.
func Open(cfg Config, dir string, lo LogOptions, ms *meta.Store, tr Transport) (*Replica, error) {
	cfg.defaults()
	log, err := partlog.Open(dir, partlog.Options{
		SegmentBytes: lo.SegmentBytes, RetentionAge: lo.RetentionAge, RetentionBytes: lo.RetentionBytes,
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Group, err)
	}
	store, err := OpenLogStore(cfg.Group, log, ms)
	if err != nil {
		log.Close()
		return nil, err
	}
	if lo.DedupMaxBatches >= 0 {
		w := dedup.New(dedup.Options{MaxAge: lo.DedupWindow, MaxBatches: lo.DedupMaxBatches})
		if err := fillDedup(w, log); w != nil && err != nil {
			log.Close()
			return nil, fmt.Errorf("%s: %w", cfg.Group, err)
		}
		store.SetDedup(w)
	}
	r, err := NewReplica(cfg, store, tr)
	if err != nil {
		log.Close()
		return nil, err
	}
	r.ownsLog = true
	return r, nil
}

// fillDedup fills w from the newest batches of the log (those a restart
// should still recognise); their age counts from now.
func fillDedup(w *dedup.Window, log *partlog.Log) error {
	end := log.NextOffset()
	now := time.Now()
	for off := max(log.StartOffset(), end-dedupRebuildRecords); off < end; {
		raw, err := log.Read(off, 4<<20, end)
		if err != nil {
			return fmt.Errorf("read for the duplicate window: %w", err)
		}
		if len(raw) == 0 {
			break
		}
		for len(raw) > 0 {
			h, err := record.ParseHeader(raw)
			if err != nil {
				return fmt.Errorf("read for the duplicate window: %w", err)
			}
			if k, ok := dedup.KeyOfHeader(h, raw); ok {
				w.Add(k, h.BaseOffset, now)
			}
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	return nil
}

// Log returns the group's data log, to read.
func (r *Replica) Log() LogReader { return r.store.log }

// Committed returns the offset after every committed record: the high
// watermark as this replica knows it.
func (r *Replica) Committed() int64 {
	hs, _, _ := r.store.InitialState()
	return r.store.OffsetAfter(hs.GetCommit())
}

// EnforceRetention compacts the Raft log up to where the log's retention
// (age and size, as opened) cuts at now, deleting the whole segments
// below; see CompactBefore.
func (r *Replica) EnforceRetention(now time.Time) error {
	return r.CompactBefore(func() int64 { return r.store.log.RetentionBoundary(now) })
}

// Delete removes the group's data log and Raft state from this node, after
// Stop (its partition left the node or was deleted).
//
// REQUIRES: the replica is stopped.
func (r *Replica) Delete(ms *meta.Store) error {
	var errs []error
	if err := r.store.log.Delete(); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := ms.DeleteRaftState(r.cfg.Group); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
