// Package dedup recognises a publish that was already stored: a client
// that retries a batch after losing the acknowledgement sends the same
// records, with the same message ids, in the same batch (the SDK does),
// and the partition answers with the offsets the first copy got instead
// of storing it twice.
//
// A Window remembers the batches a partition stored recently, bounded by
// count and age. It is derived from the partition's log alone (what was
// appended, in order), so on a cluster every replica holds the same
// window for the same log, and a new leader recognises the retries of
// batches its predecessor stored. Not safe for concurrent use: a
// partition's writer (or its Raft group's goroutine) owns it.
package dedup

import (
	"encoding/binary"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Key identifies a batch by its first message id, its record count and
// its size. Offsets, Raft positions and timestamps, which the broker may
// set (a record published without a timestamp gets the broker's time, so
// a retry's differs), are not in it. Message ids are unique by contract:
// another batch with the same first id, count and size within the window
// is taken for a retry.
type Key struct {
	FirstID     record.MessageID
	Count, Size uint32
}

// KeyOf returns the key of a whole, valid batch; false when its first
// record carries no message id (the broker assigns ids: nothing to match).
func KeyOf(b []byte) (Key, bool) {
	h, err := record.ParseHeader(b)
	if err != nil {
		return Key{}, false
	}
	return KeyOfHeader(h, b)
}

// KeyOfHeader is KeyOf for a batch whose header h was parsed already.
func KeyOfHeader(h record.BatchHeader, b []byte) (Key, bool) {
	if len(b) < h.Size() || h.Size() < record.BatchHeaderSize {
		return Key{}, false
	}
	recs := b[record.BatchHeaderSize:h.Size()]
	// The first record: body length (uvarint), offset delta 0 and
	// timestamp delta 0 (one byte each in a valid batch), the id.
	_, n := binary.Uvarint(recs)
	if n <= 0 || len(recs) < n+2+16 {
		return Key{}, false
	}
	k := Key{Count: h.RecordCount, Size: uint32(h.Size())}
	copy(k.FirstID[:], recs[n+2:n+2+16])
	if k.FirstID.IsZero() {
		return Key{}, false
	}
	return k, true
}

// Defaults of a Window's bounds.
const (
	DefaultMaxAge     = 2 * time.Minute
	DefaultMaxBatches = 10000
)

// Options bound a Window. A batch is forgotten once MaxBatches newer ones
// were stored or it is older than MaxAge, whichever comes first.
type Options struct {
	MaxAge     time.Duration
	MaxBatches int
}

type entry struct {
	key  Key
	base int64
	at   time.Time
}

// Window is the recent batches of one partition, oldest first.
type Window struct {
	opts  Options
	bases map[Key]int64
	fifo  []entry // in log order; fifo[head:] are live
	head  int
}

// New returns an empty window; nil when the options disable it
// (MaxBatches <= 0 or MaxAge <= 0). A nil *Window is valid and empty.
func New(opts Options) *Window {
	if opts.MaxBatches <= 0 || opts.MaxAge <= 0 {
		return nil
	}
	return &Window{opts: opts, bases: make(map[Key]int64)}
}

// Add records that the batch with key k was stored at offset base, at
// time now (its append, or the batch's timestamp when rebuilt from the
// log). Batches are added in log order.
func (w *Window) Add(k Key, base int64, now time.Time) {
	if w == nil {
		return
	}
	w.expire(now)
	w.bases[k] = base // a batch stored twice (before it was known) maps to its newest copy
	w.fifo = append(w.fifo, entry{k, base, now})
	for len(w.fifo)-w.head > w.opts.MaxBatches {
		w.drop()
	}
	if w.head > 1024 && w.head > len(w.fifo)/2 { // reclaim the consumed prefix, in place
		n := copy(w.fifo, w.fifo[w.head:])
		clear(w.fifo[n:])
		w.fifo = w.fifo[:n]
		w.head = 0
	}
}

// Lookup returns the offset the batch with key k was stored at, if it was
// stored within the window (as of now).
func (w *Window) Lookup(k Key, now time.Time) (base int64, ok bool) {
	if w == nil {
		return 0, false
	}
	w.expire(now)
	base, ok = w.bases[k]
	return base, ok
}

// TruncateFrom forgets the batches stored at offset off or later: the log
// was cut there (a new Raft leader replaced an uncommitted suffix).
func (w *Window) TruncateFrom(off int64) {
	if w == nil {
		return
	}
	for n := len(w.fifo); n > w.head && w.fifo[n-1].base >= off; n = len(w.fifo) {
		e := w.fifo[n-1]
		if w.bases[e.key] == e.base {
			delete(w.bases, e.key)
		}
		w.fifo = w.fifo[:n-1]
	}
}

// Len is the number of batches remembered.
func (w *Window) Len() int {
	if w == nil {
		return 0
	}
	return len(w.fifo) - w.head
}

func (w *Window) expire(now time.Time) {
	cutoff := now.Add(-w.opts.MaxAge)
	for w.head < len(w.fifo) && w.fifo[w.head].at.Before(cutoff) {
		w.drop()
	}
}

// drop forgets the oldest batch.
func (w *Window) drop() {
	e := w.fifo[w.head]
	if w.bases[e.key] == e.base {
		delete(w.bases, e.key)
	}
	w.fifo[w.head] = entry{}
	w.head++
}
