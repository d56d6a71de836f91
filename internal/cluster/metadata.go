// Package cluster holds the cluster's metadata: the nodes, the topics and
// the replicas of every partition. Metadata is a deterministic state
// machine: every node applies the same commands, in the order of the
// metadata Raft group's log, and reaches the same state. It does no I/O and
// reads no clock.
package cluster

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// Errors a command can end with (the results of Apply).
var (
	ErrTopicExists   = errors.New("cluster: topic already exists")
	ErrTopicNotFound = errors.New("cluster: topic not found")
	ErrNoNodes       = errors.New("cluster: not enough nodes for the replication factor")
	ErrBadCommand    = errors.New("cluster: malformed command")
	// ErrNodeInUse: the node still holds partition replicas.
	ErrNodeInUse = errors.New("cluster: the node holds partition replicas")
	// ErrFenced: a group's offsets committed by a node that no longer
	// coordinates it (another claimed the group since).
	ErrFenced = errors.New("cluster: the group has another coordinator")
	// ErrExists and ErrNotFound: a user or token that already exists, or
	// does not.
	ErrExists   = errors.New("cluster: already exists")
	ErrNotFound = errors.New("cluster: not found")
)

// Topic is a topic as the cluster knows it.
type Topic struct {
	Name string
	// ID tells apart topics that had the same name: the metadata log
	// index of the topic's creation (0 for topics created before topics
	// had ids). Its files and Raft groups are named by name and id.
	ID     uint64
	Config *pb.TopicConfig
	// Replicas[p] are the voters of partition p; Replicas[p][0] is its
	// preferred leader.
	Replicas [][]uint64
	// Targets[p], when set, is the replica set partition p is moving to:
	// its leader adds the new voters, then removes the old ones, then
	// completes the move (Replicas[p] = Targets[p]).
	Targets [][]uint64
	// DeletedBefore[p], when set, is the offset below which partition p's
	// records are deleted (see Floor).
	DeletedBefore []int64
}

// Floor is the offset below which partition p's records were deleted
// (DeleteRecords), 0 if none were.
func (t *Topic) Floor(p int) int64 {
	if p < len(t.DeletedBefore) {
		return t.DeletedBefore[p]
	}
	return 0
}

// setFloor records partition p's floor (DeletedBefore grows as needed).
func (t *Topic) setFloor(p int, offset int64) {
	for len(t.DeletedBefore) <= p {
		t.DeletedBefore = append(t.DeletedBefore, 0)
	}
	t.DeletedBefore[p] = offset
}

// Holds reports whether node has, or is getting, a replica of partition p.
func (t *Topic) Holds(p int, node uint64) bool {
	return slices.Contains(t.Replicas[p], node) || p < len(t.Targets) && slices.Contains(t.Targets[p], node)
}

// Target is the replica set partition p moves to, or nil.
func (t *Topic) Target(p int) []uint64 {
	if p < len(t.Targets) {
		return t.Targets[p]
	}
	return nil
}

// NodeInfo is a member of the cluster as the metadata records it.
type NodeInfo struct {
	ID                           uint64
	RaftAddr, GRPCAddr, HTTPAddr string
	KafkaAddr, WireAddr          string
}

// Metadata is the state of the cluster. Not safe for concurrent use: the
// metadata group's apply loop owns it; readers get copies (Topics, Nodes).
type Metadata struct {
	topics map[string]*Topic
	nodes  map[uint64]*NodeInfo
	// offsets are the consumer groups' committed offsets: group → partition
	// → the next offset to consume.
	offsets map[string]map[Partition]int64
	// groupEpochs are the consumer groups' coordinator epochs (ClaimGroup):
	// group → the index of the last claim applied.
	groupEpochs map[string]uint64
	// sec is the access-control state.
	sec security
	// txns is the Kafka transactions' state (txn.go).
	txns txnState
	// Applied is the index of the last command applied.
	Applied uint64
}

