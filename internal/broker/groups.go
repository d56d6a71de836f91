package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/group"
)

// groupManager runs the consumer groups this node coordinates (it leads
// the metadata group): membership through the deterministic group.Group,
// the committed offsets (in memory, replicated through the metadata
// group), and the per-message ack trackers.
//
// Lock order: groupManager.mu, then localSub.mu. No partition lock or
// I/O is taken while holding mu, except where noted.
type groupManager struct {
	b *Broker
	// persistMu serializes writes of offsets to the metadata group (an
	// explicit commit's and a flush's). Taken before mu. The metadata
	// group's goroutine never takes it (a writer holding it waits for
	// that goroutine to apply its command): offsets written for a topic
	// deleted meanwhile are dropped by the metadata group, which checks
	// the topic's id, and not put back in the cache (cacheable).
	persistMu sync.Mutex
	// seedMu makes one group claim at a time (seed).
	seedMu sync.Mutex
	mu     sync.Mutex
	groups map[string]*groupState
	// epochs are the coordinator epochs of the groups this node claimed
	// (seed); every commit it writes carries its group's, so that one
	// written after another node claimed the group is refused. Kept when
	// a group without members or offsets is pruned; cleared when this
	// node stops coordinating (abdicate, fenced). Guarded by mu.
	epochs map[string]uint64
	closed bool
	// leaderless is when this node last saw no metadata leader (clusters);
	// owned by run.
	leaderless time.Time
	// lagSeen are the consumer lag series set by the last updateLag.
	// Guarded by persistMu.
	lagSeen map[lagSeries]bool
}

type topicPartition struct {
	topic     string
	partition int32
}

// groupState is one group. Guarded by groupManager.mu.
type groupState struct {
	name    string
	g       *group.Group
	subs    map[string]*localSub // by member id
	offsets map[topicPartition]*offsetState
	timeout time.Duration
}

// offsetState is the group's progress on one partition.
type offsetState struct {
	committed int64 // next offset to consume; -1 when nothing is committed
	persisted int64 // what the meta store holds; -1 when nothing
	tracker   *group.Tracker
}

func newGroupManager(b *Broker) *groupManager {
	return &groupManager{b: b, groups: make(map[string]*groupState), epochs: make(map[string]uint64)}
}

// state returns the group, creating it. Lock: m.mu held.
func (m *groupManager) state(name string, timeout time.Duration) *groupState {
	gs, ok := m.groups[name]
	if !ok {
		if timeout <= 0 {
			timeout = group.DefaultSessionTimeout
		}
		gs = &groupState{
			name: name, subs: make(map[string]*localSub),
			offsets: make(map[topicPartition]*offsetState), timeout: timeout,
			g: group.New(name, group.Config{SessionTimeout: timeout}),
		}
		m.groups[name] = gs
	}
	return gs
}

