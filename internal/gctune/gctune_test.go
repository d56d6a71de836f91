package gctune

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		headroom, scan uint64
		base, want     int
	}{
		{64 << 20, 32 << 20, 100, 200}, // goal = live + 64 MiB
		{64 << 20, 16 << 20, 100, 400},
		{64 << 20, 256 << 20, 100, 100}, // GOGC alone leaves more
		{64 << 20, 0, 100, 1600},        // an empty heap counts as 4 MiB: the least goal is then 64 MiB
		{64 << 20, 1 << 20, 100, 1600},
		{1 << 40, 1 << 20, 100, maxPercent},
		{1 << 62, 4 << 20, 100, maxPercent}, // headroom*100 would overflow
		{64 << 20, 32 << 20, 300, 300},      // never under the base
	} {
		if got := Percent(c.headroom, c.scan, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.headroom, c.scan, c.base, got, c.want)
		}
	}
}

func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTunerRaisesGoal runs the real collector: after a cycle the heap's
// goal is at least the live heap plus the headroom (at GOGC=100 alone it
// would be about twice a live heap of a few megabytes), the tuner runs
// again after every cycle, and stopping it restores the base percent.
func TestTunerRaisesGoal(t *testing.T) {
	const headroom = 96 << 20
	keep := make([][]byte, 0, 64)
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 64<<10)) // about 4 MiB live
	}
	tu := start(headroom, 100)
	defer tu.stop()
	waitAdjusts := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			tu.mu.Lock()
			got := tu.adjusts
			tu.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the tuner ran %d times after the collector's cycles, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAdjusts(3) // the start, then at least two cycles: it re-arms
	live := readUint("/gc/heap/live:bytes")
	goal := readUint("/gc/heap/goal:bytes")
	if goal < live+headroom*9/10 {
		t.Fatalf("heap goal %d with a live heap of %d: want at least live + %d", goal, live, headroom*9/10)
	}
	if p := readUint("/gc/gogc:percent"); p <= 100 {
		t.Fatalf("GC percent %d, want above 100", p)
	}
	// Not far past it either: the runtime's minimum heap scales with the
	// percent, and a small heap must not make it gigabytes.
	if goal > live+headroom*2 {
		t.Fatalf("heap goal %d with a live heap of %d: want at most live + %d", goal, live, headroom*2)
	}
	runtime.KeepAlive(keep)
	tu.stop()
	if p := readUint("/gc/gogc:percent"); p != 100 {
		t.Fatalf("GC percent %d after stop, want the base 100", p)
	}
	// After stop the finalizer armed last may still run once; it must
	// not arm another.
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	n := tu.fired.Load()
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	if got := tu.fired.Load(); got != n {
		t.Fatalf("the tuner's finalizer ran %d more times after stop: it re-armed", got-n)
	}
}
