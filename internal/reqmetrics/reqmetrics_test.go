package reqmetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCountsAndTimesWithoutAllocating(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	h := m.Method(GRPC, "/hermes.v1.Hermes/Publish", func(c int) string { return []string{"OK", "CANCELLED"}[c] })
	if m.Method(GRPC, "/hermes.v1.Hermes/Publish", nil) != h {
		t.Fatal("a method's handle is not cached")
	}
	h.Done(0, time.Millisecond)
	h.Done(0, time.Millisecond)
	h.Done(1, time.Millisecond)
	allocs := testing.AllocsPerRun(1000, func() { h.Done(0, 10*time.Microsecond) })
	if allocs != 0 {
		t.Fatalf("a request costs %v allocations, want 0", allocs)
	}
	s := m.Method(GRPC, "/hermes.v1.Hermes/Subscribe", nil)
	s.StreamOpened()
	s.StreamOpened()
	s.StreamClosed()
	s.Count(0)
	var nilMethod *Method
	nilMethod.Done(0, 0) // adapters without metrics
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	durations := 0
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[key] = mt.GetGauge().GetValue()
			case mt.GetHistogram() != nil:
				durations++
			}
		}
	}
	want := map[string]float64{
		"hermes_requests_total api=grpc code=OK method=/hermes.v1.Hermes/Publish":        1003, // AllocsPerRun runs once more,
		"hermes_requests_total api=grpc code=CANCELLED method=/hermes.v1.Hermes/Publish": 1,
		"hermes_requests_total api=grpc code=0 method=/hermes.v1.Hermes/Subscribe":       1,
		"hermes_streams_open api=grpc method=/hermes.v1.Hermes/Subscribe":                1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if durations != 1 {
		t.Fatalf("%d duration series, want 1 (streams are not timed)", durations)
	}
}
