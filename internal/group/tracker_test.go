package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// tstep is one event of a tracker script: deliver (want count), ack (want
// advanced), nack, or due (want redeliver and deadLetter). After each step
// Committed, Pending and Full must match.
type tstep struct {
	op            string
	off           int64
	at            time.Duration
	max           int // for due; 0 means 100
	wantCount     int
	wantAdvanced  bool
	wantErr       error
	wantRedeliver []int64
	wantDead      []int64
	committed     int64
	pending       int
	full          bool
}

// w is the default AckWait.
const w = 30 * time.Second

// trackerScripts are the scripted scenarios of TestTrackerScripts.
var trackerScripts = []struct {
	name      string
	committed int64
	cfg       TrackerConfig
	steps     []tstep
}{
	{"ack in order", 10, TrackerConfig{}, []tstep{
		{op: "deliver", off: 10, wantCount: 1, committed: 10, pending: 1},
		{op: "deliver", off: 11, wantCount: 1, committed: 10, pending: 2},
		{op: "ack", off: 10, wantAdvanced: true, committed: 11, pending: 1},
		{op: "ack", off: 11, wantAdvanced: true, committed: 12},
		{op: "ack", off: 11, committed: 12},                         // below committed: no-op
		{op: "ack", off: 12, wantErr: ErrNotPending, committed: 12}, // never delivered
		{op: "deliver", off: 11, wantCount: 0, committed: 12},       // acked: not tracked again
	}},
	{"ack out of order advances over the contiguous prefix only", 0, TrackerConfig{}, []tstep{
		{op: "deliver", off: 0, wantCount: 1, pending: 1},
		{op: "deliver", off: 1, wantCount: 1, pending: 2},
		{op: "deliver", off: 2, wantCount: 1, pending: 3},
		{op: "deliver", off: 3, wantCount: 1, pending: 4},
		{op: "ack", off: 2, pending: 3},
		{op: "ack", off: 2, wantErr: ErrNotPending, pending: 3}, // acked twice above committed
		{op: "ack", off: 1, pending: 2},
		{op: "ack", off: 0, wantAdvanced: true, committed: 3, pending: 1},
		{op: "deliver", off: 7, wantCount: 1, committed: 3, pending: 2}, // 4..6 skipped
		{op: "ack", off: 3, wantAdvanced: true, committed: 7, pending: 1},
		{op: "ack", off: 7, wantAdvanced: true, committed: 8},
	}},
	{"expiry redelivers", 0, TrackerConfig{}, []tstep{
		{op: "deliver", off: 0, wantCount: 1, pending: 1},
		{op: "deliver", off: 1, at: time.Second, wantCount: 1, pending: 2},
		{op: "due", at: w - 1, pending: 2},
		{op: "due", at: w, wantRedeliver: []int64{0}, pending: 2},
		{op: "due", at: w + time.Second, wantRedeliver: []int64{1}, pending: 2}, // 0 is parked
		{op: "deliver", off: 1, at: w + time.Second, wantCount: 2, pending: 2},
		{op: "deliver", off: 0, at: w + 2*time.Second, wantCount: 2, pending: 2},
		{op: "due", at: 2*w + time.Second, wantRedeliver: []int64{1}, pending: 2},
		{op: "ack", off: 0, wantAdvanced: true, committed: 1, pending: 1},
		{op: "ack", off: 1, wantAdvanced: true, committed: 2},
		{op: "due", at: time.Hour, committed: 2},
	}},
	{"repeated expiry dead-letters at MaxDeliveries", 0, TrackerConfig{AckWait: time.Second, MaxDeliveries: 3}, []tstep{
		{op: "deliver", off: 0, wantCount: 1, pending: 1},
		{op: "deliver", off: 1, wantCount: 1, pending: 2},
		{op: "due", at: time.Second, wantRedeliver: []int64{0, 1}, pending: 2},
		{op: "deliver", off: 0, at: time.Second, wantCount: 2, pending: 2},
		{op: "deliver", off: 1, at: time.Second, wantCount: 2, pending: 2},
		{op: "due", at: 2 * time.Second, wantRedeliver: []int64{0, 1}, pending: 2},
		{op: "deliver", off: 0, at: 2 * time.Second, wantCount: 3, pending: 2},
		{op: "ack", off: 1, at: 2 * time.Second, pending: 1}, // parked offsets can be acked
		{op: "due", at: 3 * time.Second, wantDead: []int64{0}, pending: 1},
		{op: "due", at: 4 * time.Second, pending: 1}, // dead-lettered offset is parked
		{op: "ack", off: 0, wantAdvanced: true, committed: 2},
	}},
	{"unlimited deliveries", 0, TrackerConfig{AckWait: time.Second, MaxDeliveries: -1}, []tstep{
		{op: "deliver", off: 0, wantCount: 1, pending: 1},
		{op: "deliver", off: 0, wantCount: 2, pending: 1},
		{op: "deliver", off: 0, wantCount: 3, pending: 1},
		{op: "deliver", off: 0, wantCount: 4, pending: 1},
		{op: "deliver", off: 0, wantCount: 5, pending: 1},
		{op: "deliver", off: 0, wantCount: 6, pending: 1},
		{op: "due", at: time.Second, wantRedeliver: []int64{0}, pending: 1},
	}},
	{"full at MaxPending", 0, TrackerConfig{MaxPending: 2}, []tstep{
		{op: "deliver", off: 0, wantCount: 1, pending: 1},
		{op: "deliver", off: 1, wantCount: 1, pending: 2, full: true},
		{op: "deliver", off: 1, wantCount: 2, pending: 2, full: true}, // redelivery is fine when full
		{op: "ack", off: 1, pending: 1},
		{op: "deliver", off: 2, wantCount: 1, pending: 2, full: true},
	}},
	{"nack makes due now, Due honours max", 0, TrackerConfig{}, []tstep{
		{op: "deliver", off: 0, wantCount: 1, pending: 1},
		{op: "deliver", off: 1, wantCount: 1, pending: 2},
		{op: "deliver", off: 2, wantCount: 1, pending: 3},
		{op: "nack", off: 2, at: time.Second, pending: 3},
		{op: "nack", off: 1, at: time.Second, pending: 3},
		{op: "nack", off: 5, wantErr: ErrNotPending, pending: 3},
		{op: "due", at: time.Second, max: 1, wantRedeliver: []int64{1}, pending: 3},
		{op: "due", at: time.Second, max: -1, pending: 3},
		{op: "due", at: time.Second, wantRedeliver: []int64{2}, pending: 3},
		{op: "nack", off: 2, at: 2 * time.Second, pending: 3}, // broker could not send it: due again
		{op: "due", at: 2 * time.Second, wantRedeliver: []int64{2}, pending: 3},
	}},
}

