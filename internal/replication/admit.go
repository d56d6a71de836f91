package replication

import (
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A peer's Raft message reaches raft only if a correct peer could have
// sent it. etcd raft trusts its peers: it panics on a heartbeat that
// commits beyond the log ("tocommit(...) is out of range") or an append
// that conflicts with a committed entry, and it follows any higher term.
// So a message is dropped (and logged) when its sender is not in the
// group's configuration, it is not addressed to this node, or it claims
// what no leader or follower of this log could: a commit index or an
// acknowledgement beyond what this node has stored, entries that are not
// consecutive, or entries that rewrite what this node knows is committed.
// A panic of raft on a message that passed is caught too: the group stops
// (like a storage failure) and the process goes on.

// refusedLogEvery bounds the log lines about refused messages: one per
// interval per replica, with the count since the last.
const refusedLogEvery = 10 * time.Second

// peerMessage lists the message types one node sends another; the
// others are local to a node (MsgHup, MsgBeat, storage messages...).
var peerMessage = map[pb.MessageType]bool{
	pb.MessageType_MsgApp: true, pb.MessageType_MsgAppResp: true,
	pb.MessageType_MsgVote: true, pb.MessageType_MsgVoteResp: true,
	pb.MessageType_MsgPreVote: true, pb.MessageType_MsgPreVoteResp: true,
	pb.MessageType_MsgSnap: true, pb.MessageType_MsgHeartbeat: true,
	pb.MessageType_MsgHeartbeatResp: true, pb.MessageType_MsgTimeoutNow: true,
	pb.MessageType_MsgTransferLeader: true, pb.MessageType_MsgReadIndex: true,
	pb.MessageType_MsgReadIndexResp: true, pb.MessageType_MsgProp: true,
}

// admit returns why m must not reach raft ("" when it may).
func (r *Replica) admit(m *pb.Message) string {
	from := m.GetFrom()
	switch {
	case !peerMessage[m.GetType()]:
		return fmt.Sprintf("%v is not a message between nodes", m.GetType())
	case m.GetTo() != r.cfg.NodeID:
		return fmt.Sprintf("addressed to node %d", m.GetTo())
	case from == 0 || from == r.cfg.NodeID:
		return fmt.Sprintf("sender id %d", from)
	case len(r.members) > 0 && !slices.Contains(r.members, from) && !r.isAssigned(from):
		// A replica that has no configuration yet (new, waiting for the
		// leader's snapshot) takes its first messages from the leader it
		// does not know yet. One whose configuration is behind (it
		// replays the changes since its snapshot or its last run) takes
		// them from the nodes the cluster assigns the group to now.
		return fmt.Sprintf("node %d is not a member of the group %v (assigned %v)", from, r.members, r.assignedNodes())
	}
	last, _ := r.store.LastIndex()
	switch m.GetType() {
	case pb.MessageType_MsgHeartbeat:
		// A leader commits on a follower at most what the follower
		// acknowledged having stored.
		if m.GetCommit() > last {
			return fmt.Sprintf("heartbeat commits index %d beyond the last stored %d", m.GetCommit(), last)
		}
	case pb.MessageType_MsgAppResp:
		// A follower acknowledges only what the leader sent it, which the
		// leader stored first.
		if !m.GetReject() && m.GetIndex() > last {
			return fmt.Sprintf("acknowledges index %d beyond the last stored %d", m.GetIndex(), last)
		}
	case pb.MessageType_MsgApp:
		committed := r.rn.BasicStatus().HardState.GetCommit()
		for i, e := range m.GetEntries() {
			if e.GetIndex() != m.GetIndex()+1+uint64(i) {
				return fmt.Sprintf("entry %d of an append after index %d has index %d", i, m.GetIndex(), e.GetIndex())
			}
			if e.GetIndex() > committed {
				continue
			}
			if t, err := r.store.Term(e.GetIndex()); err == nil && t != e.GetTerm() {
				return fmt.Sprintf("rewrites committed index %d (term %d) with term %d", e.GetIndex(), t, e.GetTerm())
			}
		}
	}
	return ""
}

// Retire marks this replica's node as stopping: it no longer takes a
// leadership handed to it (MsgTimeoutNow), which it would only have to
// hand over again. Safe for concurrent use.
func (r *Replica) Retire() { r.retiring.Store(true) }

// SetAssigned records the nodes the cluster's metadata assigns the group
// to (its replicas and, during a move, its target): admit takes their
// messages even while this replica's own configuration, which it learns
// by replaying the group's log, does not name them yet. Without this a
// replica whose configuration is behind (it installed a snapshot taken
// before later changes, or was down while nodes were swapped) refuses
// the leader it needs to catch up from. Safe for concurrent use.
func (r *Replica) SetAssigned(nodes []uint64) {
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	r.assigned.Store(&nodes)
}

func (r *Replica) assignedNodes() []uint64 {
	if p := r.assigned.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *Replica) isAssigned(node uint64) bool {
	_, found := slices.BinarySearch(r.assignedNodes(), node)
	return found
}

// step hands a peer's message to raft if admit lets it. An error is a
// panic of raft (the group must stop).
func (r *Replica) step(m *pb.Message) (err error) {
	if why := r.admit(m); why != "" {
		r.refuse(m, why)
		if last, _ := r.store.LastIndex(); m.GetType() == pb.MessageType_MsgHeartbeat && m.GetCommit() > last &&
			m.GetTerm() >= r.rn.BasicStatus().HardState.GetTerm() {
			// The leader commits what this replica acknowledged and no
			// longer has (see lost.go): it must not vote before it holds
			// it again.
			r.store.NeedCatchUp(m.GetCommit())
			r.reportLost(m.GetFrom(), m.GetCommit(), last)
		}
		return nil
	}
	if m.GetType() == pb.MessageType_MsgTimeoutNow && r.retiring.Load() {
		// This node is stopping (it hands its leaderships over): a
		// leadership sent to it would only have to be handed on again.
		r.stats.votesWithheld.Add(1)
		return nil
	}
	if electionMessage[m.GetType()] && r.catchingUp() {
		// A vote of this replica could elect a leader without the
		// entries it lost (see LogStore.NeedCatchUp); a leadership
		// transfer to it would make it campaign.
		r.stats.votesWithheld.Add(1)
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("raft refused a %v from node %d: %v", m.GetType(), m.GetFrom(), p)
		}
	}()
	if m.GetType() == pb.MessageType_MsgSnap {
		r.stats.snapshotsReceived.Add(1)
	}
	r.rn.Step(m) // its errors are for local messages, which admit refused
	return nil
}