// NewMetadata returns an empty state.
func NewMetadata() *Metadata {
	return &Metadata{topics: make(map[string]*Topic), nodes: make(map[uint64]*NodeInfo), offsets: make(map[string]map[Partition]int64), groupEpochs: make(map[string]uint64), sec: newSecurity()}
}

// Partition names a partition of a topic.
type Partition struct {
	Topic string
	ID    int32
}

// Change is what one applied command changed, for the node to act on
// (open or close partition replicas).
type Change struct {
	Created *Topic
	Deleted *Topic
	Node    *NodeInfo
	// Removed is a node deregistered.
	Removed *NodeInfo
	// Moved is a topic whose replicas or move targets changed (the new
	// state).
	Moved *Topic
	// Altered is a topic whose configuration changed, and maybe its
	// partition count (the new state).
	Altered *Topic
	// Committed is the group whose offsets a CommitOffsets set, with the
	// offsets it kept (those of existing partitions).
	Committed *GroupOffsets
	// GroupEpoch is the coordinator epoch a ClaimGroup gave its group.
	GroupEpoch uint64
	// Security: the access-control state changed (users, tokens, ACLs,
	// quotas); RemovedACLs counts the ACLs a RemoveAcls removed.
	Security    bool
	RemovedACLs int
}

// GroupOffsets are committed offsets of one group.
type GroupOffsets struct {
	Group   string
	Offsets map[Partition]int64
}

// Apply applies the command at log index index and returns what changed,
// or the command's failure (ErrTopicExists, ErrTopicNotFound, ErrNoNodes,
// ErrBadCommand): a failed command changes nothing, on every node alike.
//
// REQUIRES: index > m.Applied (commands are applied once, in order).
func (m *Metadata) Apply(index uint64, cmd *pb.Command) (Change, error) {
	if index <= m.Applied {
		panic(fmt.Sprintf("cluster: apply of index %d after %d", index, m.Applied))
	}
	m.Applied = index
	if ch, err, ok := m.applySecurity(cmd); ok {
		return ch, err
	}
	switch k := cmd.Kind.(type) {
	case *pb.Command_CreateTopic:
		return m.createTopic(index, k.CreateTopic)
	case *pb.Command_DeleteTopic:
		t, ok := m.topics[k.DeleteTopic.GetName()]
		if !ok {
			return Change{}, fmt.Errorf("%w: %q", ErrTopicNotFound, k.DeleteTopic.GetName())
		}
		delete(m.topics, t.Name)
		m.forgetTopicTxns(t.Name)
		for g, offs := range m.offsets {
			for p := range offs {
				if p.Topic == t.Name {
					delete(offs, p)
				}
			}
			if len(offs) == 0 {
				delete(m.offsets, g)
			}
		}
		return Change{Deleted: t}, nil
	case *pb.Command_RegisterNode:
		n := &NodeInfo{ID: k.RegisterNode.GetId(), RaftAddr: k.RegisterNode.GetRaftAddr(),
			GRPCAddr: k.RegisterNode.GetGrpcAddr(), HTTPAddr: k.RegisterNode.GetHttpAddr(), KafkaAddr: k.RegisterNode.GetKafkaAddr(),
			WireAddr: k.RegisterNode.GetWireAddr()}
		if n.ID == 0 {
			return Change{}, fmt.Errorf("%w: node id 0", ErrBadCommand)
		}
		m.nodes[n.ID] = n
		return Change{Node: n}, nil
	case *pb.Command_AlterTopic:
		return m.alterTopic(k.AlterTopic)
	case *pb.Command_DeleteRecords:
		return m.deleteRecords(k.DeleteRecords)
	case *pb.Command_PutTransaction:
		return m.putTransaction(index, k.PutTransaction)
	case *pb.Command_CommitOffsets:
		return m.commitOffsets(k.CommitOffsets)
	case *pb.Command_ClaimGroup:
		g := k.ClaimGroup.GetGroup()
		if g == "" {
			return Change{}, fmt.Errorf("%w: claim without a group", ErrBadCommand)
		}
		m.groupEpochs[g] = index
		return Change{GroupEpoch: index}, nil
	case *pb.Command_DeleteGroup:
		g := k.DeleteGroup.GetGroup()
		if _, ok := m.offsets[g]; !ok {
			return Change{}, fmt.Errorf("%w: group %q has no committed offsets", ErrNotFound, g)
		}
		delete(m.offsets, g)
		return Change{}, nil
	case *pb.Command_Barrier:
		return Change{}, nil
	case *pb.Command_ReassignPartitions:
		return m.reassign(k.ReassignPartitions)
	case *pb.Command_CompleteReassignment:
		return m.completeReassignment(k.CompleteReassignment)
	case *pb.Command_DeregisterNode:
		id := k.DeregisterNode.GetId()
		n, ok := m.nodes[id]
		if !ok {
			return Change{}, fmt.Errorf("%w: node %d is not registered", ErrBadCommand, id)
		}
		if held := m.ReplicasOn(id); held > 0 {
			return Change{}, fmt.Errorf("%w: node %d holds replicas of %d partitions", ErrNodeInUse, id, held)
		}
		delete(m.nodes, id)
		return Change{Removed: n}, nil
	}
	return Change{}, fmt.Errorf("%w: no command", ErrBadCommand)
}