func TestTrackerScripts(t *testing.T) {
	for _, tt := range trackerScripts {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(tt.committed, tt.cfg)
			for i, st := range tt.steps {
				runTStep(t, tr, fmt.Sprintf("step %d (%s %d)", i, st.op, st.off), st)
			}
		})
	}
}

func runTStep(t *testing.T, tr *Tracker, name string, st tstep) {
	t.Helper()
	now := t0.Add(st.at)
	var err error
	switch st.op {
	case "deliver":
		if n := tr.Delivered(st.off, now); n != st.wantCount {
			t.Fatalf("%s: count %d, want %d", name, n, st.wantCount)
		}
	case "ack":
		var c int64
		var adv bool
		c, adv, err = tr.Ack(st.off)
		if c != st.committed || adv != st.wantAdvanced {
			t.Fatalf("%s: Ack = %d %v, want %d %v", name, c, adv, st.committed, st.wantAdvanced)
		}
	case "nack":
		err = tr.Nack(st.off, now)
	case "due":
		max := st.max
		if max == 0 {
			max = 100
		}
		re, dead := tr.Due(now, max)
		if !slices.Equal(re, st.wantRedeliver) || !slices.Equal(dead, st.wantDead) {
			t.Fatalf("%s: Due = %v %v, want %v %v", name, re, dead, st.wantRedeliver, st.wantDead)
		}
	default:
		t.Fatalf("%s: unknown op", name)
	}
	if !errors.Is(err, st.wantErr) {
		t.Fatalf("%s: err %v, want %v", name, err, st.wantErr)
	}
	if tr.Committed() != st.committed || tr.Pending() != st.pending || tr.Full() != st.full {
		t.Fatalf("%s: committed %d pending %d full %v, want %d %d %v",
			name, tr.Committed(), tr.Pending(), tr.Full(), st.committed, st.pending, st.full)
	}
}

func TestTrackerNextDeadline(t *testing.T) {
	tr := NewTracker(0, TrackerConfig{AckWait: time.Second})
	if _, ok := tr.NextDeadline(); ok {
		t.Fatalf("NextDeadline of empty tracker: ok")
	}
	tr.Delivered(0, t0)
	tr.Delivered(1, t0.Add(time.Millisecond))
	if at, ok := tr.NextDeadline(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline = %v %v", at, ok)
	}
	_ = tr.Nack(1, t0)
	if at, _ := tr.NextDeadline(); !at.Equal(t0) {
		t.Fatalf("NextDeadline after Nack = %v, want %v", at, t0)
	}
	tr.Due(t0, 10) // parks 1
	if at, _ := tr.NextDeadline(); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline after Due = %v", at)
	}
}

func TestTrackerDeliverWhenFullPanics(t *testing.T) {
	tr := NewTracker(0, TrackerConfig{MaxPending: 1})
	tr.Delivered(0, t0)
	defer func() {
		if recover() == nil {
			t.Fatalf("Delivered of a new record when Full did not panic")
		}
	}()
	tr.Delivered(1, t0)
}

// TestTrackerModel checks Committed and Pending against a plain set under
// random deliveries and acks, with many holes behind a stuck low offset
// (which exercises the compaction of the offset order).
func TestTrackerModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tr := NewTracker(100, TrackerConfig{MaxPending: 50, AckWait: time.Second})
	pending := map[int64]bool{}
	next := int64(99) // one below the first offset that may be delivered
	for i := range 20000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if !tr.Full() && rng.IntN(2) == 0 {
			next += int64(1 + rng.IntN(2))
			tr.Delivered(next, now)
			pending[next] = true
		} else if len(pending) > 0 {
			offs := slices.Sorted(func(yield func(int64) bool) {
				for o := range pending {
					if !yield(o) {
						return
					}
				}
			})
			off := offs[rng.IntN(len(offs))]
			if i < 15000 && off == offs[0] && len(offs) > 1 {
				off = offs[1] // keep the lowest stuck most of the time
			}
			if _, _, err := tr.Ack(off); err != nil {
				t.Fatalf("Ack(%d): %v", off, err)
			}
			delete(pending, off)
		}
		want := next + 1
		for o := range pending {
			want = min(want, o)
		}
		if tr.Committed() != want || tr.Pending() != len(pending) || len(tr.order) > 2*len(pending)+33 {
			t.Fatalf("op %d: committed %d pending %d order %d, want %d %d", i, tr.Committed(), tr.Pending(), len(tr.order), want, len(pending))
		}
		tr.Due(now, 10) // keep the heap moving; results are not checked here
	}
}
