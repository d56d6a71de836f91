package bufpool

import "testing"

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