// commitOffsets keeps the offsets of partitions that exist, of the topic
// they were committed on: a flush may race with the deletion (and the
// re-creation) of a topic, and the other offsets still count.
func (m *Metadata) commitOffsets(c *pb.CommitOffsets) (Change, error) {
	if c.GetGroup() == "" {
		return Change{}, fmt.Errorf("%w: commit without a group", ErrBadCommand)
	}
	if e, now := c.GetCoordinatorEpoch(), m.groupEpochs[c.GetGroup()]; e != 0 && e != now {
		return Change{}, fmt.Errorf("%w: group %q is coordinated in epoch %d, the commit was made in epoch %d", ErrFenced, c.GetGroup(), now, e)
	}
	kept := &GroupOffsets{Group: c.GetGroup(), Offsets: make(map[Partition]int64)}
	for _, o := range c.GetOffsets() {
		t, ok := m.topics[o.GetTopic()]
		if !ok || o.GetPartition() < 0 || int(o.GetPartition()) >= len(t.Replicas) || o.GetOffset() < 0 {
			continue
		}
		if id := o.GetTopicId(); id != 0 && id != t.ID {
			continue // committed on a deleted topic of the same name
		}
		kept.Offsets[Partition{o.GetTopic(), o.GetPartition()}] = o.GetOffset()
	}
	if len(kept.Offsets) == 0 {
		return Change{Committed: kept}, nil
	}
	offs := m.offsets[kept.Group]
	if offs == nil {
		offs = make(map[Partition]int64)
		m.offsets[kept.Group] = offs
	}
	for p, off := range kept.Offsets {
		offs[p] = off
	}
	return Change{Committed: kept}, nil
}

// ReplicasOn counts the partitions with a replica on node, or moving to it.
func (m *Metadata) ReplicasOn(node uint64) int {
	n := 0
	for _, t := range m.topics {
		for p := range t.Replicas {
			if t.Holds(p, node) {
				n++
			}
		}
	}
	return n
}

