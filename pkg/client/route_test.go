package client

import (
	"testing"
	"time"
)

// open says every leader's stream is open.
func open(string) bool { return true }

func TestRoutesMoveOnlyWhenNothingInFlight(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRoutes(2, true)
	if got, ok := r.of(0, now, open); got != "" || !ok {
		t.Fatalf("a new partition goes to %q (%v), want the dialled node", got, ok)
	}
	r.sent(0)
	r.sent(0)
	r.learn(0, "n2:1")
	if got, ok := r.of(0, now, open); ok {
		t.Fatalf("with 2 batches in flight the partition moved to %q", got)
	}
	if got, ok := r.of(1, now, open); got != "" || !ok {
		t.Fatalf("partition 1 waits (%v) or goes to %q while partition 0 moves", !ok, got)
	}
	r.answered(0)
	if got, ok := r.of(0, now, open); ok {
		t.Fatalf("with 1 batch in flight the partition moved to %q", got)
	}
	r.answered(0)
	if got, _ := r.of(0, now, open); got != "n2:1" {
		t.Fatalf("with nothing in flight the partition goes to %q, want n2:1", got)
	}
	if got, _ := r.of(1, now, open); got != "" {
		t.Fatalf("partition 1 learned nothing but goes to %q", got)
	}
	r.learn(0, "") // an answer from the leader itself names none
	if got, _ := r.of(0, now, open); got != "n2:1" {
		t.Fatalf("an empty hint moved the partition to %q", got)
	}
}

func TestRoutesBrokenLeaderGoesBackToDialledNode(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRoutes(3, true)
	r.learn(0, "n2:1")
	r.learn(1, "n2:1")
	r.learn(2, "n3:1")
	for p := range int32(3) {
		r.of(p, now, open)
	}
	r.sent(1) // a batch of partition 1 is still in flight on another stream to n2
	r.broken("n2:1", false, now)
	if got, ok := r.of(1, now, open); ok {
		t.Fatalf("partition 1 moved to %q with a batch in flight", got)
	}
	r.answered(1)
	for p, want := range []string{"", "", "n3:1"} {
		if got, _ := r.of(int32(p), now, open); got != want {
			t.Fatalf("partition %d goes to %q after n2 broke, want %q", p, got, want)
		}
	}
	r.learn(0, "n2:1") // n2 leads again: it may be used at once
	if got, _ := r.of(0, now, open); got != "n2:1" {
		t.Fatalf("after a broken stream the leader is avoided: %q", got)
	}
}

func TestRoutesAvoidUnreachableLeader(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRoutes(1, true)
	r.learn(0, "n2:1")
	r.of(0, now, open)
	r.broken("n2:1", true, now)
	r.learn(0, "n2:1")
	if got, _ := r.of(0, now.Add(avoidAfterFailedConnect-time.Second), open); got != "" {
		t.Fatalf("an unreachable leader was used again within the avoid time: %q", got)
	}
	r.learn(0, "n2:1")
	if got, _ := r.of(0, now.Add(avoidAfterFailedConnect), open); got != "n2:1" {
		t.Fatalf("after the avoid time the partition goes to %q, want n2:1", got)
	}
}

func TestRoutesDisabled(t *testing.T) {
	r := newRoutes(1, false)
	r.learn(0, "n2:1")
	if got, _ := r.of(0, time.Now(), open); got != "" {
		t.Fatalf("leader routing off, yet the partition goes to %q", got)
	}
}

func TestRoutesWaitForTheLeaderStream(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRoutes(1, true)
	r.learn(0, "n2:1")
	closed := func(string) bool { return false }
	if got, ok := r.of(0, now, closed); got != "" || !ok {
		t.Fatalf("before the leader's stream is open the partition goes to %q (%v), want the dialled node", got, ok)
	}
	if got, ok := r.of(0, now, open); got != "n2:1" || !ok {
		t.Fatalf("with the leader's stream open the partition goes to %q (%v)", got, ok)
	}
}
