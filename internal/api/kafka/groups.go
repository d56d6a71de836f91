package kafka

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer groups of Kafka's classic protocol: members join, the
// coordinator picks a protocol every member supports and a leader, the
// leader computes the assignment client-side and hands it over in
// SyncGroup, members heartbeat within their session timeout. Static
// members (group.instance.id) keep their assignment across restarts.
//
// Membership lives in memory on the node that coordinates every group of
// the cluster: the leader of the metadata group, as for Hermes' own
// groups (FindCoordinator names it). Committed offsets go through the
// broker like every commit, replicated in the metadata group, and are the
// same offsets Hermes' APIs read. When the coordinator changes, members
// get NOT_COORDINATOR, find the new one and join it again.
//
// A Kafka group and a Hermes group (server-assigned, over gRPC, REST,
// GraphQL) may share a name only to share offsets: a Kafka member cannot
// commit offsets of partitions a live Hermes member owns, and the two
// kinds of members never see each other's assignments.

type groupState int

const (
	groupEmpty groupState = iota
	groupPreparing
	groupCompleting
	groupStable
)

func (s groupState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}[s]
}

// Session timeout bounds (Kafka's group.min/max.session.timeout.ms).
const (
	minSessionTimeout = 6 * time.Second
	maxSessionTimeout = 30 * time.Minute
	// maxGroupMembers bounds a group (group.max.size is unbounded in
	// Kafka; a bound keeps a client from growing the coordinator's
	// memory without limit).
	maxGroupMembers = 1000
	// maxKafkaGroups bounds the groups with members.
	maxKafkaGroups = 10000
)

type coordinator struct {
	s      *Server
	mu     sync.Mutex
	groups map[string]*group
	closed bool
}

type group struct {
	name         string
	state        groupState
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	statics      map[string]string // instance id -> member id
	// pending are member ids handed out with MEMBER_ID_REQUIRED and not
	// joined yet.
	pending map[string]*time.Timer
	// rebalance fires when the members that have not rejoined are given
	// up on.
	rebalance *time.Timer
}

type member struct {
	id, instanceID, clientID, clientHost string
	protocols                            []kmsg.JoinGroupRequestProtocol
	session, rebalance                   time.Duration
	assignment                           []byte
	// join and sync are the member's JoinGroup and SyncGroup waiting
	// for the rebalance to progress.
	join    func(*kmsg.JoinGroupResponse)
	joinVer int16
	sync    func(code int16, assignment []byte)
	expiry  *time.Timer
}

func newCoordinator(s *Server) *coordinator {
	return &coordinator{s: s, groups: map[string]*group{}}
}

func (co *coordinator) close() {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.closed = true
	for _, g := range co.groups {
		g.stopTimers()
		for _, m := range g.members {
			if m.join != nil {
				m.join(&kmsg.JoinGroupResponse{ErrorCode: kerr.NotCoordinator.Code})
				m.join = nil
			}
			if m.sync != nil {
				m.sync(kerr.NotCoordinator.Code, nil)
				m.sync = nil
			}
		}
	}
	co.groups = map[string]*group{}
}

func (g *group) stopTimers() {
	if g.rebalance != nil {
		g.rebalance.Stop()
	}
	for _, t := range g.pending {
		t.Stop()
	}
	for _, m := range g.members {
		if m.expiry != nil {
			m.expiry.Stop()
		}
	}
}

// checkCoordinator returns NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE
// during an election) unless this node coordinates groups.
func (s *Server) checkCoordinator() int16 {
	node, err := s.api.GroupCoordinator()
	switch {
	case err != nil:
		return kerr.CoordinatorNotAvailable.Code
	case node != s.api.NodeID():
		return kerr.NotCoordinator.Code
	}
	return 0
}