// seed makes sure this node coordinates a group before it serves it: it
// claims the group through the metadata group (which also makes sure it
// has applied every commit made before, wherever), then starts from the
// offsets the metadata group holds. From the claim on, a commit the
// group's previous coordinator still sends is refused. Nothing to do for
// a group this node claimed already.
func (m *groupManager) seed(name string) error {
	m.mu.Lock()
	_, ok := m.epochs[name]
	m.mu.Unlock()
	if ok {
		return nil
	}
	m.seedMu.Lock()
	defer m.seedMu.Unlock()
	m.mu.Lock()
	_, ok = m.epochs[name]
	m.mu.Unlock()
	if ok {
		return nil // claimed while this one waited
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	epoch, err := m.b.cl.Meta().ClaimGroup(ctx, name)
	if err != nil {
		if errors.Is(err, cluster.ErrNotLeader) {
			return m.b.notCoordinator()
		}
		return &kindError{kind: ErrUnavailable, retryAfter: groupStateRetry, msg: fmt.Sprintf("group %q: claim it in the metadata group: %v", name, err)}
	}
	offs := m.b.cl.Meta().GroupOffsets(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epochs[name] = epoch
	gs := m.state(name, 0)
	for p, off := range offs {
		gs.offsets[topicPartition{p.Topic, p.ID}] = &offsetState{committed: off, persisted: off}
	}
	return nil
}

// drop forgets a group this node no longer coordinates (another node
// claimed it): its members' subscriptions end with a retriable error
// naming the coordinator, so they subscribe again there. Lock: m.mu held.
func (m *groupManager) drop(name string) {
	delete(m.epochs, name)
	gs := m.groups[name]
	if gs == nil {
		return
	}
	for id, s := range gs.subs {
		s.mu.Lock()
		s.end(m.b.notCoordinator())
		s.mu.Unlock()
		m.b.log.Info("group member handed to the new coordinator", "group", name, "member", id)
	}
	delete(m.groups, name)
}

func (gs *groupState) offset(tp topicPartition) *offsetState {
	os, ok := gs.offsets[tp]
	if !ok {
		os = &offsetState{committed: -1, persisted: -1}
		gs.offsets[tp] = os
	}
	return os
}

func (m *groupManager) join(s *localSub) error {
	if err := m.seed(s.opts.Group); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errorf(ErrUnavailable, "broker is shutting down")
	}
	gs := m.state(s.opts.Group, s.opts.SessionTimeout)
	if len(gs.subs) == 0 && s.opts.SessionTimeout > 0 && s.opts.SessionTimeout != gs.timeout {
		gs.timeout = s.opts.SessionTimeout
		gs.g = group.New(gs.name, group.Config{SessionTimeout: gs.timeout})
	}
	ch, err := gs.g.Join(s.memberID, s.t.name, int32(len(s.t.partitions())), time.Now())
	if err != nil {
		m.prune(gs)
		return errorf(ErrInvalidArgument, "join group %q: %v", gs.name, err)
	}
	s.gs = gs
	gs.subs[s.memberID] = s
	m.apply(gs, ch)
	s.mu.Lock()
	s.announce = true
	s.mu.Unlock()
	m.b.log.Info("group member joined", "group", gs.name, "member", s.memberID, "client", s.opts.ClientID,
		"topic", s.t.name, "generation", gs.g.Generation())
	return nil
}

func (m *groupManager) leave(s *localSub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gs := s.gs
	if gs.subs[s.memberID] != s {
		return
	}
	m.remove(gs, s.memberID)
	m.b.log.Info("group member left", "group", gs.name, "member", s.memberID, "generation", gs.g.Generation())
}

// remove takes a member out of its group: its partitions are revoked from
// its subscription (so a Poll in flight cannot deliver them any more) and
// handed to the others, then it is forgotten. Lock: m.mu held.
func (m *groupManager) remove(gs *groupState, memberID string) {
	if ch, err := gs.g.Leave(memberID); err == nil {
		m.apply(gs, ch)
	}
	delete(gs.subs, memberID)
	m.prune(gs)
}

// prune forgets progress entries that hold nothing (no commit, no
// tracker) and the group itself once it has no members and no offsets,
// so group names chosen by clients do not accumulate. Lock: m.mu held.
func (m *groupManager) prune(gs *groupState) {
	if len(gs.subs) > 0 {
		return
	}
	for tp, os := range gs.offsets {
		if os.committed < 0 && os.tracker == nil {
			delete(gs.offsets, tp)
		}
	}
	if len(gs.offsets) == 0 && m.groups[gs.name] == gs {
		delete(m.groups, gs.name)
	}
}

func (m *groupManager) heartbeat(s *localSub) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := s.gs.g.Heartbeat(s.memberID, time.Now()); err != nil {
		return errorf(ErrUnknownMember, "member %s of group %q: session ended", s.memberID, s.gs.name)
	}
	return nil
}

func (m *groupManager) sessionTimeout(s *localSub) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.gs.timeout
}

