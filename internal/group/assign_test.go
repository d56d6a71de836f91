package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

type parts = []int32

func TestAssign(t *testing.T) {
	tests := []struct {
		name       string
		current    map[string][]int32
		members    []string
		partitions int32
		want       map[string][]int32
		wantMoved  int // partitions whose owner changed, including from a member that left
	}{
		{"no members", map[string][]int32{"a": {0}}, nil, 4, map[string][]int32{}, 0},
		{"first member gets all", nil, []string{"a"}, 4, map[string][]int32{"a": {0, 1, 2, 3}}, 0},
		{"second joins: half move", map[string][]int32{"a": {0, 1, 2, 3}}, []string{"a", "b"}, 4,
			map[string][]int32{"a": {0, 1}, "b": {2, 3}}, 2},
		{"third joins 6 partitions: 2 move", map[string][]int32{"a": {0, 1, 2}, "b": {3, 4, 5}}, []string{"c", "b", "a"}, 6,
			map[string][]int32{"a": {0, 1}, "b": {3, 4}, "c": {2, 5}}, 2},
		{"member leaves: only its partitions move", map[string][]int32{"a": {0, 1}, "b": {2, 3}, "c": {4, 5}}, []string{"a", "c"}, 6,
			map[string][]int32{"a": {0, 1, 2}, "c": {3, 4, 5}}, 2},
		{"more members than partitions", map[string][]int32{"a": {0}, "b": {1}}, []string{"a", "b", "c", "d"}, 2,
			map[string][]int32{"a": {0}, "b": {1}, "c": {}, "d": {}}, 0},
		{"partitions grow", map[string][]int32{"a": {0, 1}, "b": {2, 3}}, []string{"a", "b"}, 7,
			map[string][]int32{"a": {0, 1, 4, 5}, "b": {2, 3, 6}}, 0},
		{"extra slot to the member holding more", map[string][]int32{"a": {0}, "b": {1, 2, 3, 4}}, []string{"a", "b"}, 5,
			map[string][]int32{"a": {0, 4}, "b": {1, 2, 3}}, 1},
		{"out of range, duplicates and conflicts dropped", map[string][]int32{"a": {5, 1, 1, -1}, "b": {1, 0}}, []string{"a", "b"}, 2,
			map[string][]int32{"a": {1}, "b": {0}}, 0},
		{"duplicate member ids", nil, []string{"b", "a", "b"}, 3, map[string][]int32{"a": {0, 1}, "b": {2}}, 0},
		{"zero partitions", map[string][]int32{"a": {0}}, []string{"a"}, 0, map[string][]int32{"a": {}}, 0},
		{"leaver's partitions spread, stayers above share give up", map[string][]int32{"a": {0, 1, 2, 3}, "b": {4, 5}, "x": {6, 7}}, []string{"a", "b", "c"}, 8,
			map[string][]int32{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assign(tt.current, tt.members, tt.partitions)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Assign = %v, want %v", got, tt.want)
			}
			all := slices.Collect(maps.Keys(tt.current))
			if moved := countMoved(tt.current, all, tt.partitions, got); moved != tt.wantMoved {
				t.Fatalf("%d partitions changed owner, want %d", moved, tt.wantMoved)
			}
		})
	}
}

func TestAssignDoesNotAliasInput(t *testing.T) {
	current := map[string][]int32{"a": {0, 1}}
	got := Assign(current, []string{"a"}, 2)
	got["a"][0] = 9
	if current["a"][0] != 0 {
		t.Fatalf("Assign result aliases its input")
	}
}

// TestAssignProperties checks Assign on random small inputs against a brute
// force over every balanced assignment.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"a", "b", "c", "d", "e"}
	for iter := range 300 {
		partitions := rng.Int32N(7)
		current := map[string][]int32{}
		for _, id := range pool {
			for range rng.IntN(4) {
				current[id] = append(current[id], rng.Int32N(partitions+2)-1) // some out of range
			}
		}
		var members []string
		for _, id := range pool[:4] { // "e" only ever appears in current: a member that left
			if rng.IntN(3) > 0 {
				members = append(members, id)
			}
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		name := fmt.Sprintf("iter %d: current=%v members=%v partitions=%d", iter, current, members, partitions)

		got := Assign(current, members, partitions)
		checkAssignment(t, name, got, members, partitions)
		if moved, best := countMoved(current, members, partitions, got), bruteMinMoves(current, members, partitions); moved != best {
			t.Fatalf("%s: moved %d, minimum is %d (got %v)", name, moved, best, got)
		}
		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		if again := Assign(current, reversed, partitions); !reflect.DeepEqual(again, got) {
			t.Fatalf("%s: not deterministic: %v then %v", name, got, again)
		}
	}
}

// checkAssignment checks exact ownership, balance and sortedness.
func checkAssignment(t *testing.T, name string, got map[string][]int32, members []string, partitions int32) {
	t.Helper()
	owner := make(map[int32]string)
	lo, hi := int(partitions)+1, -1
	for id, ps := range got {
		if !slices.Contains(members, id) {
			t.Fatalf("%s: non-member %q owns %v", name, id, ps)
		}
		if ps == nil || !slices.IsSorted(ps) {
			t.Fatalf("%s: %q has nil or unsorted %v", name, id, ps)
		}
		lo, hi = min(lo, len(ps)), max(hi, len(ps))
		for _, p := range ps {
			if p < 0 || p >= partitions || owner[p] != "" {
				t.Fatalf("%s: partition %d out of range or owned twice (%q, %q)", name, p, owner[p], id)
			}
			owner[p] = id
		}
	}
	if len(members) > 0 && (len(owner) != int(partitions) || hi-lo > 1) {
		t.Fatalf("%s: %d of %d partitions owned, counts in [%d,%d]: %v", name, len(owner), partitions, lo, hi, got)
	}
}

// refOwner is the documented reading of current: among owners, the
// smallest id listing an in-range partition p owns it ("" for none).
func refOwner(current map[string][]int32, owners []string, partitions, p int32) string {
	owner := ""
	for _, id := range owners {
		if p >= 0 && p < partitions && slices.Contains(current[id], p) && (owner == "" || id < owner) {
			owner = id
		}
	}
	return owner
}

// countMoved counts the partitions whose owner per refOwner(owners) is not
// their owner in got. With owners = members it counts the moves a sticky
// assignment should minimize; with owners = every id of current it also
// counts the partitions of members that left.
func countMoved(current map[string][]int32, owners []string, partitions int32, got map[string][]int32) int {
	moved := 0
	for id, ps := range got {
		for _, p := range ps {
			if o := refOwner(current, owners, partitions, p); o != "" && o != id {
				moved++
			}
		}
	}
	return moved
}

// bruteMinMoves enumerates every assignment of the partitions to the
// distinct members and returns the fewest moves among the balanced ones.
func bruteMinMoves(current map[string][]int32, members []string, partitions int32) int {
	ids := slices.Compact(slices.Sorted(slices.Values(members)))
	if len(ids) == 0 {
		return 0
	}
	best := -1
	choice := make([]int, partitions)
	var walk func(p int)
	walk = func(p int) {
		if p == len(choice) {
			counts := make([]int, len(ids))
			moves := 0
			for q, c := range choice {
				counts[c]++
				if o := refOwner(current, ids, partitions, int32(q)); o != "" && o != ids[c] {
					moves++
				}
			}
			if slices.Max(counts)-slices.Min(counts) <= 1 && (best < 0 || moves < best) {
				best = moves
			}
			return
		}
		for c := range ids {
			choice[p] = c
			walk(p + 1)
		}
	}
	walk(0)
	return best
}
