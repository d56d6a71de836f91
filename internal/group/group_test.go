package group

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// step is one event of a group script and what it must produce.
type step struct {
	op          string // join, leave, hb, expire, grow
	id, topic   string
	n           int32         // partitions for join and grow
	at          time.Duration // now = t0 + at
	wantErr     error
	want        []MemberChange // nil: no assignment change
	wantExpired []string
}

func mc(id, topic string, revoked, assigned []int32) MemberChange {
	return MemberChange{ID: id, Topic: topic, Revoked: revoked, Assigned: assigned}
}

// groupScripts are the scripted scenarios of TestGroupScripts.
var groupScripts = []struct {
	name  string
	cfg   Config
	steps []step
}{
	{"join, rejoin, leave", Config{}, []step{
		{op: "join", id: "a", topic: "t", n: 4, want: []MemberChange{mc("a", "t", nil, parts{0, 1, 2, 3})}},
		{op: "join", id: "b", topic: "t", n: 4, want: []MemberChange{
			mc("a", "t", parts{2, 3}, nil), mc("b", "t", nil, parts{2, 3})}},
		{op: "join", id: "b", topic: "t", n: 4}, // idempotent
		{op: "join", id: "b", topic: "t", n: 2}, // stale smaller count ignored
		{op: "join", id: "b", topic: "other", n: 4, wantErr: ErrMemberExists},
		{op: "leave", id: "a", want: []MemberChange{
			mc("a", "t", parts{0, 1}, nil), mc("b", "t", nil, parts{0, 1})}},
		{op: "leave", id: "a", wantErr: ErrUnknownMember},
		{op: "hb", id: "a", wantErr: ErrUnknownMember},
		{op: "leave", id: "b", want: []MemberChange{mc("b", "t", parts{0, 1, 2, 3}, nil)}},
	}},
	{"third member on 6 partitions moves 2", Config{}, []step{
		{op: "join", id: "a", topic: "t", n: 6, want: []MemberChange{mc("a", "t", nil, parts{0, 1, 2, 3, 4, 5})}},
		{op: "join", id: "b", topic: "t", n: 6, want: []MemberChange{
			mc("a", "t", parts{3, 4, 5}, nil), mc("b", "t", nil, parts{3, 4, 5})}},
		{op: "join", id: "c", topic: "t", n: 6, want: []MemberChange{
			mc("a", "t", parts{2}, nil), mc("b", "t", parts{5}, nil), mc("c", "t", nil, parts{2, 5})}},
	}},
	{"member beyond partition count gets nothing, no new generation", Config{}, []step{
		{op: "join", id: "a", topic: "t", n: 1, want: []MemberChange{mc("a", "t", nil, parts{0})}},
		{op: "join", id: "b", topic: "t", n: 1},
		{op: "leave", id: "a", want: []MemberChange{mc("a", "t", parts{0}, nil), mc("b", "t", nil, parts{0})}},
	}},
	{"topics are assigned independently", Config{}, []step{
		{op: "join", id: "a", topic: "t1", n: 2, want: []MemberChange{mc("a", "t1", nil, parts{0, 1})}},
		{op: "join", id: "b", topic: "t2", n: 2, want: []MemberChange{mc("b", "t2", nil, parts{0, 1})}},
		{op: "join", id: "c", topic: "t1", n: 2, want: []MemberChange{
			mc("a", "t1", parts{1}, nil), mc("c", "t1", nil, parts{1})}},
		{op: "leave", id: "b", want: []MemberChange{mc("b", "t2", parts{0, 1}, nil)}},
	}},
	{"session expiry", Config{SessionTimeout: 10 * time.Second}, []step{
		{op: "join", id: "a", topic: "t", n: 2, want: []MemberChange{mc("a", "t", nil, parts{0, 1})}},
		{op: "join", id: "b", topic: "t", n: 2, want: []MemberChange{mc("a", "t", parts{1}, nil), mc("b", "t", nil, parts{1})}},
		{op: "join", id: "c", topic: "u", n: 1, at: time.Second / 2, want: []MemberChange{mc("c", "u", nil, parts{0})}},
		{op: "hb", id: "b", at: 8 * time.Second},
		{op: "hb", id: "b", at: 5 * time.Second}, // an older now does not shorten the session
		{op: "expire", at: 10 * time.Second},     // exactly SessionTimeout: not older yet
		{op: "expire", at: 11 * time.Second, wantExpired: []string{"a", "c"}, want: []MemberChange{
			mc("a", "t", parts{0}, nil), mc("b", "t", nil, parts{0}), mc("c", "u", parts{0}, nil)}},
		{op: "hb", id: "a", at: 11 * time.Second, wantErr: ErrUnknownMember},
		{op: "expire", at: 18 * time.Second},
		{op: "expire", at: 18*time.Second + 1, wantExpired: []string{"b"}, want: []MemberChange{mc("b", "t", parts{0, 1}, nil)}},
	}},
	{"partitions grow", Config{MaxPartitions: 8}, []step{
		{op: "join", id: "a", topic: "t", n: 2, want: []MemberChange{mc("a", "t", nil, parts{0, 1})}},
		{op: "join", id: "b", topic: "t", n: 2, want: []MemberChange{mc("a", "t", parts{1}, nil), mc("b", "t", nil, parts{1})}},
		{op: "grow", topic: "t", n: 5, want: []MemberChange{mc("a", "t", nil, parts{2, 3}), mc("b", "t", nil, parts{4})}},
		{op: "grow", topic: "t", n: 3},                                // shrink ignored
		{op: "grow", topic: "none", n: 3},                             // no member: nothing to do
		{op: "grow", topic: "t", n: 9, wantErr: ErrInvalidPartitions}, // above MaxPartitions
		{op: "join", id: "b", topic: "t", n: 6, want: []MemberChange{mc("b", "t", nil, parts{5})}},
	}},
	{"bounds and invalid arguments", Config{MaxMembers: 2}, []step{
		{op: "join", id: "", topic: "t", n: 1, wantErr: ErrInvalidArgument},
		{op: "join", id: "a", topic: "", n: 1, wantErr: ErrInvalidArgument},
		{op: "join", id: "a", topic: "t", n: 0, wantErr: ErrInvalidPartitions},
		{op: "join", id: "a", topic: "t", n: DefaultMaxPartitions + 1, wantErr: ErrInvalidPartitions},
		{op: "join", id: "a", topic: "t", n: 1, want: []MemberChange{mc("a", "t", nil, parts{0})}},
		{op: "join", id: "b", topic: "t", n: 1},
		{op: "join", id: "c", topic: "t", n: 1, wantErr: ErrGroupFull},
	}},
}

