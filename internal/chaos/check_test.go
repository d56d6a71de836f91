package chaos

import (
	"strings"
	"testing"
	"time"
)

// A history and what was read back, written by hand so that each safety
// property is broken once, with the rest as a correct run would have it.
func TestCheckerNamesEveryViolation(t *testing.T) {
	s := time.Second
	ok := func(worker, mode, topic string, start time.Duration, vals []string, acks ...Pos) PublishOp {
		return PublishOp{Worker: worker, Mode: mode, Topic: topic, Node: 1, Start: start, End: start + 10*time.Millisecond, Values: vals, OK: true, Acks: acks}
	}
	c := &campaign{cfg: Config{Seed: 7, Nodes: 3}, h: newHistory()}
	c.h.publishes = []PublishOp{
		ok("c0", "consistent", topicConsistent, 1*s, []string{"c0-0", "c0-1"}, Pos{0, 0}, Pos{0, 1}),
		ok("c0", "consistent", topicConsistent, 2*s, []string{"c0-2"}, Pos{0, 2}), // lost
		ok("c0", "consistent", topicConsistent, 3*s, []string{"c0-3"}, Pos{1, 5}), // acknowledged at 1@5, found at 1@0
		ok("c1", "consistent", topicConsistent, 1*s, []string{"c1-0"}, Pos{2, 1}),
		ok("c1", "consistent", topicConsistent, 2*s, []string{"c1-1"}, Pos{2, 0}), // sent after c1-0 was acknowledged, stored before it
		{Worker: "c2", Mode: "consistent", Topic: topicConsistent, Start: 1 * s, End: 2 * s, Values: []string{"c2-0"}, Err: "deadline"},
		ok("c3", "consistent", topicConsistent, 1*s, []string{"c3-0"}, Pos{1, 2}),
		ok("e0", "eventual", topicEventual, 1*s, []string{"e0-0"}, Pos{0, 0}), // lost, but eventual
	}
	reads := logs{
		topicConsistent: {
			0: {{0, "c0-0"}, {1, "c0-1"}, {3, "c2-0"}, {4, "c0-1"}}, // c0-1 twice
			1: {{0, "c0-3"}, {1, "ghost"}, {2, "c3-0"}},             // ghost never sent
			2: {{0, "c1-1"}, {1, "c1-0"}},
		},
		topicEventual: {0: {}, 1: {}, 2: {}},
	}
	replicas := map[int]logs{
		1: reads,
		2: {topicConsistent: {0: {{0, "c0-0"}, {1, "other"}}}}, // diverges, and ends early
	}
	c.h.polls = []Poll{
		{Member: "m", Session: 1, Epoch: 1, Partition: 0, Offset: 0, Value: "c0-0"},
		{Member: "m", Session: 1, Epoch: 1, Partition: 0, Offset: 4, Value: "c0-1"}, // skips 1 and 3
		{Member: "m", Session: 1, Epoch: 1, Partition: 0, Offset: 0, Value: "c0-0"}, // back: allowed
		{Member: "m", Session: 1, Epoch: 1, Partition: 2, Offset: 0, Value: "c1-1"},
		// Partition 1 moves to m2 and back between two of m's polls, too
		// fast for m to see a new assignment: not a skip.
		{Member: "m", Session: 1, Epoch: 1, Partition: 1, Offset: 0, Value: "c0-3", At: 1 * s},
		{Member: "m2", Session: 1, Epoch: 1, Partition: 1, Offset: 1, Value: "ghost", At: 2 * s},
		{Member: "m", Session: 1, Epoch: 1, Partition: 1, Offset: 2, Value: "c3-0", At: 3 * s},
		// A member acking each record gets offset 1 of partition 1 after
		// offset 2 (a redelivery): out of order, not skipped.
		{Member: "pm", Session: 1, Epoch: 1, Partition: 1, Offset: 0, Value: "c0-3", At: 4 * s},
		{Member: "pm", Session: 1, Epoch: 1, Partition: 1, Offset: 2, Value: "c3-0", At: 4 * s},
		{Member: "pm", Session: 1, Epoch: 1, Partition: 1, Offset: 1, Value: "ghost", At: 5 * s},
	}
	c.h.commits = []CommitSample{{At: 1 * s, Partition: 2, Committed: 2}, {At: 2 * s, Partition: 2, Committed: 1}}
	r := c.check(reads, replicas, map[string]string{
		replicaKey(3, topicConsistent, 0): "node 3, chaos-consistent/0: at 7: corrupt batch",
		replicaKey(3, topicEventual, 0):   "node 3: 0 directories for topic chaos-eventual",
	}, map[int32]int64{2: 2})

	want := map[string]int{Lost: 1, Duplicated: 1, Unexpected: 1, InconsistentOffsets: 1, Divergence: 3,
		OutOfOrder: 1, PollSkip: 1, GroupProgressLost: 2}
	for k, n := range want {
		if f := r.Violations[k]; f == nil || f.Count != n {
			t.Errorf("%s: %+v, want %d", k, f, n)
		}
	}
	for k := range r.Violations {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected finding %s: %+v", k, r.Violations[k])
		}
	}
	if r.Valid {
		t.Error("a run with violations is valid")
	}
	if len(r.Anomalies) != 1 || r.Anomalies[0].Kind != "replica-damaged" {
		t.Errorf("anomalies: %+v, want the damaged replica", r.Anomalies)
	}
	if f := r.Allowed[LostEventual]; f == nil || f.Count != 1 {
		t.Errorf("lost eventual: %+v", f)
	}
	if f := r.Allowed[NonMonotonicPoll]; f == nil || f.Count != 2 {
		t.Errorf("nonmonotonic: %+v", f)
	}
	text := r.Text()
	for _, s := range []string{"INVALID", "lost                   1", "c0-2 acknowledged at chaos-consistent/0@2"} {
		if !strings.Contains(text, s) {
			t.Errorf("report lacks %q:\n%s", s, text)
		}
	}
	if svg := r.SVG(); !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "INVALID") {
		t.Errorf("timeline: %.200s", svg)
	}
}

