package broker

import (
	"bytes"
	"testing"
)

// The cache keeps the newest batches within its byte bound, reads from any
// offset it holds, and, once warm, adds without allocating: dropping the
// oldest batches from the front must not make every add grow a new array.
func TestTailCacheBoundAndReads(t *testing.T) {
	c := tailCache{max: 100 * 10}
	var batches [256][]byte
	for i := range batches {
		batches[i] = bytes.Repeat([]byte{byte(i)}, 10)
	}
	data := func(off int64) []byte { return batches[byte(off)] }
	next := int64(0)
	add := func() {
		// a batch of 2 records per 10 bytes
		c.add(next, next+2, data(next))
		next += 2
	}
	for range 5000 {
		add()
	}
	if c.bytes > c.max || len(c.entries) != 100 {
		t.Fatalf("%d bytes in %d entries, bound %d", c.bytes, len(c.entries), c.max)
	}
	first := c.entries[0].base
	if first != next-200 {
		t.Fatalf("oldest cached offset %d, want %d", first, next-200)
	}
	if _, ok := c.read(first-1, 1<<20); ok {
		t.Fatal("an offset older than the cache read as cached")
	}
	for off := first; off < next; off++ {
		got, ok := c.read(off, 25)
		base := off &^ 1
		want := 2 // within 25 bytes
		if base+2 == next {
			want = 1
		}
		if !ok || len(got) != want {
			t.Fatalf("read at %d: %d batches, %v (want %d)", off, len(got), ok, want)
		}
		if !bytes.Equal(got[0], data(base)) || (want == 2 && !bytes.Equal(got[1], data(base+2))) {
			t.Fatalf("read at %d returned the wrong batches", off)
		}
	}
	// AllocsPerRun rounds down to whole allocations per run: a thousand
	// adds per run, so an array grown every few hundred adds counts.
	thousand := func() {
		for range 1000 {
			add()
		}
	}
	if allocs := testing.AllocsPerRun(20, thousand); allocs != 0 {
		t.Fatalf("a warm cache allocates %.0f times per thousand adds", allocs)
	}
	if len(c.entries) != 100 || c.entries[0].base != next-200 {
		t.Fatalf("after more adds: %d entries from %d", len(c.entries), c.entries[0].base)
	}
	c.reset()
	if _, ok := c.read(next, 1); ok || c.bytes != 0 {
		t.Fatal("a reset cache still holds batches")
	}
	for range 300 {
		add()
	}
	if len(c.entries) != 100 || c.entries[len(c.entries)-1].next != next {
		t.Fatalf("after a reset: %d entries ending at %d, want 100 ending at %d", len(c.entries), c.entries[len(c.entries)-1].next, next)
	}
}