func TestGroupScripts(t *testing.T) {
	for _, tt := range groupScripts {
		t.Run(tt.name, func(t *testing.T) {
			g := New("g", tt.cfg)
			for i, st := range tt.steps {
				runStep(t, g, fmt.Sprintf("step %d (%s %s)", i, st.op, st.id), st)
			}
		})
	}
}

func runStep(t *testing.T, g *Group, name string, st step) {
	t.Helper()
	before := g.Generation()
	now := t0.Add(st.at)
	var ch Changes
	var err error
	var expired []string
	switch st.op {
	case "join":
		ch, err = g.Join(st.id, st.topic, st.n, now)
	case "leave":
		ch, err = g.Leave(st.id)
	case "hb":
		err = g.Heartbeat(st.id, now)
		ch = Changes{Generation: g.Generation()}
	case "expire":
		expired, ch = g.Expire(now)
	case "grow":
		ch, err = g.SetPartitions(st.topic, st.n)
	default:
		t.Fatalf("%s: unknown op", name)
	}
	if !errors.Is(err, st.wantErr) {
		t.Fatalf("%s: err %v, want %v", name, err, st.wantErr)
	}
	if !reflect.DeepEqual(ch.Members, st.want) || !reflect.DeepEqual(expired, st.wantExpired) {
		t.Fatalf("%s: changes %+v expired %v, want %+v expired %v", name, ch.Members, expired, st.want, st.wantExpired)
	}
	wantGen := before
	if len(st.want) > 0 {
		wantGen++
	}
	if ch.Generation != wantGen || g.Generation() != wantGen {
		t.Fatalf("%s: generation %d (Changes %d), want %d", name, g.Generation(), ch.Generation, wantGen)
	}
	if err := checkInvariants(g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// checkInvariants checks the invariants documented on Group against its
// public view and its internal indexes.
func checkInvariants(g *Group) error {
	owners := map[string]map[int32]string{}
	counts := map[string][]int{}
	for _, m := range g.Members() {
		topic, ps, _, ok := g.Assignment(m.ID)
		if !ok || topic != m.Topic || !slices.Equal(ps, m.Partitions) || !slices.IsSorted(ps) {
			return fmt.Errorf("member %s: Assignment %v %v disagrees with Members %+v", m.ID, topic, ps, m)
		}
		if owners[topic] == nil {
			owners[topic] = map[int32]string{}
		}
		for _, p := range ps {
			if prev, dup := owners[topic][p]; dup {
				return fmt.Errorf("topic %s partition %d owned by %s and %s", topic, p, prev, m.ID)
			}
			owners[topic][p] = m.ID
			if o, ok := g.Owner(topic, p); !ok || o != m.ID {
				return fmt.Errorf("Owner(%s, %d) = %q, want %q", topic, p, o, m.ID)
			}
		}
		counts[topic] = append(counts[topic], len(ps))
	}
	if len(owners) != len(g.topics) {
		return fmt.Errorf("%d topics with members, %d tracked", len(owners), len(g.topics))
	}
	for topic, c := range counts {
		n := g.Partitions(topic)
		if len(owners[topic]) != int(n) || slices.Max(c)-slices.Min(c) > 1 {
			return fmt.Errorf("topic %s: %d of %d partitions owned, counts %v", topic, len(owners[topic]), n, c)
		}
	}
	return nil
}

func TestGroupQueries(t *testing.T) {
	g := New("orders", Config{SessionTimeout: time.Second})
	if _, ok := g.NextExpiry(); ok {
		t.Fatalf("NextExpiry with no member: ok")
	}
	mustJoin(t, g, "b", "t", 3, t0.Add(time.Second))
	mustJoin(t, g, "a", "t", 3, t0)
	if at, ok := g.NextExpiry(); !ok || !at.Equal(t0.Add(time.Second+1)) {
		t.Fatalf("NextExpiry = %v %v", at, ok)
	}
	if exp, _ := g.Expire(t0.Add(time.Second + 1)); !slices.Equal(exp, []string{"a"}) {
		t.Fatalf("Expire at NextExpiry = %v, want [a]", exp)
	}
	members := g.Members()
	if len(members) != 1 || members[0].ID != "b" || !members[0].LastHeartbeat.Equal(t0.Add(time.Second)) {
		t.Fatalf("Members = %+v", members)
	}
	members[0].Partitions[0] = 99 // the caller owns the copy
	if _, ps, gen, ok := g.Assignment("b"); !ok || !slices.Equal(ps, parts{0, 1, 2}) || gen != g.Generation() {
		t.Fatalf("Assignment(b) = %v %d %v", ps, gen, ok)
	}
	if _, _, _, ok := g.Assignment("a"); ok {
		t.Fatalf("Assignment of expired member: ok")
	}
	for _, p := range []int32{-1, 3} {
		if _, ok := g.Owner("t", p); ok {
			t.Fatalf("Owner(t, %d): ok", p)
		}
	}
	if _, ok := g.Owner("nope", 0); ok || g.Name() != "orders" {
		t.Fatalf("Owner of unknown topic: ok, or bad name %q", g.Name())
	}
}

func mustJoin(t *testing.T, g *Group, id, topic string, n int32, now time.Time) {
	t.Helper()
	if _, err := g.Join(id, topic, n, now); err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
}

// TestGroupRandom drives a group with random events and checks, after
// each, the invariants and that applying the returned Changes to a
// broker-side copy of the assignment (revocations first) reproduces it.
func TestGroupRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ids := []string{"a", "b", "c", "d", "e", "f"}
	topics := []string{"t1", "t2"}
	g := New("g", Config{SessionTimeout: 10 * time.Second, MaxMembers: 5})
	model := map[string]map[int32]bool{} // member -> owned partitions, as the broker sees it
	now := t0
	for i := range 2000 {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		id, topic := ids[rng.IntN(len(ids))], topics[rng.IntN(len(topics))]
		before := g.Generation()
		var ch Changes
		switch rng.IntN(5) {
		case 0, 1:
			ch, _ = g.Join(id, topic, 1+rng.Int32N(8), now)
		case 2:
			ch, _ = g.Leave(id)
		case 3:
			_ = g.Heartbeat(id, now)
			ch = Changes{Generation: g.Generation()}
		case 4:
			_, ch = g.Expire(now)
		}
		if want := before + int64(min(1, len(ch.Members))); ch.Generation != want {
			t.Fatalf("event %d: generation %d, want %d", i, ch.Generation, want)
		}
		applyChanges(t, model, ch)
		if err := checkInvariants(g); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		for _, id := range ids {
			_, want, _, _ := g.Assignment(id)
			if got := slices.Sorted(maps.Keys(model[id])); !slices.Equal(got, want) {
				t.Fatalf("event %d: member %s owns %v per Changes, %v per Group", i, id, got, want)
			}
		}
	}
}

func applyChanges(t *testing.T, model map[string]map[int32]bool, ch Changes) {
	t.Helper()
	for _, c := range ch.Members {
		for _, p := range c.Revoked {
			if !model[c.ID][p] {
				t.Fatalf("%s revoked %d it did not own", c.ID, p)
			}
			delete(model[c.ID], p)
		}
	}
	for _, c := range ch.Members {
		if model[c.ID] == nil {
			model[c.ID] = map[int32]bool{}
		}
		for _, p := range c.Assigned {
			model[c.ID][p] = true
		}
	}
}
