package group

import (
	"cmp"
	"slices"
)

// Changes are the actions an event asks of the broker: per member whose
// assignment changed, the partitions it lost and the ones it gained.
//
// The broker applies every Revoked list (stops delivering those partitions
// and drops their in-flight state) before it starts any Assigned partition
// from the committed offset, so a partition is never delivered by two
// members at once on this node. A member that left or expired appears
// with all its partitions in Revoked.
type Changes struct {
	// Generation is the group's generation after the event. It differs from
	// the generation before the event iff Members is not empty.
	Generation int64
	// Members is sorted by ID and lists only members whose assignment
	// changed. The slices are owned by the caller.
	Members []MemberChange
}

// Empty reports whether the event changed no assignment.
func (c Changes) Empty() bool { return len(c.Members) == 0 }

// MemberChange is the change of one member's assignment within one topic.
type MemberChange struct {
	ID    string
	Topic string
	// Revoked and Assigned are sorted and disjoint.
	Revoked  []int32
	Assigned []int32
}

// diff returns the sorted partitions of old not in new (revoked) and of new
// not in old (assigned). REQUIRES: old and new sorted, without duplicates.
func diff(old, new []int32) (revoked, assigned []int32) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || (i < len(old) && old[i] < new[j]):
			revoked = append(revoked, old[i])
			i++
		case i == len(old) || new[j] < old[i]:
			assigned = append(assigned, new[j])
			j++
		default:
			i++
			j++
		}
	}
	return revoked, assigned
}

// changeSet collects the member changes of one event before they are
// committed under one new generation.
type changeSet struct{ members []MemberChange }

func (s *changeSet) add(id, topic string, old, new []int32) {
	rev, asg := diff(old, new)
	if len(rev) == 0 && len(asg) == 0 {
		return
	}
	s.members = append(s.members, MemberChange{ID: id, Topic: topic, Revoked: rev, Assigned: asg})
}

// sorted returns the changes ordered by member id.
func (s *changeSet) sorted() []MemberChange {
	slices.SortFunc(s.members, func(a, b MemberChange) int { return cmp.Compare(a.ID, b.ID) })
	return s.members
}