// reassign sets move targets. A move is refused for a partition already
// moving, to unknown nodes, or with duplicates; the whole command then
// changes nothing.
func (m *Metadata) reassign(c *pb.ReassignPartitions) (Change, error) {
	var moved *Topic
	for _, mv := range c.GetMoves() {
		t, ok := m.topics[mv.GetTopic()]
		if !ok {
			return Change{}, fmt.Errorf("%w: %q", ErrTopicNotFound, mv.GetTopic())
		}
		p := int(mv.GetPartition())
		target := mv.GetTarget()
		if p < 0 || p >= len(t.Replicas) || len(target) == 0 {
			return Change{}, fmt.Errorf("%w: move of %s/%d to %v", ErrBadCommand, t.Name, p, target)
		}
		if t.Target(p) != nil && !c.GetReplace() {
			return Change{}, fmt.Errorf("%w: %s/%d is already moving to %v", ErrBadCommand, t.Name, p, t.Target(p))
		}
		seen := map[uint64]bool{}
		for _, n := range target {
			if m.nodes[n] == nil || seen[n] {
				return Change{}, fmt.Errorf("%w: move of %s/%d to %v: node %d unknown or named twice", ErrBadCommand, t.Name, p, target, n)
			}
			seen[n] = true
		}
		if moved != nil && moved.Name != t.Name {
			return Change{}, fmt.Errorf("%w: one command moves partitions of one topic", ErrBadCommand)
		}
		moved = t
	}
	if moved == nil {
		return Change{}, fmt.Errorf("%w: no move", ErrBadCommand)
	}
	for _, mv := range c.GetMoves() {
		t := m.topics[mv.GetTopic()]
		for len(t.Targets) < len(t.Replicas) {
			t.Targets = append(t.Targets, nil)
		}
		t.Targets[mv.GetPartition()] = slices.Clone(mv.GetTarget())
	}
	return Change{Moved: moved.clone()}, nil
}

func (m *Metadata) completeReassignment(c *pb.CompleteReassignment) (Change, error) {
	t, ok := m.topics[c.GetTopic()]
	if !ok {
		return Change{}, fmt.Errorf("%w: %q", ErrTopicNotFound, c.GetTopic())
	}
	p := int(c.GetPartition())
	if p < 0 || p >= len(t.Replicas) || t.Target(p) == nil {
		return Change{}, fmt.Errorf("%w: %s/%d is not moving", ErrBadCommand, t.Name, p)
	}
	got, want := slices.Clone(c.GetReplicas()), slices.Clone(t.Target(p))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return Change{}, fmt.Errorf("%w: %s/%d has voters %v, its target is %v", ErrBadCommand, t.Name, p, c.GetReplicas(), t.Target(p))
	}
	t.Replicas[p] = t.Targets[p]
	t.Targets[p] = nil
	if !slices.ContainsFunc(t.Targets, func(x []uint64) bool { return x != nil }) {
		t.Targets = nil
	}
	return Change{Moved: t.clone()}, nil
}

