package memring

import (
	"fmt"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// BenchmarkAppend appends batches of 100 records with 100-byte payloads to
// a ring at its default bounds (so, once full, every Append also evicts).
func BenchmarkAppend(b *testing.B) {
	batch := recs(0, 100, 100)
	r := New(Options{})
	b.SetBytes(100 * 100)
	b.ReportAllocs()
	for b.Loop() {
		r.Append(batch)
	}
}

// BenchmarkRead reads a full ring in batches of the given size.
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			r := New(Options{MaxRecords: 65536})
			for i := 0; i < 65536; i += 100 {
				r.Append(recs(i, 100, 100))
			}
			dst := make([]record.Record, 0, n)
			from := r.Start()
			b.SetBytes(int64(n) * 100)
			b.ReportAllocs()
			for b.Loop() {
				recs, next, _ := r.Read(from, n, dst)
				if len(recs) < n {
					next = r.Start()
				}
				from = next
			}
		})
	}
}
