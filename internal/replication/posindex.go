package replication

// posIndex holds the position of every entry in a LogStore's window, in
// chunks of posChunk entries. One contiguous slice would be copied whole
// each time it grows, and again by each compaction: at a partition's
// steady 4,500 entries a second that was tens of megabytes copied on the
// Ready loop every minute or so, freshly faulted-in memory included, a
// stall of 30-130 ms for every record in flight, growing with the log.
// Appending here never copies an entry, and dropping entries from the
// front frees whole chunks.
type posIndex struct {
	chunks [][]entryPos // each posChunk long; entries from chunks[0][head] on
	head   int
	n      int
}

// posChunk entries make a chunk (128 KiB).
const posChunk = 4096

func (x *posIndex) len() int { return x.n }

// at returns entry i of the window (0 is the first).
func (x *posIndex) at(i int) entryPos {
	j := x.head + i
	return x.chunks[j/posChunk][j%posChunk]
}

// last returns the window's last entry. REQUIRES: len() > 0.
func (x *posIndex) last() entryPos { return x.at(x.n - 1) }

// push appends p to the window.
func (x *posIndex) push(p entryPos) {
	j := x.head + x.n
	if j/posChunk == len(x.chunks) {
		x.chunks = append(x.chunks, make([]entryPos, posChunk))
	}
	x.chunks[j/posChunk][j%posChunk] = p
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
	for i := lo; i < hi; {
		j := x.head + i
		c := x.chunks[j/posChunk][j%posChunk:]
		c = c[:min(len(c), hi-i)]
		dst = append(dst, c...)
		i += len(c)
	}
	return dst
}