// apply carries out assignment changes: revoked partitions stop (their
// ack trackers are dropped: the next owner starts from the committed
// offset, so what was not acked is delivered again), then assigned ones
// start from the committed offset or the member's start position.
// Lock: m.mu held.
func (m *groupManager) apply(gs *groupState, ch group.Changes) {
	for _, mc := range ch.Members {
		s := gs.subs[mc.ID]
		for _, pid := range mc.Revoked {
			gs.offset(topicPartition{mc.Topic, pid}).tracker = nil
		}
		if s == nil {
			continue
		}
		s.mu.Lock()
		for _, pid := range mc.Revoked {
			s.removePartition(pid)
		}
		s.generation = ch.Generation
		s.announce = true
		s.signal()
		s.mu.Unlock()
	}
	for _, mc := range ch.Members {
		s := gs.subs[mc.ID]
		if s == nil {
			continue
		}
		s.mu.Lock()
		for _, pid := range mc.Assigned {
			m.startPartition(gs, s, pid)
		}
		s.generation = ch.Generation
		s.announce = true
		s.signal()
		s.mu.Unlock()
	}
}

// startPartition begins delivery of pid to s. Lock: m.mu and s.mu held.
func (m *groupManager) startPartition(gs *groupState, s *localSub, pid int32) {
	p := s.t.partitions()[pid]
	os := gs.offset(topicPartition{s.t.name, pid})
	from := os.committed
	start, hw := p.offsets()
	// A replica's high watermark may trail the group's commits for a
	// moment (a new leader commits an entry of its term first): the
	// committed offset still stands, delivery waits for the replica.
	if from < 0 || from > hw && p.rep == nil && !p.remote {
		var err error
		if from, err = m.b.resolveStart(p, s.opts.Start); err != nil {
			from = hw
		}
	}
	if from < start {
		from = start
	}
	s.addPartition(pid, from)
	if s.opts.AckMode == AckPerMessage {
		os.tracker = group.NewTracker(from, group.TrackerConfig{
			AckWait: s.opts.AckWait, MaxDeliveries: s.opts.MaxDeliveries, MaxPending: s.opts.MaxAckPending,
		})
	}
}

// room is how many new records of pid s may get now (per-message acks).
func (m *groupManager) room(s *localSub, pid int32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	os := s.gs.offsets[topicPartition{s.t.name, pid}]
	if os == nil || os.tracker == nil {
		return 0
	}
	if os.tracker.Full() {
		return 0
	}
	cfg := s.opts.MaxAckPending
	if cfg <= 0 {
		cfg = group.DefaultMaxPending
	}
	return cfg - os.tracker.Pending()
}

// delivered records that [from, to) of pid went to s, and moves its cursor.
func (m *groupManager) delivered(s *localSub, pid int32, from, to, gen int64, skipped []int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.cursors[pid]; !ok || cur != from || s.generation != gen || s.ended != nil {
		return false
	}
	s.cursors[pid] = to
	os := s.gs.offset(topicPartition{s.t.name, pid})
	switch s.opts.AckMode {
	case AckAuto:
		// Everything before this delivery was sent: the adapter asks for
		// the next delivery only after a successful send. This delivery
		// itself counts at the member's next Next (sent), whether or not
		// more records come (commitSent).
		os.committed = max(os.committed, from)
		if s.sent == nil {
			s.sent = make(map[int32]int64)
		}
		s.sent[pid] = to
	case AckPerMessage:
		now := time.Now()
		for off := from; off < to; off++ {
			os.tracker.Delivered(off, now)
		}
		for _, off := range skipped { // nothing to acknowledge
			os.tracker.Ack(off) //nolint:errcheck // just delivered: pending
		}
		if len(skipped) > 0 {
			os.committed = os.tracker.Committed()
		}
	}
	return true
}

// commitSent commits, for an auto-committing member asking for its next
// delivery, the records of its last deliveries: it asks only once they
// were sent.
func (m *groupManager) commitSent(s *localSub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, to := range s.sent {
		if owner, ok := s.gs.g.Owner(s.t.name, pid); ok && owner == s.memberID {
			if os := s.gs.offset(topicPartition{s.t.name, pid}); os.committed < to {
				os.committed = to
			}
		}
	}
	clear(s.sent)
}

// commit stores offsets committed by member s (manual mode), after checking
// s owns each partition. The offsets are durable when it returns nil.
func (m *groupManager) commit(s *localSub, offsets []Offset) error {
	return m.store(s.gs.name, offsets, s)
}

