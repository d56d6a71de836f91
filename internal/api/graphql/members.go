package graphql

import (
	"sort"
	"sync"

	"github.com/hermes-mq/hermes/internal/broker"
)

// members are the live group subscriptions of this endpoint, by member id,
// so that an ack mutation (a separate request) reaches the subscription
// whose records it acknowledges. Bounded by the broker's open
// subscriptions: a member is added when its subscription opens and removed
// when it closes.
type members struct {
	mu   sync.Mutex
	byID map[string]member // guarded by mu
}

type member struct {
	group string
	sub   broker.Subscription
}

func newMembers() *members { return &members{byID: make(map[string]member)} }

func (m *members) add(group string, sub broker.Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byID[sub.MemberID()] = member{group: group, sub: sub}
}

func (m *members) remove(sub broker.Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byID[sub.MemberID()]; ok && e.sub == sub {
		delete(m.byID, sub.MemberID())
	}
}

// get returns the live subscription of a member of group, or
// ErrUnknownMember.
func (m *members) get(group, id string) (broker.Subscription, error) {
	if err := broker.ValidateName("group", group); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if !ok || e.group != group {
		return nil, errorf(broker.ErrUnknownMember, "group %q has no member %q subscribed through this GraphQL endpoint", group, id)
	}
	return e.sub, nil
}

// forEachPartition groups records by partition, in partition order, for
// Ack and Nack, and returns the first error.
func forEachPartition(recs []*PartitionOffsetInput, fn func(int32, []int64) error) error {
	by := make(map[int32][]int64)
	for _, r := range recs {
		by[r.Partition] = append(by[r.Partition], r.Offset)
	}
	parts := make([]int32, 0, len(by))
	for p := range by {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var first error
	for _, p := range parts {
		if err := fn(p, by[p]); err != nil && first == nil {
			first = err
		}
	}
	return first
}
