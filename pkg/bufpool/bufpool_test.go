package bufpool

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestGetPut(t *testing.T) {
	p := New()
	for _, n := range []int{0, 1, 256, 257, 16 << 10, 1<<20 + 1, 8 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		if n <= 4<<20 && cap(*b) < n {
			t.Fatalf("Get(%d): capacity %d", n, cap(*b))
		}
		p.Put(b)
	}
	// A returned buffer comes back for a request of its tier.
	b := p.Get(300)
	(*b)[0] = 7
	p.Put(b)
	again := p.Get(4 << 10)
	if cap(*again) != 4<<10 || len(*again) != 4<<10 {
		t.Fatalf("tier buffer: len %d cap %d", len(*again), cap(*again))
	}
	// A buffer of a capacity no tier has is dropped, not pooled.
	odd := make([]byte, 10, 1000)
	p.Put(&odd)
}

// TestCodecRoundTrip: large and small messages marshal through the pool
// and unmarshal from a message split over several buffers (as one that
// arrived in several HTTP/2 frames is), equal to the original, also when
// the pool hands out buffers full of old bytes.
func TestCodecRoundTrip(t *testing.T) {
	p := New()
	for range 4 { // dirty every tier
		for _, s := range tierSizes {
			b := p.Get(s)
			for i := range *b {
				(*b)[i] = 0xEE
			}
			p.Put(b)
		}
	}
	c := Codec(p)
	if c.Name() != "proto" {
		t.Fatalf("name %q", c.Name())
	}
	for _, n := range []int{0, 10, 1 << 10, 300 << 10, 2 << 20} {
		in := &wrapperspb.BytesValue{Value: bytes.Repeat([]byte{0x5A}, n)}
		data, err := c.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		flat := data.Materialize()
		data.Free()
		// Split the encoding into 3 buffers.
		var split mem.BufferSlice
		for _, part := range [][]byte{flat[:len(flat)/3], flat[len(flat)/3 : 2*len(flat)/3], flat[2*len(flat)/3:]} {
			split = append(split, mem.SliceBuffer(part))
		}
		out := &wrapperspb.BytesValue{}
		if err := c.Unmarshal(split, out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Value, in.Value) {
			t.Fatalf("%d bytes: round trip differs", n)
		}
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Fatal("marshalled a string")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &wrapperspb.BytesValue{}); err == nil {
		t.Fatal("unmarshalled garbage")
	}
}
