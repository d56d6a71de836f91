package record

import (
	"fmt"
	"testing"
)

// benchRecords are n records of 100 bytes with ids as one process makes
// them (UUIDv7s 1 µs apart, counting up), as a producer's batch has.
func benchRecords(n int) []Record {
	recs := testRecords(n, 100, 1_764_000_000_000_000_000)
	for i := range recs {
		recs[i].MessageID = NewMessageIDAt(recs[i].Timestamp)
	}
	return recs
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			recs := benchRecords(n)
			dst := AppendBatch(nil, 0, recs)
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dst = AppendBatch(dst[:0], int64(i), recs)
			}
		})
	}
}

func BenchmarkValidateBatch(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			batch := AppendBatch(nil, 0, benchRecords(n))
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := ValidateBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeRecords(b *testing.B) {
	batch := AppendBatch(nil, 0, benchRecords(100))
	var recs []Record
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		recs, _ = DecodeRecords(recs[:0], batch)
	}
}

// BenchmarkDecodeValidBatch against the two calls it replaces, on a batch
// of 1,000 records of 100 bytes.
func BenchmarkDecodeValidBatch(b *testing.B) {
	batch := AppendBatch(nil, 0, benchRecords(1000))
	dst := make([]Record, 0, 1000)
	b.Run("validate+decode", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		for range b.N {
			if _, err := ValidateBatch(batch); err != nil {
				b.Fatal(err)
			}
			dst, _ = DecodeRecords(dst[:0], batch)
		}
	})
	b.Run("one call", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		for range b.N {
			var err error
			if dst, _, err = DecodeValidBatch(dst[:0], batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
