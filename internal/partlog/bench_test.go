package partlog

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// BenchmarkAppendSync appends one batch and fsyncs it per iteration: the
// cost of a durable publish with no group commit across batches, with
// the active segment preallocated by fallocate, by zeros written ahead
// (PreallocateWrite), or not at all.
func BenchmarkAppendSync(b *testing.B) {
	for _, n := range []int{1, 100, 600} {
		for _, pre := range []string{"zeros", "fallocate", "none"} {
			b.Run(fmt.Sprintf("records=%d/prealloc=%s", n, pre), func(b *testing.B) {
				opts := Options{Logger: quietLogger(), PreallocateWrite: pre == "zeros"}
				if pre == "none" {
					opts.PreallocateBytes = -1
				}
				l, err := Open(b.TempDir(), opts)
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

// BenchmarkSustainedWrites appends 1 GiB per iteration to one log, in
// 256 KiB batches with a Sync per MiB (a group commit's rhythm), with the
// page-cache window (default) and without it (CacheBytes -1), and reports
// the CPU the process spent per GiB beside the throughput. Without the
// window the page cache grows by a GiB per iteration; run several
// (-benchtime 4x): the window's case runs first, so the pages the other
// one takes are new to the cache, as on a broker that runs for hours.
func BenchmarkSustainedWrites(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int64
	}{{"window=64MiB", 0}, {"window=off", -1}} {
		b.Run(c.name, func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Logger: quietLogger(), CacheBytes: c.cache, SegmentBytes: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := record.AppendBatch(nil, 0, testRecords(255, 1000, 1)) // about 256 KiB
			b.SetBytes(1 << 30)
			c0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for written, synced := 0, 0; written < 1<<30; written += len(batch) {
					if _, err := l.Append(batch); err != nil {
						b.Fatal(err)
					}
					if written-synced >= 1<<20 {
						if err := l.Sync(); err != nil {
							b.Fatal(err)
						}
						synced = written
					}
				}
				if err := l.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((processCPU()-c0).Seconds()/float64(b.N), "cpu-s/GiB")
		})
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