// electionMessage lists what a replica that is catching up neither
// answers nor sends: vote requests (and a leader's request that it
// campaign at once).
var electionMessage = map[pb.MessageType]bool{
	pb.MessageType_MsgVote: true, pb.MessageType_MsgPreVote: true, pb.MessageType_MsgTimeoutNow: true,
}

// catchingUp reports whether this replica lost entries it acknowledged
// and does not hold them again yet.
func (r *Replica) catchingUp() bool {
	c := r.store.CatchUp()
	if c == 0 {
		return false
	}
	last, _ := r.store.LastIndex()
	return last < c
}

// withholdCampaign drops this replica's own vote requests while it is
// catching up: it may not stand for election either.
func (r *Replica) withholdCampaign(msgs []*pb.Message) []*pb.Message {
	// Most Readies carry no vote request: look for one before reading the
	// store (which takes its mutex), as this runs on every Ready.
	if !slices.ContainsFunc(msgs, isVoteRequest) || !r.catchingUp() {
		return msgs
	}
	out := msgs[:0:0]
	for _, m := range msgs {
		if isVoteRequest(m) {
			r.stats.votesWithheld.Add(1)
			continue
		}
		out = append(out, m)
	}
	return out
}

func isVoteRequest(m *pb.Message) bool {
	t := m.GetType()
	return t == pb.MessageType_MsgVote || t == pb.MessageType_MsgPreVote
}

// refuse logs (at most every refusedLogEvery) and counts a dropped
// message.
func (r *Replica) refuse(m *pb.Message, why string) {
	r.refused++
	if r.cfg.Refused != nil {
		r.cfg.Refused(m.GetFrom(), why)
	}
	if now := time.Now(); now.Sub(r.refusedLogged) >= refusedLogEvery {
		r.cfg.Logger.Warn("raft message from a peer dropped: no correct peer sends it",
			"group", r.cfg.Group, "from", m.GetFrom(), "type", m.GetType(), "term", m.GetTerm(),
			"why", why, "dropped", r.refused-r.refusedAtLog)
		r.refusedLogged, r.refusedAtLog = now, r.refused
	}
}
