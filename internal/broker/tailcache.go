package broker

import "fmt"

// tailCache keeps a partition's newest committed batches in RAM so live
// readers never touch disk. It is bounded by bytes; the newest batch is
// always kept.
//
// Lock: the partition's mu. Batches in it are read-only once added.
type tailCache struct {
	entries []tailEntry // ordered by base offset, contiguous
	bytes   int64
	max     int64
	// store is the array entries lives in, from its start: entries drops
	// its oldest from the front, and add moves the rest back to store's
	// start instead of growing a new array while half of it is free.
	store []tailEntry
}

type tailEntry struct {
	base int64 // first offset of the batch
	next int64 // offset after its last record
	data []byte
}

// add appends a committed batch.
// REQUIRES: base equals the previous entry's next (the log is dense).
func (c *tailCache) add(base, next int64, data []byte) {
	if n := len(c.entries); n > 0 && c.entries[n-1].next != base {
		panic(fmt.Sprintf("tailcache: gap: last next %d, adding base %d", c.entries[n-1].next, base))
	}
	if n := len(c.entries); n == cap(c.entries) {
		if n <= cap(c.store)/2 {
			copy(c.store, c.entries)
			clear(c.store[n:])
		} else {
			c.store = make([]tailEntry, max(2*n, 64))
			copy(c.store, c.entries)
		}
		c.entries = c.store[:n]
	}
	c.entries = append(c.entries, tailEntry{base: base, next: next, data: data})
	c.bytes += int64(len(data))
	drop := 0
	for c.bytes > c.max && drop < len(c.entries)-1 {
		c.bytes -= int64(len(c.entries[drop].data))
		c.entries[drop] = tailEntry{}
		drop++
	}
	if drop > 0 {
		c.entries = c.entries[drop:]
	}
}

// reset empties the cache (after a truncation or a storage failure).
func (c *tailCache) reset() {
	clear(c.store)
	c.entries = c.store[:0]
	c.bytes = 0
}

// read returns the cached batches starting with the one holding offset, up
// to maxBytes (at least one batch), and whether the cache covered offset.
// The returned slices are shared and must not be modified.
func (c *tailCache) read(offset int64, maxBytes int) ([][]byte, bool) {
	if len(c.entries) == 0 || offset < c.entries[0].base {
		return nil, false
	}
	lo, hi := 0, len(c.entries)
	for lo < hi { // first entry with next > offset
		mid := (lo + hi) / 2
		if c.entries[mid].next <= offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	var out [][]byte
	size := 0
	for i := lo; i < len(c.entries); i++ {
		if len(out) > 0 && size+len(c.entries[i].data) > maxBytes {
			break
		}
		out = append(out, c.entries[i].data)
		size += len(c.entries[i].data)
	}
	return out, true
}
