package record

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestPatchedCRCEqualsFullCRC: every header setter leaves the CRC a full
// computation gives, for batches from the smallest to 1 MiB, and a large
// batch whose CRC was wrong before stays wrong.
func TestPatchedCRCEqualsFullCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	full := func(b []byte) uint32 { return crc32.Checksum(b[offMagic:wholeBatch(b)], castagnoli) }
	for _, n := range []int{1, 2, 7, 100, 1000, 1 << 14} {
		recs := testRecords(n, rng.IntN(200), rng.Int64())
		b := AppendBatch(nil, rng.Int64N(1<<40), recs)
		setters := []func(){
			func() { SetBaseOffset(b, rng.Int64()) },
			func() { SetRaftPosition(b, rng.Uint64()&raftTermMask, rng.Uint64()) },
			func() { SetPosition(b, rng.Int64(), rng.Uint64()&raftTermMask, rng.Uint64(), rng.IntN(70000)) },
			func() { SetOriginCodec(b, uint8(rng.IntN(MaxOriginCodec+1))) },
			func() { SetTxnAttributes(b, uint8(rng.IntN(256))) },
			func() { SetBaseOffset(b, int64(le.Uint64(b[offBaseOffset:]))) }, // no change
		}
		for i := range 200 {
			setters[rng.IntN(len(setters))]()
			if got, want := le.Uint32(b[offCRC:]), full(b); got != want {
				t.Fatalf("%d records, step %d: CRC %08x, a full computation gives %08x", n, i, got, want)
			}
		}
		SetTxnAttributes(b, 0) // random attributes need not make sense
		if _, err := ValidateBatch(b); err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		if len(b) < patchMinBytes {
			continue
		}
		// Damage the records, then rewrite the header: still caught.
		b[len(b)-1] ^= 0x10
		SetPosition(b, 5, 6, 7, 0)
		if _, err := ParseBatch(b); err == nil {
			t.Fatalf("%d records: a damaged batch passed its CRC after SetPosition", n)
		}
	}
}

// TestXPow8n checks the zero-extension against appending zeros.
func TestXPow8n(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 31, 64, 1000, 65537} {
		block := []byte{1, 2, 3, 4, 5, 0xff}
		raw := ^crc32.Update(^uint32(0), castagnoli, block)
		want := ^crc32.Update(^uint32(0), castagnoli, append(block, make([]byte, n)...))
		if got := mulModP(xPow8n(n), raw); got != want {
			t.Fatalf("n=%d: %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkSetPosition(b *testing.B) {
	for _, n := range []int{1, 64, 1024} {
		batch := AppendBatch(nil, 0, testRecords(n, 1000, 0))
		b.Run(itoa(int64(len(batch))), func(b *testing.B) {
			for i := range b.N {
				SetPosition(batch, int64(i), 3, uint64(i), 0)
			}
		})
	}
}