// A correct run is valid: nothing lost, nothing extra, replicas equal,
// consumers in order.
func TestCheckerPassesACorrectRun(t *testing.T) {
	c := &campaign{cfg: Config{Seed: 1, Nodes: 3}, h: newHistory()}
	reads := logs{topicConsistent: {0: nil, 1: nil, 2: nil}, topicEventual: {0: nil, 1: nil, 2: nil}}
	for i := range 50 {
		v := "c0-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		p := int32(i % 3)
		off := int64(len(reads[topicConsistent][p]))
		c.h.publishes = append(c.h.publishes, PublishOp{Worker: "c0", Mode: "consistent", Topic: topicConsistent,
			Start: time.Duration(i) * time.Millisecond * 10, End: time.Duration(i)*time.Millisecond*10 + time.Millisecond,
			Values: []string{v}, OK: true, Acks: []Pos{{p, off}}})
		reads[topicConsistent][p] = append(reads[topicConsistent][p], Rec{off, v})
		c.h.polls = append(c.h.polls, Poll{Member: "m", Session: 1, Epoch: 1, Partition: p, Offset: off, Value: v})
	}
	replicas := map[int]logs{1: reads, 2: reads, 3: reads}
	r := c.check(reads, replicas, nil, map[int32]int64{0: 17, 1: 17, 2: 16})
	if len(r.Anomalies) != 0 {
		t.Errorf("anomalies in a correct run: %+v", r.Anomalies)
	}
	if !r.Valid {
		t.Fatalf("a correct run is invalid:\n%s", r.Text())
	}
	if r.Modes["consistent"].Records != 50 {
		t.Errorf("counts: %+v", r.Modes)
	}
}
