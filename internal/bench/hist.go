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
	// Distribution is the share of values in each of DistBuckets.
	Distribution []Bucket `json:"distribution,omitempty"`
}

// Bucket is the share of latencies in [From, To) (To 0: unbounded).
type Bucket struct {
	Label  string  `json:"label"`
	FromUs int64   `json:"from_us"`
	ToUs   int64   `json:"to_us"`
	Share  float64 `json:"share"`
}

// DistBuckets are the buckets of a trading system's latency test, in µs.
var DistBuckets = []Bucket{
	{Label: "<20µs", ToUs: 20}, {Label: "20-50µs", FromUs: 20, ToUs: 50}, {Label: "50-100µs", FromUs: 50, ToUs: 100},
	{Label: "100-200µs", FromUs: 100, ToUs: 200}, {Label: "200-500µs", FromUs: 200, ToUs: 500},
	{Label: "500µs-1ms", FromUs: 500, ToUs: 1000}, {Label: "1-5ms", FromUs: 1000, ToUs: 5000}, {Label: ">5ms", FromUs: 5000},
}

// Summary returns the histogram's percentiles (all 0 when it is empty).
func (h *Hist) Summary() Latency {
	h.mu.Lock()
	defer h.mu.Unlock()
	return summarize(h.h)
}

// summarize is the Summary of h (in µs).
func summarize(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.TotalCount() == 0 {
		return Latency{}
	}
	total := float64(h.TotalCount())
	dist := make([]Bucket, len(DistBuckets))
	for i, b := range DistBuckets {
		dist[i] = b
	}
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		for i := range dist {
			if bar.From >= dist[i].FromUs && (dist[i].ToUs == 0 || bar.From < dist[i].ToUs) {
				dist[i].Share += float64(bar.Count) / total
				break
			}
		}
	}
	return Latency{
		Distribution: dist,
		Count:        h.TotalCount(),
		Mean:         h.Mean() / 1000,
		P25:          ms(h.ValueAtQuantile(25)),
		P50:          ms(h.ValueAtQuantile(50)),
		P90:          ms(h.ValueAtQuantile(90)),
		P99:          ms(h.ValueAtQuantile(99)),
		P999:         ms(h.ValueAtQuantile(99.9)),
		Max:          ms(h.Max()),
	}
}
