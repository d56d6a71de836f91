package group

import (
	"cmp"
	"slices"
)

// Assign computes a sticky, balanced assignment of the partitions
// 0..partitions-1 of one topic to members, starting from current.
//
// The result:
//   - has one entry per distinct member, holding a sorted, non-nil (maybe
//     empty) slice; ids in current that are not in members own nothing;
//   - gives each partition to exactly one member when there is at least one
//     member (no member: an empty map);
//   - is balanced: the partition counts of two members differ by at most 1;
//   - moves as few partitions as a balanced result allows: a partition keeps
//     its current owner unless that owner left or is above its share;
//   - is deterministic: it depends on the set of members, not their order.
//
// Ownership in current is read leniently: partitions < 0 or >= partitions
// are dropped, duplicates are ignored, and a partition listed under several
// members belongs to the one with the smallest id.
//
// The quota (base or base+1 partitions) goes first to the members that own
// the most partitions now (tie: smaller id); that choice maximizes the
// number of partitions that stay, hence minimizes the moves. A member above
// its quota keeps its lowest-numbered partitions; the freed and unowned
// partitions go, lowest first, to members below quota in id order.
//
// REQUIRES: partitions is small enough to allocate O(partitions) memory
// (Group bounds it with Config.MaxPartitions). current is only read; the
// result shares no memory with it.
func Assign(current map[string][]int32, members []string, partitions int32) map[string][]int32 {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string][]int32, len(ids))
	if len(ids) == 0 {
		return out
	}
	partitions = max(partitions, 0)
	owned := validOwnership(current, ids, partitions)
	quota := quotas(ids, owned, partitions)

	taken := make([]bool, partitions)
	for _, id := range ids {
		keep := owned[id][:min(len(owned[id]), quota[id])]
		out[id] = append(make([]int32, 0, quota[id]), keep...)
		for _, p := range keep {
			taken[p] = true
		}
	}
	var pool []int32
	for p := range partitions {
		if !taken[p] {
			pool = append(pool, p)
		}
	}
	for _, id := range ids {
		need := quota[id] - len(out[id])
		out[id] = append(out[id], pool[:need]...)
		pool = pool[need:]
		slices.Sort(out[id])
	}
	if len(pool) != 0 {
		panic("group: Assign left partitions unowned")
	}
	return out
}

// validOwnership returns, for each id in ids (sorted, distinct), the sorted
// partitions of current[id] that are in range and not claimed by a smaller
// id.
func validOwnership(current map[string][]int32, ids []string, partitions int32) map[string][]int32 {
	claimed := make([]bool, partitions)
	owned := make(map[string][]int32, len(ids))
	for _, id := range ids {
		var mine []int32
		for _, p := range current[id] {
			if p >= 0 && p < partitions && !claimed[p] {
				claimed[p] = true
				mine = append(mine, p)
			}
		}
		slices.Sort(mine)
		owned[id] = mine
	}
	return owned
}

// quotas gives each member base = partitions/len(ids) partitions, plus one
// for the partitions%len(ids) members that own the most now (tie: smaller
// id). Only a member owning more than base gains from the extra one, so
// this order keeps the most partitions in place.
func quotas(ids []string, owned map[string][]int32, partitions int32) map[string]int {
	n := len(ids)
	base, extra := int(partitions)/n, int(partitions)%n
	byOwned := slices.Clone(ids)
	slices.SortStableFunc(byOwned, func(a, b string) int {
		return cmp.Compare(len(owned[b]), len(owned[a])) // more owned first; ids already sorted
	})
	q := make(map[string]int, n)
	for i, id := range byOwned {
		q[id] = base
		if i < extra {
			q[id]++
		}
	}
	return q
}
