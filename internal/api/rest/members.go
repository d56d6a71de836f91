package rest

import (
	"sync"

	"github.com/hermes-mq/hermes/internal/broker"
)

// member is a group subscription open on an SSE stream of this node,
// found by its member id when the client posts acks or commits.
type member struct {
	sub   broker.Subscription
	group string
	topic string
}

// registry maps member ids to the live SSE subscriptions. An entry lives
// exactly as long as its stream: added once the subscription is open,
// removed when the stream ends (before the subscription closes). Its size
// is bounded by the broker's subscription limit.
type registry struct {
	mu      sync.Mutex
	members map[string]*member // guarded by mu
}

func newRegistry() *registry { return &registry{members: make(map[string]*member)} }

func (r *registry) add(m *member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members[m.sub.MemberID()] = m
}

func (r *registry) remove(m *member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members[m.sub.MemberID()] == m {
		delete(r.members, m.sub.MemberID())
	}
}

// get returns the member, or nil.
func (r *registry) get(id string) *member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.members[id]
}