func newMemberID(clientID string) string {
	var b [16]byte
	rand.Read(b[:])
	if len(clientID) > 64 {
		clientID = clientID[:64]
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

// get returns the group, creating it (empty) when create.
func (co *coordinator) get(name string, create bool) (*group, int16) {
	g := co.groups[name]
	if g == nil && create {
		if len(co.groups) >= maxKafkaGroups {
			return nil, kerr.CoordinatorNotAvailable.Code
		}
		g = &group{name: name, members: map[string]*member{}, statics: map[string]string{}, pending: map[string]*time.Timer{}}
		co.groups[name] = g
	}
	return g, 0
}

// join handles a JoinGroup; respond is called once, maybe later.
func (co *coordinator) join(c *conn, req *kmsg.JoinGroupRequest, respond func(*kmsg.JoinGroupResponse)) {
	errResp := func(code int16, memberID string) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID, resp.Generation = code, memberID, -1
		respond(resp)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := session
	if req.Version >= 1 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	switch {
	case req.Group == "":
		errResp(kerr.InvalidGroupID.Code, req.MemberID)
		return
	case session < minSessionTimeout || session > maxSessionTimeout:
		errResp(kerr.InvalidSessionTimeout.Code, req.MemberID)
		return
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		errResp(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	if rebalance <= 0 || rebalance > maxSessionTimeout {
		rebalance = session
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.closed {
		errResp(kerr.NotCoordinator.Code, req.MemberID)
		return
	}
	g, code := co.get(req.Group, true)
	if code != 0 {
		errResp(code, req.MemberID)
		return
	}
	if len(g.members) > 0 && g.protocolType != req.ProtocolType {
		errResp(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	if len(g.members) > 0 && !g.supportsOne(req.Protocols) {
		errResp(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	id := req.MemberID
	var m *member
	switch {
	case instance != "":
		if old, ok := g.statics[instance]; ok {
			if id != "" && id != old {
				errResp(kerr.FencedInstanceID.Code, id)
				return
			}
			m = g.members[old]
			if id == "" && m != nil {
				// A static member restarted: it takes over its
				// old id's place under a new id.
				delete(g.members, old)
				m.id = newMemberID(c.clientID)
				g.members[m.id] = m
				g.statics[instance] = m.id
				if g.leader == old {
					g.leader = m.id
				}
				if m.join != nil {
					m.join(&kmsg.JoinGroupResponse{ErrorCode: kerr.FencedInstanceID.Code, Generation: -1})
					m.join = nil
				}
				if m.sync != nil {
					m.sync(kerr.FencedInstanceID.Code, nil)
					m.sync = nil
				}
			}
		} else if id != "" {
			errResp(kerr.UnknownMemberID.Code, id)
			return
		} else {
			// A new static member gets its id at once (no
			// MEMBER_ID_REQUIRED round trip, as KIP-394 says).
			if len(g.members)+len(g.pending) >= maxGroupMembers {
				errResp(kerr.GroupMaxSizeReached.Code, "")
				return
			}
			id = newMemberID(c.clientID)
		}
	case id == "":
		if len(g.members)+len(g.pending) >= maxGroupMembers {
			errResp(kerr.GroupMaxSizeReached.Code, "")
			return
		}
		id = newMemberID(c.clientID)
		if req.Version >= 4 {
			// KIP-394: the client joins again with this id.
			g.pending[id] = time.AfterFunc(session, func() { co.expirePending(g, id) })
			errResp(kerr.MemberIDRequired.Code, id)
			return
		}
	default:
		m = g.members[id]
		if m == nil {
			t, ok := g.pending[id]
			if !ok {
				errResp(kerr.UnknownMemberID.Code, id)
				return
			}
			t.Stop()
			delete(g.pending, id)
		}
	}
	if m == nil {
		if len(g.members) >= maxGroupMembers {
			errResp(kerr.GroupMaxSizeReached.Code, id)
			return
		}
		m = &member{id: id, instanceID: instance}
		g.members[id] = m
		if instance != "" {
			g.statics[instance] = id
		}
		if len(g.members) == 1 {
			g.protocolType = req.ProtocolType
		}
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	m.protocols = req.Protocols
	m.session, m.rebalance = session, rebalance
	m.clientID, m.clientHost = c.clientID, hostOf(c.addr)
	if m.join != nil {
		// A second join from the same member replaces the first.
		m.join(&kmsg.JoinGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code, Generation: -1, MemberID: m.id})
	}
	m.join, m.joinVer = respond, req.Version
	co.touch(g, m)
	if g.state == groupStable && !changed && m.id != g.leader && m.assignment != nil {
		// Nothing changed for this member: no rebalance.
		co.answerJoin(g, m)
		return
	}
	co.prepareRebalance(g)
	co.maybeCompleteJoin(g)
}

func hostOf(addr string) string {
	h, _ := splitHostPort(addr)
	return "/" + h
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || string(a[i].Metadata) != string(b[i].Metadata) {
			return false
		}
	}
	return true
}

// supportsOne reports whether every member supports one of protocols.
func (g *group) supportsOne(protocols []kmsg.JoinGroupRequestProtocol) bool {
	for _, p := range protocols {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return false
}

// allSupport reports whether every member supports protocol name.
func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !m.supports(name) {
			return false
		}
	}
	return true
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

// prepareRebalance starts a rebalance: members must join again within
// the longest rebalance timeout.
func (co *coordinator) prepareRebalance(g *group) {
	if g.state == groupPreparing {
		return
	}
	if g.state == groupCompleting {
		// Members waiting in SyncGroup must join again.
		for _, m := range g.members {
			if m.sync != nil {
				m.sync(kerr.RebalanceInProgress.Code, nil)
				m.sync = nil
			}
		}
	}
	g.state = groupPreparing
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalance)
	}
	if g.rebalance != nil {
		g.rebalance.Stop()
	}
	g.rebalance = time.AfterFunc(timeout, func() {
		co.mu.Lock()
		defer co.mu.Unlock()
		if g.state != groupPreparing || co.groups[g.name] != g {
			return
		}
		// Give up on the members that did not join again.
		for id, m := range g.members {
			if m.join == nil {
				co.remove(g, id)
			}
		}
		co.completeJoin(g)
	})
}

// maybeCompleteJoin completes the join phase once every member joined.
func (co *coordinator) maybeCompleteJoin(g *group) {
	if g.state != groupPreparing {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	co.completeJoin(g)
}

// completeJoin starts a new generation: picks the protocol and the
// leader and answers every waiting JoinGroup.
func (co *coordinator) completeJoin(g *group) {
	if g.rebalance != nil {
		g.rebalance.Stop()
		g.rebalance = nil
	}
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = groupEmpty, "", ""
		g.generation++
		co.dropIfUnused(g)
		return
	}
	g.generation++
	g.state = groupCompleting
	g.protocol = g.vote()
	if g.members[g.leader] == nil {
		g.leader = ""
		for _, id := range g.sortedIDs() {
			if g.members[id].join != nil {
				g.leader = id
				break
			}
		}
	}
	for _, m := range g.members {
		m.assignment = nil
		co.answerJoin(g, m)
	}
}

func (g *group) sortedIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// vote picks the protocol every member supports that the members
// prefer most (by each one's order of preference).
func (g *group) vote() string {
	score := map[string]int{}
	var candidates []string
	for _, m := range g.members {
		for i, p := range m.protocols {
			if g.allSupport(p.Name) {
				if _, seen := score[p.Name]; !seen {
					candidates = append(candidates, p.Name)
				}
				score[p.Name] += len(m.protocols) - i
			}
		}
	}
	sort.Strings(candidates)
	best := ""
	for _, c := range candidates {
		if best == "" || score[c] > score[best] {
			best = c
		}
	}
	return best
}

// answerJoin answers m's waiting JoinGroup with the current generation.
func (co *coordinator) answerJoin(g *group, m *member) {
	if m.join == nil {
		return
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = m.joinVer
	resp.Generation = g.generation
	pt, proto := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &proto
	resp.LeaderID, resp.MemberID = g.leader, m.id
	if m.id == g.leader {
		for _, id := range g.sortedIDs() {
			o := g.members[id]
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			if o.instanceID != "" {
				inst := o.instanceID
				rm.InstanceID = &inst
			}
			for _, p := range o.protocols {
				if p.Name == proto {
					rm.ProtocolMetadata = p.Metadata
				}
			}
			resp.Members = append(resp.Members, rm)
		}
	}
	join := m.join
	m.join = nil
	co.touch(g, m)
	join(resp)
}

// touch restarts m's session timer.
func (co *coordinator) touch(g *group, m *member) {
	if m.expiry != nil {
		m.expiry.Stop()
	}
	id := m.id
	m.expiry = time.AfterFunc(m.session, func() {
		co.mu.Lock()
		defer co.mu.Unlock()
		if co.groups[g.name] != g || g.members[id] != m || m.join != nil {
			return // gone, or waiting in JoinGroup (the rebalance timer judges)
		}
		co.s.log.Info("Kafka group member session expired", "group", g.name, "member", id)
		co.remove(g, id)
		co.rebalanceAfterLeave(g)
	})
}

func (co *coordinator) expirePending(g *group, id string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	delete(g.pending, id)
	co.dropIfUnused(g)
}

// remove takes a member out of g.
func (co *coordinator) remove(g *group, id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.expiry != nil {
		m.expiry.Stop()
	}
	if m.join != nil {
		m.join(&kmsg.JoinGroupResponse{ErrorCode: kerr.UnknownMemberID.Code, Generation: -1})
		m.join = nil
	}
	if m.sync != nil {
		m.sync(kerr.UnknownMemberID.Code, nil)
		m.sync = nil
	}
	delete(g.members, id)
	if m.instanceID != "" && g.statics[m.instanceID] == id {
		delete(g.statics, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
}

// rebalanceAfterLeave rebalances what is left of g after members left.
func (co *coordinator) rebalanceAfterLeave(g *group) {
	if len(g.members) == 0 {
		g.stopTimers()
		g.state, g.protocol, g.leader = groupEmpty, "", ""
		g.generation++
		co.dropIfUnused(g)
		return
	}
	co.prepareRebalance(g)
	co.maybeCompleteJoin(g)
}

// dropIfUnused forgets a group with no members (its offsets stay with
// the broker).
func (co *coordinator) dropIfUnused(g *group) {
	if len(g.members) == 0 && len(g.pending) == 0 && co.groups[g.name] == g {
		g.stopTimers()
		delete(co.groups, g.name)
	}
}

// memberCheck validates a member's generation-bound request.
func (g *group) memberCheck(id string, instance *string, generation int32) (*member, int16) {
	if instance != nil && *instance != "" {
		if cur, ok := g.statics[*instance]; ok && cur != id {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[id]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return m, kerr.IllegalGeneration.Code
	}
	return m, 0
}

// sync handles a SyncGroup; respond is called once, maybe later.
func (co *coordinator) sync(req *kmsg.SyncGroupRequest, respond func(code int16, assignment []byte)) {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[req.Group]
	if g == nil {
		respond(kerr.UnknownMemberID.Code, nil)
		return
	}
	m, code := g.memberCheck(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		respond(code, nil)
		return
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType || req.Protocol != nil && *req.Protocol != g.protocol {
		respond(kerr.InconsistentGroupProtocol.Code, nil)
		return
	}
	switch g.state {
	case groupPreparing:
		respond(kerr.RebalanceInProgress.Code, nil)
	case groupStable:
		co.touch(g, m)
		respond(0, m.assignment)
	case groupCompleting:
		co.touch(g, m)
		if m.sync != nil {
			m.sync(kerr.RebalanceInProgress.Code, nil)
		}
		m.sync = respond
		if m.id != g.leader {
			return
		}
		for _, a := range req.GroupAssignment {
			if o := g.members[a.MemberID]; o != nil {
				o.assignment = a.MemberAssignment
			}
		}
		g.state = groupStable
		for _, o := range g.members {
			if o.assignment == nil {
				o.assignment = []byte{}
			}
			if o.sync != nil {
				s := o.sync
				o.sync = nil
				s(0, o.assignment)
			}
		}
	default:
		respond(kerr.UnknownMemberID.Code, nil)
	}
}

// heartbeat handles a Heartbeat.
func (co *coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	m, code := g.memberCheck(req.MemberID, req.InstanceID, req.Generation)
	if m != nil && code != kerr.FencedInstanceID.Code {
		co.touch(g, m)
	}
	if code != 0 {
		return code
	}
	if g.state == groupPreparing {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// leave removes members; the codes are per member, in order.
func (co *coordinator) leave(group string, members []kmsg.LeaveGroupRequestMember) []int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	codes := make([]int16, len(members))
	g := co.groups[group]
	left := false
	for i, lm := range members {
		if g == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		id := lm.MemberID
		if lm.InstanceID != nil && *lm.InstanceID != "" {
			cur, ok := g.statics[*lm.InstanceID]
			switch {
			case !ok:
				codes[i] = kerr.UnknownMemberID.Code
				continue
			case id != "" && id != cur:
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			id = cur
		}
		if g.members[id] == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		co.remove(g, id)
		left = true
	}
	if left {
		co.rebalanceAfterLeave(g)
	}
	return codes
}

// commitCheck validates an OffsetCommit's member and generation: a
// generation of -1 with no member is a commit from outside the group
// (a simple consumer or an administrator), allowed while the group has
// no Kafka members.
func (co *coordinator) commitCheck(req *kmsg.OffsetCommitRequest) int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[req.Group]
	if req.Generation < 0 && req.MemberID == "" {
		if g != nil && len(g.members) > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	m, code := g.memberCheck(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		return code
	}
	if g.state == groupCompleting {
		return kerr.RebalanceInProgress.Code
	}
	co.touch(g, m)
	return 0
}

// checkGeneration checks a transactional offset commit's member and
// generation against the group (KIP-447 fencing of zombie members).
func (co *coordinator) checkGeneration(group, member string, generation int32) int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	_, code := g.memberCheck(member, nil, generation)
	return code
}

// describe returns a group's state for DescribeGroups.
func (co *coordinator) describe(name string) (kmsg.DescribeGroupsResponseGroup, bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = name
	g := co.groups[name]
	if g == nil {
		return d, false
	}
	d.State, d.ProtocolType = g.state.String(), g.protocolType
	if g.state == groupStable || g.state == groupCompleting {
		d.Protocol = g.protocol
	}
	for _, id := range g.sortedIDs() {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			inst := m.instanceID
			dm.InstanceID = &inst
		}
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				dm.ProtocolMetadata = p.Metadata
			}
		}
		if g.state == groupStable {
			dm.MemberAssignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d, true
}

// list returns the groups with Kafka members: name, protocol type, state.
func (co *coordinator) list() map[string][2]string {
	co.mu.Lock()
	defer co.mu.Unlock()
	out := map[string][2]string{}
	for name, g := range co.groups {
		if len(g.members) > 0 {
			out[name] = [2]string{g.protocolType, g.state.String()}
		}
	}
	return out
}

// hasMembers reports whether a group has Kafka members.
func (co *coordinator) hasMembers(name string) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[name]
	return g != nil && len(g.members) > 0
}