// store validates offsets against the partitions and persists them. With
// a member, they must be of partitions it owns; without, of partitions no
// member owns. The check, the cache and the write happen with persistMu
// held: a member assigned one of these partitions meanwhile starts from
// the offset being written, and its own commits are written after it, so
// the group's committed offsets never go back on a hand-over.
func (m *groupManager) store(groupName string, offsets []Offset, member *localSub) error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	for _, o := range offsets {
		t, err := m.b.topic(o.Topic)
		if err != nil {
			return err
		}
		p, err := t.partition(o.Partition)
		if err != nil {
			return err
		}
		if o.Offset < 0 {
			return errorf(ErrOffsetOutOfRange, "commit offset %d of %s/%d is negative", o.Offset, o.Topic, o.Partition)
		}
		// Only the partition's leader knows its high watermark for
		// sure: a follower's may lag what a consumer read there.
		if _, hw := p.offsets(); !p.remote && p.rep.Leading() && o.Offset > hw {
			return errorf(ErrOffsetOutOfRange, "commit offset %d of %s/%d is outside [0, %d]", o.Offset, o.Topic, o.Partition, hw)
		}
	}
	m.mu.Lock()
	gs, epoch := m.groups[groupName], m.epochs[groupName]
	if epoch == 0 || member != nil && (gs == nil || member.gs != gs) {
		m.mu.Unlock()
		return m.b.notCoordinator() // handed over since the member joined
	}
	for i := range offsets {
		o := &offsets[i]
		o.Group = groupName
		if gs == nil {
			continue
		}
		owner, owned := gs.g.Owner(o.Topic, o.Partition)
		switch {
		case member != nil && (!owned || owner != member.memberID):
			m.mu.Unlock()
			return errorf(ErrNotAssigned, "partition %s/%d is not assigned to member %s", o.Topic, o.Partition, member.memberID)
		case member == nil && owned:
			m.mu.Unlock()
			return errorf(ErrGroupNotEmpty, "partition %s/%d is owned by live member %s", o.Topic, o.Partition, owner)
		}
	}
	if gs == nil {
		gs = m.state(groupName, 0)
	}
	for _, o := range offsets {
		if m.cacheable(o.Topic) {
			gs.offset(topicPartition{o.Topic, o.Partition}).committed = o.Offset
		}
	}
	m.mu.Unlock()
	if err := m.persist(groupName, epoch, offsets); err != nil {
		return err // the cache has them: a flush writes them again
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range offsets {
		if os := gs.offsets[topicPartition{o.Topic, o.Partition}]; os != nil && m.cacheable(o.Topic) {
			os.persisted = o.Offset
		}
	}
	return nil
}

// cacheable reports whether offsets of a topic may go in the cache: it
// still exists (forgetTopic, which runs when it is deleted, may have run
// while they were being written).
func (m *groupManager) cacheable(topic string) bool {
	_, ok := m.b.activeTopicID(topic)
	return ok
}

// commitOffsetsHere is CommitOffsets at the coordinator.
func (b *Broker) commitOffsetsHere(groupName, memberID string, offsets []Offset) error {
	if err := ValidateName("group", groupName); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return errorf(ErrInvalidArgument, "no offsets to commit")
	}
	if err := b.groups.seed(groupName); err != nil {
		return err
	}
	m := b.groups
	var member *localSub
	if memberID != "" {
		m.mu.Lock()
		if gs := m.groups[groupName]; gs != nil {
			member = gs.subs[memberID]
		}
		m.mu.Unlock()
		if member == nil {
			return errorf(ErrUnknownMember, "group %q has no member %q", groupName, memberID)
		}
	}
	return m.store(groupName, offsets, member)
}

// Commit commits offsets (next offset to consume) for partitions this
// member owns. Durable when it returns nil.
func (s *localSub) Commit(offsets []Offset) error {
	if s.gs == nil {
		return errorf(ErrInvalidArgument, "commit needs a group subscription")
	}
	return s.b.groups.commit(s, offsets)
}

