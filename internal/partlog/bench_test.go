package partlog

import (
	"fmt"
	"github.com/hermes-mq/hermes/pkg/record"
	"testing"
)

// BenchmarkAppendSync appends one batch and fsyncs it per iteration: the
// cost of a durable publish with no group commit across batches.
func BenchmarkAppendSync(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := record.AppendBatch(nil, 0, testRecords(n, 100, 1))
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(batch); err != nil {
					b.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkRead reads a 64 MiB-ish log sequentially in 1 MiB reads.
func BenchmarkRead(b *testing.B) {
	l, err := Open(b.TempDir(), Options{Logger: quietLogger(), SegmentBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := record.AppendBatch(nil, 0, testRecords(100, 100, 1))
	for l.Size() < 32<<20 {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(l.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for off := l.StartOffset(); ; {
			buf, err := l.Read(off, 1<<20, l.NextOffset())
			if err != nil {
				b.Fatal(err)
			}
			if buf == nil {
				break
			}
			off = lastBatchNext(buf)
		}
	}
}

// lastBatchNext returns the offset after the last batch in buf.
func lastBatchNext(buf []byte) int64 {
	var next int64
	for len(buf) > 0 {
		h, _ := parseHeader(buf)
		next = h.NextOffset()
		buf = buf[h.Size():]
	}
	return next
}
