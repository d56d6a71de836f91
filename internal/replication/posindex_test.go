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
		if x.at(x.len()-1) != model[len(model)-1] {
			t.Fatalf("step %d: last %+v, want %+v", step, x.at(x.len()-1), model[len(model)-1])
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
			if len(model) == 0 {
				next = rng.Int64N(1 << 40) // a window starts anywhere
			}
			term := uint64(step / 40) // runs of one term across chunks
			for k := rng.IntN(3 * posChunk); k > 0; k-- {
				if rng.IntN(500) == 0 {
					term++
				}
				p := entryPos{term: term, off: next, next: next + rng.Int64N(1<<33), bytes: rng.Int32()}
				if rng.IntN(10) == 0 { // a record-less entry
					p.next, p.bytes, p.side = p.off, 0, true
				}
				p.cut = rng.IntN(100) == 0
				next = p.next
				x.push(p)
				model = append(model, p)
			}
		case op < 8 && len(model) > 0:
			n := rng.IntN(len(model) + 1)
			x.truncate(n)
			model = model[:n]
			if n > 0 {
				next = model[n-1].next
			}
		case len(model) > 0:
			k := rng.IntN(len(model) + 1)
			x.dropFront(k)
			model = model[k:]
		}
		check(step)
	}
}

// An entry's position takes 13 bytes of memory for as long as the entry
// is in the log's window; an entry that does not follow the last one is
// refused.
func TestPosIndexSize(t *testing.T) {
	if n := unsafe.Sizeof(posChunkData{}) - unsafe.Sizeof([]termRun(nil)); n != 13*posChunk {
		t.Fatalf("a chunk of %d positions takes %d bytes", posChunk, n)
	}
	var x posIndex
	x.push(entryPos{off: 10, next: 20})
	defer func() {
		if recover() == nil {
			t.Fatal("an entry with a gap before it was taken")
		}
	}()
	x.push(entryPos{off: 21, next: 30})
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