// Ack acknowledges records (per-message ack mode). Unknown offsets are
// reported; the committed offset moves over the contiguous acked prefix
// and is persisted within a group tick.
func (s *localSub) Ack(pid int32, offsets []int64) error {
	return s.b.groups.ack(s, pid, offsets, false)
}

// Nack asks for records to be delivered again now.
func (s *localSub) Nack(pid int32, offsets []int64) error {
	return s.b.groups.ack(s, pid, offsets, true)
}

func (m *groupManager) ack(s *localSub, pid int32, offsets []int64, nack bool) error {
	if s.gs == nil || s.opts.AckMode != AckPerMessage {
		return errorf(ErrInvalidArgument, "acks need a group subscription with per-message acks")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	os := s.gs.offsets[topicPartition{s.t.name, pid}]
	if owner, ok := s.gs.g.Owner(s.t.name, pid); !ok || owner != s.memberID || os == nil || os.tracker == nil {
		return errorf(ErrNotAssigned, "partition %s/%d is not assigned to member %s", s.t.name, pid, s.memberID)
	}
	var bad []int64
	now := time.Now()
	for _, off := range offsets {
		var err error
		if nack {
			err = os.tracker.Nack(off, now)
		} else {
			_, _, err = os.tracker.Ack(off)
		}
		if errors.Is(err, group.ErrNotPending) {
			bad = append(bad, off)
		}
	}
	os.committed = os.tracker.Committed()
	s.signal() // room for new records, or records due again

	if len(bad) > 0 {
		return errorf(ErrInvalidArgument, "offsets %v of %s/%d are not awaiting an ack", bad, s.t.name, pid)
	}
	return nil
}

// run expires sessions and persists ack-driven offsets every tick.
func (m *groupManager) run() {
	defer m.b.wg.Done()
	tick := time.NewTicker(m.b.cfg.GroupTick)
	defer tick.Stop()
	for {
		select {
		case <-m.b.stop:
			m.flush()
			return
		case now := <-tick.C:
			m.expire(now)
			m.flush()
			m.abdicate(now)
		}
	}
}

func (m *groupManager) expire(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, gs := range m.groups {
		expired, ch := gs.g.Expire(now)
		m.apply(gs, ch) // revokes the expired members' partitions first
		for _, id := range expired {
			if s := gs.subs[id]; s != nil {
				delete(gs.subs, id)
				s.mu.Lock()
				s.end(errorf(ErrUnknownMember, "session of member %s in group %q expired (no heartbeat for %s)", id, gs.name, gs.timeout))
				s.mu.Unlock()
				m.b.log.Warn("group member session expired", "group", gs.name, "member", id)
			}
		}
		m.prune(gs)
	}
}

// flush persists committed offsets that moved without an explicit commit
// (auto and per-message modes) and refreshes the lag gauges.
func (m *groupManager) flush() {
	m.persistDirty("")
	m.updateLag()
}

// persistDirty persists the offsets of group (every group: "") that
// moved without an explicit commit.
func (m *groupManager) persistDirty(group string) {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	dirty := make(map[string][]Offset)
	epochs := make(map[string]uint64)
	m.mu.Lock()
	for _, gs := range m.groups {
		if group != "" && gs.name != group {
			continue
		}
		for tp, os := range gs.offsets {
			if os.committed >= 0 && os.committed != os.persisted {
				dirty[gs.name] = append(dirty[gs.name], Offset{Group: gs.name, Topic: tp.topic, Partition: tp.partition, Offset: os.committed})
				epochs[gs.name] = m.epochs[gs.name]
			}
		}
	}
	m.mu.Unlock()
	for g, offs := range dirty {
		if err := m.persist(g, epochs[g], offs); err != nil {
			m.b.log.Error("cannot persist group offsets", "group", g, "err", err)
			continue
		}
		m.mu.Lock()
		if gs := m.groups[g]; gs != nil {
			for _, o := range offs {
				if os := gs.offsets[topicPartition{o.Topic, o.Partition}]; os != nil {
					os.persisted = o.Offset
				}
			}
		}
		m.mu.Unlock()
	}
}

// persist makes a group's offsets durable through the metadata group
// (replicated to every node), fenced by the group's coordinator epoch
// here: once another node claimed the group, the group is dropped here
// and the error names the coordinator. Lock: persistMu held.
func (m *groupManager) persist(group string, epoch uint64, offsets []Offset) error {
	if epoch == 0 {
		return m.b.notCoordinator() // dropped or handed over meanwhile
	}
	c := &cpb.CommitOffsets{Group: group, CoordinatorEpoch: epoch}
	for _, o := range offsets {
		id, ok := m.b.activeTopicID(o.Topic)
		if !ok {
			continue // deleted meanwhile: nothing to keep
		}
		c.Offsets = append(c.Offsets, &cpb.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, TopicId: id})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.b.cl.Meta().Run(ctx, &cpb.Command{Kind: &cpb.Command_CommitOffsets{CommitOffsets: c}})
	switch {
	case errors.Is(err, cluster.ErrFenced):
		m.mu.Lock()
		if m.epochs[group] == epoch {
			m.drop(group)
		}
		m.mu.Unlock()
		m.b.log.Warn("group claimed by another coordinator: its offsets are no longer written here", "group", group, "err", err)
		return m.b.notCoordinator()
	case err != nil:
		return &kindError{kind: ErrUnavailable, retryAfter: groupStateRetry, msg: fmt.Sprintf("replicate the offsets of group %q: %v", group, err)}
	}
	return nil
}

// abdicate ends every group this node coordinates, once another node
// leads the metadata group (or none has for a while): their members
// subscribe again and reach the new coordinator, which starts from the
// replicated offsets. What they had not committed comes again.
func (m *groupManager) abdicate(now time.Time) {
	leader := m.b.cl.Meta().Leader()
	switch {
	case leader == m.b.cfg.Cluster.NodeID:
		m.leaderless = time.Time{}
		return
	case leader == 0:
		if m.leaderless.IsZero() {
			m.leaderless = now
		}
		if now.Sub(m.leaderless) < abdicateAfter {
			return
		}
	}
	m.mu.Lock()
	n := len(m.groups) + len(m.epochs)
	m.mu.Unlock()
	if n == 0 {
		return
	}
	m.flush() // best effort: the new coordinator gets the latest offsets
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, gs := range m.groups {
		for id, s := range gs.subs {
			s.mu.Lock()
			s.end(m.b.notCoordinator())
			s.mu.Unlock()
			m.b.log.Info("group member handed to the new coordinator", "group", gs.name, "member", id, "coordinator", leader)
		}
	}
	clear(m.groups)
	clear(m.epochs)
}

// abdicateAfter is how long a coordinator keeps its groups while no node
// leads the metadata group (an election usually takes about a second).
const abdicateAfter = 3 * time.Second

// forgetTopic forgets a deleted topic's offsets here (the metadata group
// dropped them when it applied the deletion); members consuming it leave
// their groups (their subscriptions end by themselves: they watch the
// topic). It runs on the metadata group's goroutine, so it must not take
// persistMu (see there).
func (m *groupManager) forgetTopic(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, gs := range m.groups {
		for tp := range gs.offsets {
			if tp.topic == name {
				delete(gs.offsets, tp)
			}
		}
		for id, s := range gs.subs {
			if s.t.name == name {
				m.remove(gs, id)
			}
		}
		m.prune(gs)
	}
}

// grow spreads a topic's new partitions (it has n now) over the members
// of the groups that consume it here.
func (m *groupManager) grow(topic string, n int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, gs := range m.groups {
		if ch, err := gs.g.SetPartitions(topic, n); err == nil {
			m.apply(gs, ch)
		}
	}
}

func (m *groupManager) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, gs := range m.groups {
		for _, s := range gs.subs {
			s.mu.Lock()
			s.end(errorf(ErrUnavailable, "broker is shutting down"))
			s.mu.Unlock()
		}
	}
}

// Offset is a group's committed offset on one partition (the next offset
// to consume), as adapters pass it to CommitOffsets and Commit.
type Offset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}
