package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// histMax is the largest latency a histogram holds (larger values are
// recorded as histMax); resolution is 1 µs with 3 significant digits.
const histMax = time.Hour

// Hist is an HDR latency histogram safe for concurrent use.
type Hist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram // Lock: mu.
}

// NewHist returns an empty histogram.
func NewHist() *Hist {
	return &Hist{h: hdrhistogram.New(1, int64(histMax/time.Microsecond), 3)}
}

// Record adds one latency; negative values count as 0.
func (h *Hist) Record(d time.Duration) {
	us := min(max(d.Microseconds(), 0), int64(histMax/time.Microsecond))
	h.mu.Lock()
	h.h.RecordValue(us) //nolint:errcheck // in range by construction
	h.mu.Unlock()
}

// Merge adds every value of o into h.
func (h *Hist) Merge(o *Hist) {
	o.mu.Lock()
	snap := hdrhistogram.Import(o.h.Export())
	o.mu.Unlock()
	h.mu.Lock()
	h.h.Merge(snap)
	h.mu.Unlock()
}

// Count returns the number of values recorded.
func (h *Hist) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.h.TotalCount()
}

// Latency summarizes a histogram, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P25   float64 `json:"p25_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

// Summary returns the histogram's percentiles (all 0 when it is empty).
func (h *Hist) Summary() Latency {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.h.TotalCount(),
		Mean:  h.h.Mean() / 1000,
		P25:   ms(h.h.ValueAtQuantile(25)),
		P50:   ms(h.h.ValueAtQuantile(50)),
		P90:   ms(h.h.ValueAtQuantile(90)),
		P99:   ms(h.h.ValueAtQuantile(99)),
		P999:  ms(h.h.ValueAtQuantile(99.9)),
		Max:   ms(h.h.Max()),
	}
}
