package replication

import "fmt"

// posIndex holds the position of every entry in a LogStore's window, in
// chunks of posChunk entries. One contiguous slice would be copied whole
// each time it grows, and again by each compaction: at a partition's
// steady 4,500 entries a second that was tens of megabytes copied on the
// Ready loop every minute or so, freshly faulted-in memory included, a
// stall of 30-360 ms for every record in flight, growing with the log.
// Appending here never copies an entry, and dropping entries from the
// front frees whole chunks.
//
// An entry takes 13 bytes: the offset after its records, its size and
// its flags. Its first offset is the previous entry's end (the window is
// dense: LogStore appends each entry where the last one ended), and its
// term is kept once per run of entries of the same term.
type posIndex struct {
	chunks []*posChunkData // entries from chunks[0] slot head on
	head   int
	n      int
	base   int64 // the first offset of the window's first entry
}

// posChunk entries make a chunk (about 52 KiB).
const posChunk = 4096

type posChunkData struct {
	next  [posChunk]int64
	bytes [posChunk]uint32
	flags [posChunk]uint8
	// terms: each run's first slot and term, in slot order.
	terms []termRun
}

type termRun struct {
	from int
	term uint64
}

const (
	posSide = 1 << iota
	posCut
)

func (x *posIndex) len() int { return x.n }

// slot returns the chunk and slot of entry i of the window.
func (x *posIndex) slot(i int) (*posChunkData, int) {
	j := x.head + i
	return x.chunks[j/posChunk], j % posChunk
}

// start returns the first offset of entry i: the end of the one before.
func (x *posIndex) start(i int) int64 {
	if i == 0 {
		return x.base
	}
	c, k := x.slot(i - 1)
	return c.next[k]
}

// at returns entry i of the window (0 is the first).
func (x *posIndex) at(i int) entryPos {
	c, k := x.slot(i)
	return entryPos{term: c.termAt(k), off: x.start(i), next: c.next[k], bytes: int32(c.bytes[k]), side: c.flags[k]&posSide != 0, cut: c.flags[k]&posCut != 0}
}

// term returns the term of entry i of the window.
func (x *posIndex) term(i int) uint64 {
	c, k := x.slot(i)
	return c.termAt(k)
}

// termAt returns the term of slot k.
func (c *posChunkData) termAt(k int) uint64 {
	for r := len(c.terms) - 1; r >= 0; r-- {
		if c.terms[r].from <= k {
			return c.terms[r].term
		}
	}
	return 0
}

// headChunk returns how many of the window's entries lie in its first
// chunk.
func (x *posIndex) headChunk() int { return min(posChunk-x.head, x.n) }

// push appends p to the window. REQUIRES: p starts where the last entry
// ends (p.off == last().next), p.bytes >= 0.
func (x *posIndex) push(p entryPos) {
	if x.n == 0 {
		*x = posIndex{base: p.off}
	} else if end := x.start(x.n); p.off != end {
		panic(fmt.Sprintf("posIndex: an entry at offset %d after one ending at %d", p.off, end))
	}
	j := x.head + x.n
	if j/posChunk == len(x.chunks) {
		x.chunks = append(x.chunks, new(posChunkData))
	}
	c, k := x.chunks[j/posChunk], j%posChunk
	c.next[k] = p.next
	c.bytes[k] = uint32(p.bytes)
	var f uint8
	if p.side {
		f |= posSide
	}
	if p.cut {
		f |= posCut
	}
	c.flags[k] = f
	// Runs from a truncated tail are dropped first.
	for len(c.terms) > 0 && c.terms[len(c.terms)-1].from >= k {
		c.terms = c.terms[:len(c.terms)-1]
	}
	if len(c.terms) == 0 || c.terms[len(c.terms)-1].term != p.term {
		c.terms = append(c.terms, termRun{k, p.term})
	}
	x.n++
}

// truncate keeps the window's first n entries.
func (x *posIndex) truncate(n int) {
	if n >= x.n {
		return
	}
	if n == 0 {
		*x = posIndex{}
		return
	}
	x.n = n
	keep := (x.head + n + posChunk - 1) / posChunk
	clear(x.chunks[keep:])
	x.chunks = x.chunks[:keep]
}

// dropFront drops the window's first k entries.
func (x *posIndex) dropFront(k int) {
	if k >= x.n {
		*x = posIndex{}
		return
	}
	if k == 0 {
		return
	}
	x.base = x.start(k)
	x.head += k
	x.n -= k
	if d := x.head / posChunk; d > 0 {
		clear(x.chunks[:d])
		x.chunks = x.chunks[d:]
		x.head -= d * posChunk
	}
}

// appendRange appends entries [lo, hi) of the window to dst.
func (x *posIndex) appendRange(dst []entryPos, lo, hi int) []entryPos {
	for i := lo; i < hi; i++ {
		dst = append(dst, x.at(i))
	}
	return dst
}
