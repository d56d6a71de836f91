package replication

import (
	"errors"
	"fmt"
	"log/slog"
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
	// CacheBytes and PreallocateBytes as in partlog.Options (zero: its
	// defaults).
	CacheBytes       int64
	PreallocateBytes int64
	PreallocateWrite bool
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
	// ReadAppend is Read appending the batches to dst (returned
	// unchanged when Read would return nil).
	ReadAppend(dst []byte, offset int64, maxBytes int, limit int64) ([]byte, error)
	// OffsetForTime returns the first offset whose timestamp is at or
	// after ts (Unix ns), or the log's end when there is none.
	OffsetForTime(ts int64) (int64, error)
	// StartOffset is the oldest offset kept (retention moves it).
	StartOffset() int64
	// Size is the bytes of the log's files.
	Size() int64
	// BatchAt returns the offsets of the batch holding offset, from the
	// headers alone: a reader that found it damaged goes on after it.
	BatchAt(offset int64) (base, next int64, err error)
}

// dedupRebuildRecords bounds how far back from the end of its log a group
// looks, at open, for the batches of its duplicate window.
const dedupRebuildRecords = 100_000

// Stored is a group's data log and Raft log, opened and recovered, before
// its replica starts: what the group's owner reads to rebuild its state
// first (the metadata group replays its commands).
type Stored struct {
	group string
	log   *partlog.Log
	store *LogStore
}

// OpenStored opens (creating or recovering) the data log in dir and the
// group's Raft log over it (see OpenLogStore), and fills the duplicate
// window from the log's newest batches. Start the replica with Start, or
// give the log back with Close.
func OpenStored(group, dir string, lo LogOptions, ms *meta.Store, logger *slog.Logger) (*Stored, error) {
	if logger == nil {
		logger = slog.Default()
	}
	log, err := partlog.Open(dir, partlog.Options{
		SegmentBytes: lo.SegmentBytes, RetentionAge: lo.RetentionAge, RetentionBytes: lo.RetentionBytes,
		CacheBytes: lo.CacheBytes, PreallocateBytes: lo.PreallocateBytes, PreallocateWrite: lo.PreallocateWrite, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", group, err)
	}
	store, err := OpenLogStore(group, log, ms, logger)
	if err != nil {
		log.Close()
		return nil, err
	}
	if lo.DedupMaxBatches >= 0 {
		w := dedup.New(dedup.Options{MaxAge: lo.DedupWindow, MaxBatches: lo.DedupMaxBatches})
		if err := fillDedup(w, log); w != nil && err != nil {
			log.Close()
			return nil, fmt.Errorf("%s: %w", group, err)
		}
		store.SetDedup(w)
	}
	return &Stored{group: group, log: log, store: store}, nil
}

// Log reads the group's data log.
func (s *Stored) Log() LogReader { return s.log }

// Snapshot returns the owner's state at the compaction point and the
// partition offset after it (nil, 0 before any compaction).
func (s *Stored) Snapshot() ([]byte, int64) { return s.store.SnapshotState() }

// Committed is the offset after every record known committed.
func (s *Stored) Committed() int64 {
	hs, _, _ := s.store.InitialState()
	return s.store.OffsetAfter(hs.GetCommit())
}

// Close gives the log back without starting the replica.
func (s *Stored) Close() error { return s.log.Close() }

// Start starts the group's replica over the stored logs; it owns the log
// from then on (Stop closes it, Delete removes it).
func (s *Stored) Start(cfg Config, tr Transport) (*Replica, error) {
	if cfg.Group == "" {
		cfg.Group = s.group
	}
	r, err := NewReplica(cfg, s.store, tr)
	if err != nil {
		return nil, err
	}
	r.ownsLog = true
	return r, nil
}

// Open opens the group's logs in dir (OpenStored) and starts its replica
// (Start); on failure the log is closed.
func Open(cfg Config, dir string, lo LogOptions, ms *meta.Store, tr Transport) (*Replica, error) {
	st, err := OpenStored(cfg.Group, dir, lo, ms, cfg.Logger)
	if err != nil {
		return nil, err
	}
	r, err := st.Start(cfg, tr)
	if err != nil {
		st.Close()
		return nil, err
	}
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

// RepairBatch puts good, another replica's copy of a batch of this
// replica's log, in place of this replica's copy, whose bytes were
// damaged on the disk (see partlog.Log.Repair): the replicas' logs hold
// the same batches, byte for byte. False when the batch here was good.
func (r *Replica) RepairBatch(good []byte) (bool, error) { return r.store.log.Repair(good) }

// LogEnd is the offset after the last record in this replica's log,
// committed or not.
func (r *Replica) LogEnd() int64 {
	last, _ := r.store.LastIndex()
	return r.store.OffsetAfter(last)
}

// FirstIndex is the index of the first entry of the group's Raft log
// kept here (the one after the compaction point).
func (r *Replica) FirstIndex() uint64 {
	i, _ := r.store.FirstIndex()
	return i
}

// Committed returns the offset after every committed record: the high
// watermark as this replica knows it.
func (r *Replica) Committed() int64 {
	hs, _, _ := r.store.InitialState()
	return r.store.OffsetAfter(hs.GetCommit())
}

// SetRetention changes the retention of the replica's data log (as
// LogOptions); the next EnforceRetention applies it.
func (r *Replica) SetRetention(age time.Duration, bytes int64) {
	r.store.log.SetRetention(age, bytes)
}

// SetFloor records that the data log's records below offset are deleted;
// the next EnforceRetention drops the segments wholly below it.
func (r *Replica) SetFloor(offset int64) { r.store.log.SetFloor(offset) }

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

// EpochEnd returns, for a Raft term e, the largest term at or below e in
// the retained log and the offset where that term's records end (see
// LogStore.EpochEnd).
func (r *Replica) EpochEnd(e uint64) (term uint64, end int64, ok bool) {
	return r.store.EpochEnd(e)
}
