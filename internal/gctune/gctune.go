// Package gctune keeps the garbage collector of a process with a small
// live heap from running many times a second.
//
// Go's collector starts a cycle when the heap has grown by GOGC percent
// (100) of what the last cycle left live. A broker's live heap is small
// (tens of megabytes: caches and windows of bounded size) while it
// allocates tens of megabytes a second per partition under load, so at
// GOGC=100 it collects several times a second, and every cycle takes a
// core's share for its marking and makes allocating goroutines help:
// latency a record pays at random. A Tuner raises the percent after each
// cycle so that the next one starts no earlier than headroom bytes
// after the live heap; once the live heap is large enough that GOGC
// alone gives that much, it changes nothing. GOMEMLIMIT still bounds the
// heap: the runtime collects early when the limit is near whatever the
// percent says.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Tuner adjusts the GC percent after every cycle; see Start.
type Tuner struct {
	headroom uint64
	base     int

	mu      sync.Mutex
	stopped bool
	percent int
	adjusts int          // how many times adjust ran (tests)
	fired   atomic.Int64 // how many times the finalizer ran (tests)
	samples []metrics.Sample
}

// The runtime's measures of what the next cycle's goal is computed from.
var sampleNames = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// maxPercent bounds the percent set for a nearly empty heap.
const maxPercent = 100_000

// minHeap is the runtime's minimum heap at GOGC=100 (the goal is never
// below minHeap × percent / 100).
const minHeap = 4 << 20

// Start makes the collector leave at least headroom bytes between the
// live heap and the next cycle's start, keeping base (GOGC's percent,
// 100 when the environment does not set one) as the least percent. It
// returns a function that stops the tuning and restores base.
func Start(headroom uint64, base int) (stop func()) {
	return start(headroom, base).stop
}

func start(headroom uint64, base int) *Tuner {
	t := &Tuner{headroom: headroom, base: base, percent: base}
	for _, n := range sampleNames {
		t.samples = append(t.samples, metrics.Sample{Name: n})
	}
	t.adjust()
	t.arm()
	return t
}

// sentinel is garbage as soon as it is made; its finalizer runs after
// the cycle that finds it, i.e. once after every cycle. (A pointer keeps
// it out of the tiny allocator, whose blocks free late.)
type sentinel struct {
	t   *Tuner
	pad [24]byte
}

func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		s.t.fired.Add(1)
		if s.t.adjust() {
			s.t.arm()
		}
	})
}

// adjust sets the percent for the live heap the last cycle measured; it
// reports false once stopped.
func (t *Tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.adjusts++
	metrics.Read(t.samples)
	var scan uint64
	for _, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			scan += s.Value.Uint64()
		}
	}
	p := Percent(t.headroom, scan, t.base)
	// Small changes are not worth a call into the runtime.
	if p != t.percent && (p > t.percent*21/20 || p < t.percent*19/20 || p == t.base) {
		debug.SetGCPercent(p)
		t.percent = p
	}
	return true
}

func (t *Tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.base)
	}
}

// Percent is the GC percent that starts the next cycle headroom bytes
// after a heap of scan bytes (live heap, stacks and globals: the base of
// the runtime's goal), at least base and at most maxPercent.
//
// A heap under 4 MiB counts as 4 MiB: the runtime never starts a cycle
// under a minimum heap of 4 MiB scaled by the percent, so a larger
// percent for a smaller heap would put the first cycles (the live heap
// is 0 before the first) far past headroom.
func Percent(headroom, scan uint64, base int) int {
	if scan < minHeap {
		scan = minHeap
	}
	if headroom/scan >= maxPercent/100 { // also keeps headroom*100 from overflowing
		return maxPercent
	}
	p := headroom * 100 / scan
	if int(p) < base {
		return base
	}
	return int(p)
}
