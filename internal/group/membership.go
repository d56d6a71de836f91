package group

import (
	"slices"
	"time"
)

// Join adds memberID to the group, subscribed to topic, which has the given
// number of partitions, and rebalances that topic. The member's session
// starts at now.
//
// Joining again with the same topic is idempotent: it counts as a
// heartbeat and, if partitions grew, as SetPartitions. Partition counts
// only grow; a smaller count than the group knows is taken as a stale view
// and ignored.
//
// Errors: ErrInvalidArgument (empty memberID or topic), ErrInvalidPartitions
// (partitions < 1 or > Config.MaxPartitions), ErrMemberExists (memberID is
// subscribed to another topic), ErrGroupFull. On error nothing changes.
func (g *Group) Join(memberID, topicName string, partitions int32, now time.Time) (Changes, error) {
	if memberID == "" || topicName == "" {
		return g.commit(&changeSet{}), ErrInvalidArgument
	}
	if partitions < 1 || partitions > g.cfg.MaxPartitions {
		return g.commit(&changeSet{}), ErrInvalidPartitions
	}
	if m, ok := g.members[memberID]; ok {
		if m.topic != topicName {
			return g.commit(&changeSet{}), ErrMemberExists
		}
		m.lastHB = later(m.lastHB, now)
		return g.SetPartitions(topicName, partitions)
	}
	if len(g.members) >= g.cfg.MaxMembers {
		return g.commit(&changeSet{}), ErrGroupFull
	}
	t, ok := g.topics[topicName]
	if !ok {
		t = &topic{name: topicName, members: make(map[string]*member)}
		g.topics[topicName] = t
	}
	t.grow(partitions)
	m := &member{id: memberID, topic: topicName, lastHB: now}
	g.members[memberID] = m
	t.members[memberID] = m
	var s changeSet
	g.rebalance(t, &s)
	return g.commit(&s), nil
}

// Leave removes memberID from the group: its partitions are revoked and
// spread over the remaining members of its topic. ErrUnknownMember if it is
// not in the group.
func (g *Group) Leave(memberID string) (Changes, error) {
	m, ok := g.members[memberID]
	if !ok {
		return g.commit(&changeSet{}), ErrUnknownMember
	}
	var s changeSet
	g.rebalance(g.remove(m, &s), &s)
	return g.commit(&s), nil
}

// Heartbeat extends memberID's session: it expires SessionTimeout after the
// latest now passed here or to Join (an older now is ignored).
// ErrUnknownMember if the member is not in the group (it may have expired:
// it must join again).
func (g *Group) Heartbeat(memberID string, now time.Time) error {
	m, ok := g.members[memberID]
	if !ok {
		return ErrUnknownMember
	}
	m.lastHB = later(m.lastHB, now)
	return nil
}

// Expire removes every member whose last heartbeat is more than
// SessionTimeout before now, as if each had left, under one generation.
// expired is sorted.
func (g *Group) Expire(now time.Time) (expired []string, ch Changes) {
	for id, m := range g.members {
		if now.Sub(m.lastHB) > g.cfg.SessionTimeout {
			expired = append(expired, id)
		}
	}
	slices.Sort(expired)
	var s changeSet
	touched := make(map[*topic]bool)
	for _, id := range expired {
		touched[g.remove(g.members[id], &s)] = true
	}
	names := make([]string, 0, len(touched))
	for t := range touched {
		names = append(names, t.name)
	}
	slices.Sort(names) // deterministic order of work; results do not depend on it
	for _, name := range names {
		if t, ok := g.topics[name]; ok {
			g.rebalance(t, &s)
		}
	}
	return expired, g.commit(&s)
}

// NextExpiry returns when the next member would expire if it sent no
// heartbeat (the time at which to call Expire); ok is false with no member.
func (g *Group) NextExpiry() (at time.Time, ok bool) {
	for _, m := range g.members {
		if !ok || m.lastHB.Before(at) {
			at, ok = m.lastHB, true
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return at.Add(g.cfg.SessionTimeout).Add(1), true
}

// SetPartitions records that topic now has the given number of partitions
// and spreads the new ones over its members. A count not above the known
// one is ignored (counts only grow), as is a topic with no member.
// ErrInvalidPartitions for partitions < 1 or > Config.MaxPartitions.
func (g *Group) SetPartitions(topicName string, partitions int32) (Changes, error) {
	if partitions < 1 || partitions > g.cfg.MaxPartitions {
		return g.commit(&changeSet{}), ErrInvalidPartitions
	}
	t, ok := g.topics[topicName]
	if !ok || partitions <= t.partitions {
		return g.commit(&changeSet{}), nil
	}
	t.grow(partitions)
	var s changeSet
	g.rebalance(t, &s)
	return g.commit(&s), nil
}

// remove deletes m from the group, records the revocation of all its
// partitions, and returns its topic (which is dropped from g.topics if m
// was its last member; rebalancing a dropped topic is a no-op).
func (g *Group) remove(m *member, s *changeSet) *topic {
	t := g.topics[m.topic]
	s.add(m.id, m.topic, m.parts, nil)
	for _, p := range m.parts {
		t.owners[p] = ""
	}
	delete(t.members, m.id)
	delete(g.members, m.id)
	if len(t.members) == 0 {
		delete(g.topics, t.name)
	}
	return t
}

// grow raises t's partition count to n if n is larger.
func (t *topic) grow(n int32) {
	if n > t.partitions {
		t.owners = append(t.owners, make([]string, n-t.partitions)...)
		t.partitions = n
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
