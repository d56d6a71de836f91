package client

import (
	"fmt"
	"slices"
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

// publishRounds publishes rounds of n records through p, each round
// flushed (so that partitions may move between rounds), and returns the
// futures.
func publishRounds(t *testing.T, p *Producer, rounds, n int) []*Future {
	t.Helper()
	var futs []*Future
	for r := range rounds {
		for i := range n {
			futs = append(futs, p.Publish(testCtx(t), &Message{Key: fmt.Appendf(nil, "k%d", i), Payload: fmt.Appendf(nil, "r%d-%d", r, i)}))
		}
		if err := p.Flush(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	return futs
}

// A leader the broker names but the client cannot connect to: the
// Producer and Client.Publish keep going through the dialled node, and
// nothing is lost or stored twice.
func TestProducerRelaysWhenLeaderUnreachable(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 2)
	fb.mu.Lock()
	fb.leaderAddr = unreachableLeader
	fb.mu.Unlock()
	p, err := c.NewProducer(testCtx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	futs := publishRounds(t, p, 3, 100)
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "t", futs)
	fb.mu.Lock()
	streams := fb.streamsOpen
	fb.mu.Unlock()
	if streams != 1 {
		t.Fatalf("%d publish streams opened, want 1 (the dialled node's)", streams)
	}
	for i := range 2 {
		acks, err := c.Publish(testCtx(t), "t", []*Message{{Payload: []byte("unary")}}, WithPartition(0))
		if err != nil {
			t.Fatalf("unary publish %d: %v", i, err)
		}
		fb.mu.Lock()
		got := fb.topics["t"][acks[0].Partition][acks[0].Offset].MessageID // the fake spreads unary records round-robin
		fb.mu.Unlock()
		if got != [16]byte(acks[0].ID) {
			t.Fatalf("unary publish %d: the log has another record at %d/%d", i, acks[0].Partition, acks[0].Offset)
		}
	}
}

// A reachable leader: the Producer opens a second stream, to it, and moves
// the partitions there; every record lands once, whichever path it took.
func TestProducerMovesToNamedLeader(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 2)
	fb.mu.Lock()
	fb.leaderAddr = "passthrough:///leader" // the fake's dialer reaches the fake itself
	fb.mu.Unlock()
	p, err := c.NewProducer(testCtx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	// The stream to the leader opens in the background: publish rounds
	// until both partitions moved (bounded).
	var futs []*Future
	var routed []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		futs = append(futs, publishRounds(t, p, 1, 20)...)
		p.mu.Lock()
		routed = slices.Clone(p.routes.addr)
		p.mu.Unlock()
		if slices.Equal(routed, []string{"passthrough:///leader", "passthrough:///leader"}) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, fb, "t", futs)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.streamsOpen != 2 {
		t.Fatalf("%d publish streams opened, want 2 (the dialled node's and the leader's)", fb.streamsOpen)
	}
	for part, addr := range routed {
		if addr != "passthrough:///leader" {
			t.Fatalf("partition %d goes to %q after 10 s of rounds, want the leader", part, addr)
		}
	}
}
