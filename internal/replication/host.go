package replication

import (
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Host routes inbound Raft messages to the replicas of this node by group.
type Host struct {
	mu     sync.RWMutex
	groups map[string]*Replica
}

// NewHost returns an empty host.
func NewHost() *Host { return &Host{groups: make(map[string]*Replica)} }

// Add makes r receive the messages of group.
func (h *Host) Add(group string, r *Replica) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.groups[group] = r
}

// Remove stops routing to group.
func (h *Host) Remove(group string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.groups, group)
}

// Replicas returns every replica hosted here.
func (h *Host) Replicas() []*Replica {
	h.mu.RLock()
	defer h.mu.RUnlock()
	rs := make([]*Replica, 0, len(h.groups))
	for _, r := range h.groups {
		rs = append(rs, r)
	}
	return rs
}

// Replica returns the replica of group on this node, or nil.
func (h *Host) Replica(group string) *Replica {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.groups[group]
}

// Deliver hands m to its group's replica; messages of unknown groups are
// dropped (the group may not be created here yet: raft sends again).
func (h *Host) Deliver(group string, m *pb.Message) {
	h.mu.RLock()
	r := h.groups[group]
	h.mu.RUnlock()
	if r != nil {
		r.Step(m)
	}
}
