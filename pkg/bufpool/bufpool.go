// Package bufpool is the gRPC buffer pool of Hermes' servers and of its
// Go client: gRPC takes a buffer for every frame and message it reads
// and for every large message it writes. gRPC's default pool zeroes each
// buffer it hands out; at hundreds of MB/s of record batches that
// clearing alone took 4-5% of a broker's CPU and 8% of a producer's.
// gRPC fills every byte of a buffer it uses, so this pool hands buffers
// out as they were returned.
package bufpool

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

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

// Codec returns gRPC's protobuf codec with its buffers taken from pool
// instead of gRPC's default pool, which zeroes every buffer it hands out:
// the buffer a large message is marshalled into, and the one a message
// that arrived in several frames is gathered into before it is decoded.
// Servers install it with grpc.ForceServerCodecV2, clients with
// grpc.ForceCodecV2.
func Codec(pool mem.BufferPool) encoding.CodecV2 { return codec{pool} }

type codec struct{ pool mem.BufferPool }

func (c codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto: cannot marshal %T, want proto.Message", v)
	}
	// UseCachedSize is safe because Size has just computed it and the
	// message is not changed while gRPC sends it.
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto: cannot unmarshal into %T, want proto.Message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}
