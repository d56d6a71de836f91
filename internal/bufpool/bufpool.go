// Package bufpool is the buffer pool of Hermes' gRPC servers: gRPC takes
// a buffer for every frame and message it reads. gRPC's default pool
// zeroes each buffer it hands out; at hundreds of MB/s of record batches
// that clearing alone took 4-5% of a broker's CPU. gRPC fills every byte
// of a buffer it reads into before using it, so this pool hands buffers
// out as they were returned.
package bufpool

import "sync"

// tierSizes are the capacities pooled: gRPC's frame and message sizes.
var tierSizes = []int{256, 4 << 10, 16 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20}

// Pool implements gRPC's mem.BufferPool. Buffers larger than the largest
// tier are allocated and dropped.
type Pool struct {
	tiers []tier
}

type tier struct {
	size int
	pool sync.Pool
}

// New returns an empty pool.
func New() *Pool {
	p := &Pool{tiers: make([]tier, len(tierSizes))}
	for i, s := range tierSizes {
		p.tiers[i].size = s
	}
	return p
}

// Get returns a buffer of length n; its bytes are whatever its last user
// left.
func (p *Pool) Get(n int) *[]byte {
	for i := range p.tiers {
		t := &p.tiers[i]
		if n > t.size {
			continue
		}
		if v, ok := t.pool.Get().(*[]byte); ok {
			*v = (*v)[:n]
			return v
		}
		b := make([]byte, n, t.size)
		return &b
	}
	b := make([]byte, n)
	return &b
}

// Put returns a buffer Get handed out (or a prefix of one).
func (p *Pool) Put(b *[]byte) {
	c := cap(*b)
	for i := range p.tiers {
		if t := &p.tiers[i]; t.size == c {
			*b = (*b)[:0]
			t.pool.Put(b)
			return
		}
	}
}
