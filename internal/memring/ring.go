// Package memring is the bounded in-memory ring that holds the records a
// partition receives in the `performance` delivery mode: they never reach
// disk, get their own dense offsets starting at 0, and are fanned out to
// live subscribers. The ring is bounded by record count and by bytes; when
// it is full the oldest records are evicted, and a reader that falls
// behind them learns how many it lost (Read's missed, Evicted): loss is
// counted, never silent.
//
// Memory ownership: Append copies each record's key, header values and
// payload into memory of the ring's (small records share 64 KiB chunks, so
// appending costs no allocation per record), which is never written again.
// Eviction only drops the ring's reference to it, so records returned by
// Read stay valid and unchanged for as long as a reader holds them, no
// matter what is appended later. Readers share that memory with each other
// and must treat it as read-only.
package memring

import (
	"sync"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Defaults of Options.
const (
	DefaultMaxRecords       = 65536
	DefaultMaxBytes   int64 = 64 << 20
)

// minCapacity is the ring's first allocation; it doubles up to MaxRecords,
// so an idle partition does not cost MaxRecords slots.
const minCapacity = 64

// Options bound a Ring. Zero (or negative) fields take their defaults.
type Options struct {
	// MaxRecords bounds the records retained. Default DefaultMaxRecords.
	MaxRecords int
	// MaxBytes bounds the retained key, header (key and value) and payload
	// bytes. A record larger than MaxBytes on its own is evicted as soon
	// as it is appended. Default DefaultMaxBytes.
	MaxBytes int64
}

// Ring is a bounded FIFO of records with dense offsets. It is safe for
// concurrent use: one mutex guards it, held for O(records) per call (and,
// on Append, while copying the appended records' bytes).
type Ring struct {
	opts Options

	mu sync.Mutex
	// buf is a circular buffer of retained records, oldest at head.
	// Invariant: n <= len(buf) <= opts.MaxRecords.
	buf  []record.Record
	head int
	n    int
	// start is the offset of the oldest retained record; start+n is the
	// next offset to assign. Invariant: start == evicted.
	start int64
	// bytes is the sum of size() over retained records.
	// Invariant (between calls): bytes <= opts.MaxBytes.
	bytes   int64
	evicted int64
	// wake is closed by the next Append that adds records; nil until a
	// Wait asks for it.
	wake chan struct{}
	// chunk is the memory small records are copied into: its bytes up to
	// len are taken (and never written again), the rest is free.
	chunk []byte
}

// Records of at most maxChunkRecord bytes (key, header values, payload)
// are copied into shared chunks of chunkBytes; larger ones get an
// allocation of their own. A chunk lives as long as any record in it
// (retained, or held by a reader).
const (
	chunkBytes     = 64 << 10
	maxChunkRecord = 4 << 10
)

// New returns an empty ring bounded by opts.
func New(opts Options) *Ring {
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = DefaultMaxRecords
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	return &Ring{opts: opts}
}

// Append copies recs into the ring with offsets first, first+1, ..., and
// returns first. The caller keeps ownership of recs and may reuse their
// buffers at once; recs' Offset fields are ignored (and not modified). To
// stay within MaxRecords and MaxBytes it evicts the oldest records, which
// may include some of recs if recs alone exceed a bound; evictions are
// counted in Evicted. Waiters (Wait) are woken if recs is not empty.
func (r *Ring) Append(recs []record.Record) (first int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first = r.start + int64(r.n)
	for i := range recs {
		c := record.Clone(&recs[i], r.alloc)
		c.Offset = first + int64(i)
		r.push(c)
	}
	if len(recs) > 0 && r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	return first
}

// alloc returns an empty slice with room for n bytes that no one else
// will write: from the current chunk when n is small (so small records
// cost no allocation of their own), else a new allocation. Lock must be
// held.
func (r *Ring) alloc(n int) []byte {
	if n > maxChunkRecord {
		return make([]byte, 0, n)
	}
	if cap(r.chunk)-len(r.chunk) < n {
		r.chunk = make([]byte, 0, chunkBytes)
	}
	at := len(r.chunk)
	r.chunk = r.chunk[:at+n]
	return r.chunk[at : at : at+n]
}

// push appends rec and evicts to restore the bounds. Lock must be held.
func (r *Ring) push(rec record.Record) {
	if r.n == r.opts.MaxRecords {
		r.evictOldest()
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = rec
	r.n++
	r.bytes += size(&rec)
	for r.bytes > r.opts.MaxBytes {
		r.evictOldest()
	}
}

// evictOldest drops the oldest record. Lock must be held; r.n > 0.
func (r *Ring) evictOldest() {
	old := &r.buf[r.head]
	r.bytes -= size(old)
	*old = record.Record{} // drop the references so readers alone keep the bytes alive
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.start++
	r.evicted++
}

// grow doubles the buffer, up to MaxRecords. Lock must be held;
// r.n == len(r.buf) < MaxRecords.
func (r *Ring) grow() {
	nb := make([]record.Record, min(max(2*len(r.buf), minCapacity), r.opts.MaxRecords))
	for i := range r.n {
		nb[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = nb, 0
}

// Read appends to dst[:0] up to limit records with offsets >= from, in offset
// order, and returns them, the next offset to read, and missed: how many
// records in [from, Start()) were evicted before this read (missed > 0
// means this reader lost records; the result then starts at Start()).
// A from at or past End() returns nothing and next = End(). limit <= 0
// returns nothing and next = the first offset it would have read.
//
// The returned records share their byte slices with other readers and
// stay valid forever (see the package comment); they must not be modified.
func (r *Ring) Read(from int64, limit int, dst []record.Record) (recs []record.Record, next int64, missed int64) {
	recs = dst[:0]
	from = max(from, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.start + int64(r.n)
	if from < r.start {
		missed, from = r.start-from, r.start
	}
	if from >= end {
		return recs, end, missed
	}
	k := int(min(end-from, int64(max(limit, 0))))
	i := r.head + int(from-r.start)
	for range k {
		recs = append(recs, r.buf[i%len(r.buf)])
		i++
	}
	return recs, from + int64(k), missed
}

// Wait returns a channel that is closed by the next Append of at least one
// record. Every caller between two Appends gets the same channel; after an
// Append a new one is made. To wait without missing an Append, take the
// channel before the Read that comes back empty:
//
//	for {
//		ch := r.Wait()
//		recs, next, missed = r.Read(next, limit, recs)
//		if len(recs) > 0 || missed > 0 {
//			break
//		}
//		<-ch // or select on it with the subscriber's context
//	}
func (r *Ring) Wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return r.wake
}

// Start returns the offset of the oldest retained record (End() if none).
func (r *Ring) Start() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start
}

// End returns the offset the next appended record will get.
func (r *Ring) End() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start + int64(r.n)
}

// Evicted returns how many records have been evicted since New.
func (r *Ring) Evicted() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.evicted
}

// Stats returns the retained record count and bytes.
func (r *Ring) Stats() (records int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.bytes
}