// Balance plans moves that even out the replicas per node over nodes
// (sorted ids, without the drained ones): while a node holds two more
// replicas than another, one replica moves from the fullest to the
// emptiest node (never two replicas of a partition on a node). Every
// replica on a drained node moves. Partitions already moving are left
// alone. Deterministic; nil when nothing needs to move.
func (m *Metadata) Balance(drain []uint64) []*pb.ReassignPartitions {
	var nodes []uint64
	for _, id := range m.nodeIDs() {
		if !slices.Contains(drain, id) {
			nodes = append(nodes, id)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	load := make(map[uint64]int)
	for _, t := range m.topics {
		for p := range t.Replicas {
			for _, n := range t.Replicas[p] {
				load[n]++
			}
		}
	}
	type part struct {
		t      *Topic
		p      int
		target []uint64
	}
	var parts []*part
	for _, t := range m.Topics() {
		tt := m.topics[t.Name]
		for p := range tt.Replicas {
			if tt.Target(p) == nil {
				parts = append(parts, &part{t: tt, p: p, target: slices.Clone(tt.Replicas[p])})
			}
		}
	}
	lightest := func(except []uint64) uint64 {
		best := uint64(0)
		for _, n := range nodes {
			if !slices.Contains(except, n) && (best == 0 || load[n] < load[best]) {
				best = n
			}
		}
		return best
	}
	moveOne := func(pt *part, i int) bool {
		to := lightest(pt.target)
		if to == 0 {
			return false
		}
		load[pt.target[i]]--
		load[to]++
		pt.target[i] = to
		return true
	}
	for _, pt := range parts { // drained nodes first
		for i, n := range pt.target {
			if slices.Contains(drain, n) {
				moveOne(pt, i)
			}
		}
	}
	for rounds := 0; rounds < 10000; rounds++ {
		heavy, light := nodes[0], nodes[0]
		for _, n := range nodes {
			if load[n] > load[heavy] {
				heavy = n
			}
			if load[n] < load[light] {
				light = n
			}
		}
		if load[heavy]-load[light] < 2 {
			break
		}
		// A partition this plan leaves alone so far first: moving two
		// replicas of one partition copies it twice where two partitions
		// moving one replica each would do.
		var pick *part
		for _, pt := range parts {
			if slices.Contains(pt.target, heavy) && !slices.Contains(pt.target, light) {
				if slices.Equal(pt.target, pt.t.Replicas[pt.p]) {
					pick = pt
					break
				}
				if pick == nil {
					pick = pt
				}
			}
		}
		if pick == nil {
			break
		}
		load[heavy]--
		load[light]++
		pick.target[slices.Index(pick.target, heavy)] = light
	}
	byTopic := map[string]*pb.ReassignPartitions{}
	var out []*pb.ReassignPartitions
	for _, pt := range parts {
		if slices.Equal(pt.target, pt.t.Replicas[pt.p]) {
			continue
		}
		c := byTopic[pt.t.Name]
		if c == nil {
			c = &pb.ReassignPartitions{}
			byTopic[pt.t.Name] = c
			out = append(out, c)
		}
		c.Moves = append(c.Moves, &pb.Reassignment{Topic: pt.t.Name, Partition: int32(pt.p), Target: pt.target})
	}
	return out
}

// Committed returns a group's committed offset on a partition, or false.
func (m *Metadata) Committed(group string, p Partition) (int64, bool) {
	off, ok := m.offsets[group][p]
	return off, ok
}

// GroupOffsets returns a copy of a group's committed offsets (nil: none).
func (m *Metadata) GroupOffsets(group string) map[Partition]int64 {
	offs := m.offsets[group]
	if offs == nil {
		return nil
	}
	out := make(map[Partition]int64, len(offs))
	for p, off := range offs {
		out[p] = off
	}
	return out
}

// Groups returns the names of the groups with committed offsets, sorted.
func (m *Metadata) Groups() []string {
	out := make([]string, 0, len(m.offsets))
	for g := range m.offsets {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

func (m *Metadata) createTopic(index uint64, c *pb.CreateTopic) (Change, error) {
	name, cfg := c.GetName(), c.GetConfig()
	if name == "" || cfg.GetPartitions() <= 0 || cfg.GetReplicationFactor() <= 0 {
		return Change{}, fmt.Errorf("%w: topic %q with %d partitions, replication factor %d",
			ErrBadCommand, name, cfg.GetPartitions(), cfg.GetReplicationFactor())
	}
	if _, ok := m.topics[name]; ok {
		return Change{}, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	nodes := m.nodeIDs()
	rf := int(cfg.GetReplicationFactor())
	if rf > len(nodes) {
		return Change{}, fmt.Errorf("%w: %d replicas asked, %d nodes", ErrNoNodes, rf, len(nodes))
	}
	t := &Topic{Name: name, Config: proto.Clone(cfg).(*pb.TopicConfig), Replicas: Place(name, int(cfg.GetPartitions()), rf, nodes)}
	if c.GetAssignId() {
		t.ID = index
	}
	m.topics[name] = t
	return Change{Created: t}, nil
}

func (m *Metadata) alterTopic(c *pb.AlterTopic) (Change, error) {
	t, ok := m.topics[c.GetName()]
	if !ok || t.ID != c.GetId() {
		return Change{}, fmt.Errorf("%w: %q", ErrTopicNotFound, c.GetName())
	}
	cfg, was := c.GetConfig(), len(t.Replicas)
	switch {
	case cfg.GetPartitions() < int32(was):
		return Change{}, fmt.Errorf("%w: topic %q has %d partitions; they cannot shrink to %d", ErrBadCommand, t.Name, was, cfg.GetPartitions())
	case cfg.GetReplicationFactor() != t.Config.GetReplicationFactor():
		return Change{}, fmt.Errorf("%w: the replication factor of %q changes by moving replicas, not by altering it", ErrBadCommand, t.Name)
	}
	if grow := int(cfg.GetPartitions()) - was; grow > 0 {
		nodes := m.nodeIDs()
		rf := len(t.Replicas[0]) // as the topic's other partitions
		if rf > len(nodes) {
			return Change{}, fmt.Errorf("%w: %d replicas asked, %d nodes", ErrNoNodes, rf, len(nodes))
		}
		t.Replicas = append(t.Replicas, Place(t.Name, was+grow, rf, nodes)[was:]...)
	}
	t.Config = proto.Clone(cfg).(*pb.TopicConfig)
	return Change{Altered: t.clone()}, nil
}

func (m *Metadata) deleteRecords(c *pb.DeleteRecords) (Change, error) {
	t, ok := m.topics[c.GetName()]
	if !ok || t.ID != c.GetId() {
		return Change{}, fmt.Errorf("%w: %q", ErrTopicNotFound, c.GetName())
	}
	p := int(c.GetPartition())
	if p < 0 || p >= len(t.Replicas) || c.GetBefore() < 0 {
		return Change{}, fmt.Errorf("%w: delete records of %s/%d below %d", ErrBadCommand, t.Name, p, c.GetBefore())
	}
	if c.GetBefore() > t.Floor(p) {
		t.setFloor(p, c.GetBefore())
	}
	return Change{Altered: t.clone()}, nil
}

// Place chooses the replicas of each partition of a topic: rf consecutive
// nodes of the sorted node list, starting at an offset derived from the
// topic's name and moving by one per partition, so the preferred leaders
// (the first replica) of a topic's partitions spread over the nodes and
// different topics start at different nodes. Deterministic.
//
// REQUIRES: 0 < rf <= len(nodes), nodes sorted without duplicates.
func Place(topic string, partitions, rf int, nodes []uint64) [][]uint64 {
	h := fnv.New32a()
	h.Write([]byte(topic))
	start := int(h.Sum32() % uint32(len(nodes)))
	out := make([][]uint64, partitions)
	for p := range out {
		for r := 0; r < rf; r++ {
			out[p] = append(out[p], nodes[(start+p+r)%len(nodes)])
		}
	}
	return out
}

func (m *Metadata) nodeIDs() []uint64 {
	ids := make([]uint64, 0, len(m.nodes))
	for id := range m.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Topic returns a copy of a topic, or false.
func (m *Metadata) Topic(name string) (*Topic, bool) {
	t, ok := m.topics[name]
	if !ok {
		return nil, false
	}
	return t.clone(), true
}

// Topics returns copies of every topic, sorted by name.
func (m *Metadata) Topics() []*Topic {
	out := make([]*Topic, 0, len(m.topics))
	for _, t := range m.topics {
		out = append(out, t.clone())
	}
	slices.SortFunc(out, func(a, b *Topic) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Nodes returns copies of every node, sorted by id.
func (m *Metadata) Nodes() []NodeInfo {
	out := make([]NodeInfo, 0, len(m.nodes))
	for _, id := range m.nodeIDs() {
		out = append(out, *m.nodes[id])
	}
	return out
}

func (t *Topic) clone() *Topic {
	c := &Topic{Name: t.Name, ID: t.ID, Config: proto.Clone(t.Config).(*pb.TopicConfig), Replicas: make([][]uint64, len(t.Replicas))}
	for i, r := range t.Replicas {
		c.Replicas[i] = slices.Clone(r)
	}
	if t.Targets != nil {
		c.Targets = make([][]uint64, len(t.Targets))
		for i, r := range t.Targets {
			c.Targets[i] = slices.Clone(r)
		}
	}
	c.DeletedBefore = slices.Clone(t.DeletedBefore)
	return c
}

// Snapshot returns the whole state as a message.
func (m *Metadata) Snapshot() *pb.Snapshot {
	s := &pb.Snapshot{}
	for _, n := range m.Nodes() {
		s.Nodes = append(s.Nodes, &pb.RegisterNode{Id: n.ID, RaftAddr: n.RaftAddr, GrpcAddr: n.GRPCAddr, HttpAddr: n.HTTPAddr, KafkaAddr: n.KafkaAddr, WireAddr: n.WireAddr})
	}
	for _, t := range m.Topics() {
		s.Topics = append(s.Topics, topicState(t))
	}
	groups := m.Groups()
	for g := range m.groupEpochs {
		if _, ok := m.offsets[g]; !ok {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	for _, g := range groups {
		c := &pb.CommitOffsets{Group: g, CoordinatorEpoch: m.groupEpochs[g]}
		for p, off := range m.offsets[g] {
			c.Offsets = append(c.Offsets, &pb.GroupOffset{Topic: p.Topic, Partition: p.ID, Offset: off})
		}
		slices.SortFunc(c.Offsets, func(a, b *pb.GroupOffset) int {
			if a.GetTopic() != b.GetTopic() {
				return strings.Compare(a.GetTopic(), b.GetTopic())
			}
			return int(a.GetPartition()) - int(b.GetPartition())
		})
		s.Groups = append(s.Groups, c)
	}
	m.snapshotSecurity(s)
	m.snapshotTxns(s)
	return s
}

// Restore replaces the state with a snapshot taken at index.
func (m *Metadata) Restore(index uint64, s *pb.Snapshot) {
	*m = *NewMetadata()
	m.Applied = index
	for _, n := range s.GetNodes() {
		m.nodes[n.GetId()] = &NodeInfo{ID: n.GetId(), RaftAddr: n.GetRaftAddr(), GRPCAddr: n.GetGrpcAddr(), HTTPAddr: n.GetHttpAddr(), KafkaAddr: n.GetKafkaAddr(), WireAddr: n.GetWireAddr()}
	}
	for _, ts := range s.GetTopics() {
		t := &Topic{Name: ts.GetName(), ID: ts.GetId(), Config: proto.Clone(ts.GetConfig()).(*pb.TopicConfig)}
		for i, p := range ts.GetPartitions() {
			t.Replicas = append(t.Replicas, slices.Clone(p.GetReplicas()))
			if f := p.GetDeletedBefore(); f > 0 {
				t.setFloor(i, f)
			}
			if len(p.GetTarget()) > 0 {
				for len(t.Targets) <= i {
					t.Targets = append(t.Targets, nil)
				}
				t.Targets[i] = slices.Clone(p.GetTarget())
			}
		}
		if t.Targets != nil {
			for len(t.Targets) < len(t.Replicas) {
				t.Targets = append(t.Targets, nil)
			}
		}
		m.topics[t.Name] = t
	}
	for _, c := range s.GetGroups() {
		offs := make(map[Partition]int64, len(c.GetOffsets()))
		for _, o := range c.GetOffsets() {
			offs[Partition{o.GetTopic(), o.GetPartition()}] = o.GetOffset()
		}
		if e := c.GetCoordinatorEpoch(); e != 0 {
			m.groupEpochs[c.GetGroup()] = e
		}
		if len(offs) > 0 {
			m.offsets[c.GetGroup()] = offs
		}
	}
	m.restoreSecurity(s)
	m.restoreTxns(s)
}
