package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// maxWindows bounds the latency windows of one run (Config.Window); each
// is a histogram of about 40 KB. Records due past the last window count
// in it.
const maxWindows = 600

// windowHists holds end-to-end latency per window of publishing time (by
// when each record was due or sent), to show whether a long run stays
// flat from its first minute to its last.
type windowHists struct {
	every time.Duration
	mu    sync.Mutex
	h     []*hdrhistogram.Histogram // Lock: mu.
}

// record adds the latency d of a record due or sent at at (Unix ns), start
// being when publishing started.
func (w *windowHists) record(start time.Time, at int64, d time.Duration) {
	i := min(max(int((at-start.UnixNano())/int64(w.every)), 0), maxWindows-1)
	us := min(max(d.Microseconds(), 0), int64(histMax/time.Microsecond))
	w.mu.Lock()
	for len(w.h) <= i {
		// Two significant digits: a window's percentiles within 1%.
		w.h = append(w.h, hdrhistogram.New(1, int64(histMax/time.Microsecond), 2))
	}
	w.h[i].RecordValue(us) //nolint:errcheck // in range by construction
	w.mu.Unlock()
}

// WindowLatency is the end-to-end latency of the records due or sent
// from FromS to ToS seconds after publishing started.
type WindowLatency struct {
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	Latency Latency `json:"e2e_latency"`
}

// summaries returns every window's latency, in order (empty windows
// included, with a count of 0).
func (w *windowHists) summaries() []WindowLatency {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]WindowLatency, len(w.h))
	for i, h := range w.h {
		out[i] = WindowLatency{FromS: (time.Duration(i) * w.every).Seconds(), ToS: (time.Duration(i+1) * w.every).Seconds(),
			Latency: summarize(h)}
		out[i].Latency.Distribution = nil
	}
	return out
}
