package replication

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// posIndex behaves as one slice would under random appends, truncations
// and drops from the front, across chunk boundaries.
func TestPosIndexMatchesASlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x posIndex
	var model []entryPos
	next := int64(0)
	check := func(step int) {
		t.Helper()
		if x.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, x.len(), len(model))
		}
		if len(model) == 0 {
			return
		}
		if x.last() != model[len(model)-1] {
			t.Fatalf("step %d: last %+v, want %+v", step, x.last(), model[len(model)-1])
		}
		for k := 0; k < 20; k++ {
			i := rng.IntN(len(model))
			if x.at(i) != model[i] {
				t.Fatalf("step %d: at(%d) %+v, want %+v", step, i, x.at(i), model[i])
			}
		}
		lo := rng.IntN(len(model))
		hi := lo + rng.IntN(len(model)-lo+1)
		if got := x.appendRange(nil, lo, hi); !slices.Equal(got, model[lo:hi]) {
			t.Fatalf("step %d: range [%d, %d): %d entries, differ from the slice's %d", step, lo, hi, len(got), hi-lo)
		}
		if len(x.chunks) > (x.head+x.n+posChunk-1)/posChunk {
			t.Fatalf("step %d: %d chunks held for %d entries from %d", step, len(x.chunks), x.n, x.head)
		}
	}
	for step := 0; step < 3000; step++ {
		switch op := rng.IntN(10); {
		case op < 7:
			for k := rng.IntN(3 * posChunk); k > 0; k-- {
				p := entryPos{term: uint64(step), off: next, next: next + 3, bytes: int32(k)}
				next += 3
				x.push(p)
				model = append(model, p)
			}
		case op < 8 && len(model) > 0:
			n := rng.IntN(len(model) + 1)
			x.truncate(n)
			model = model[:n]
		case len(model) > 0:
			k := rng.IntN(len(model) + 1)
			x.dropFront(k)
			model = model[k:]
		}
		check(step)
	}
}

// An entry's position takes 32 bytes of memory for as long as the
// entry is in the log's window.
func TestEntryPosSize(t *testing.T) {
	if n := unsafe.Sizeof(entryPos{}); n != 32 {
		t.Fatalf("entryPos takes %d bytes", n)
	}
}

// Appending a million positions copies none: the allocations are the
// chunks and the chunk list's growth.
func BenchmarkPosIndexPush(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var x posIndex
		for i := range 1 << 20 {
			x.push(entryPos{off: int64(i), next: int64(i) + 1})
		}
	}
}
