package group

import (
	"cmp"
	"slices"
	"time"
)

// Defaults and limits of Config.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultMaxMembers     = 1000
	DefaultMaxPartitions  = 1 << 16
)

// Config bounds one group. Zero fields take their defaults.
type Config struct {
	// SessionTimeout is how long a member stays without a heartbeat before
	// Expire removes it. Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxMembers bounds the members of the group; Join of one more returns
	// ErrGroupFull. Default DefaultMaxMembers.
	MaxMembers int
	// MaxPartitions bounds a topic's partition count as given to Join and
	// SetPartitions (ErrInvalidPartitions above it). Default
	// DefaultMaxPartitions.
	MaxPartitions int32
}

func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.MaxMembers <= 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	if c.MaxPartitions <= 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	return c
}

// MemberInfo describes one member, as returned by Members.
type MemberInfo struct {
	ID            string
	Topic         string
	Partitions    []int32 // sorted; owned by the caller
	LastHeartbeat time.Time
}

// Group is the coordinator state of one consumer group: its members, each
// subscribed to one topic, and the assignment of every such topic's
// partitions among the members subscribed to it (see Assign).
//
// Each method is one event; the ones that can move partitions return the
// Changes the broker must apply. Group reads no clock: time comes in as
// `now`. Not safe for concurrent use; the caller serializes calls.
//
// Invariants (checked by checkInvariants in the tests), after every method:
//   - each partition of a topic is owned by at most one member, and by
//     exactly one while the topic has members;
//   - the partition counts of the members of one topic differ by <= 1;
//   - generation increases by exactly 1 on every event that changes some
//     member's assignment, and never otherwise.
type Group struct {
	name    string
	cfg     Config
	members map[string]*member
	topics  map[string]*topic // only topics with at least one member
	// generation counts the events that changed some assignment.
	generation int64
}

type member struct {
	id, topic string
	parts     []int32   // sorted; Invariant: t.owners[p] == id for each p
	lastHB    time.Time // latest heartbeat seen; never goes back
}

type topic struct {
	name       string
	partitions int32
	members    map[string]*member
	// owners[p] is the member owning partition p, "" for none.
	// Invariant: len(owners) == partitions.
	owners []string
}

// New returns an empty group. cfg's zero fields take their defaults.
func New(name string, cfg Config) *Group {
	return &Group{
		name:    name,
		cfg:     cfg.withDefaults(),
		members: make(map[string]*member),
		topics:  make(map[string]*topic),
	}
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Generation returns the number of events that changed an assignment.
func (g *Group) Generation() int64 { return g.generation }

// commit turns the collected changes of one event into Changes, bumping
// the generation iff something changed.
func (g *Group) commit(s *changeSet) Changes {
	if len(s.members) == 0 {
		return Changes{Generation: g.generation}
	}
	g.generation++
	return Changes{Generation: g.generation, Members: s.sorted()}
}

// rebalance reassigns t's partitions among its members with Assign and
// records every member whose assignment changed.
func (g *Group) rebalance(t *topic, s *changeSet) {
	current := make(map[string][]int32, len(t.members))
	ids := make([]string, 0, len(t.members))
	for id, m := range t.members {
		current[id] = m.parts
		ids = append(ids, id)
	}
	next := Assign(current, ids, t.partitions)
	clear(t.owners)
	for _, id := range ids {
		m := t.members[id]
		s.add(id, t.name, m.parts, next[id])
		m.parts = next[id]
		for _, p := range m.parts {
			t.owners[p] = id
		}
	}
}

// Members returns every member, sorted by ID. The result is the caller's.
func (g *Group) Members() []MemberInfo {
	out := make([]MemberInfo, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, MemberInfo{
			ID: m.id, Topic: m.topic, Partitions: slices.Clone(m.parts), LastHeartbeat: m.lastHB,
		})
	}
	slices.SortFunc(out, func(a, b MemberInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Assignment returns the topic and partitions (sorted, the caller's) of
// memberID and the current generation; ok is false for an unknown member.
func (g *Group) Assignment(memberID string) (topic string, parts []int32, generation int64, ok bool) {
	m, ok := g.members[memberID]
	if !ok {
		return "", nil, g.generation, false
	}
	return m.topic, slices.Clone(m.parts), g.generation, true
}

// Owner returns the member that owns partition of topic; ok is false when
// the topic has no member or the partition is out of range.
func (g *Group) Owner(topic string, partition int32) (memberID string, ok bool) {
	t, found := g.topics[topic]
	if !found || partition < 0 || partition >= t.partitions {
		return "", false
	}
	return t.owners[partition], t.owners[partition] != ""
}

// Partitions returns the partition count the group knows for topic, 0 if
// the topic has no member.
func (g *Group) Partitions(topic string) int32 {
	if t, ok := g.topics[topic]; ok {
		return t.partitions
	}
	return 0
}
