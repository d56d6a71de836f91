package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/replication"
)

// ClusterConfig says which cluster the broker is a node of (see
// cluster.NodeConfig); the zero value is a cluster of one, node 1.
type ClusterConfig = cluster.NodeConfig

// Move is one partition's planned replica move.
type Move = cluster.Move

// startCluster starts this node's part of the cluster (cluster.StartNode:
// the node-to-node listener serving Raft and the node service, the
// metadata group) and then opens the topics the metadata holds.
func (b *Broker) startCluster() error {
	b.replaying = true
	n, err := cluster.StartNode(b.cfg.Cluster, cluster.StartConfig{
		Dir: filepath.Join(b.cfg.DataDir, "cluster"), Meta: b.meta, Logger: b.log,
		Services: func(s *grpc.Server) { nodepb.RegisterNodeServer(s, &nodeService{b: b}) },
		OnChange: b.onMetaChange, OnMetaFail: b.metaFailed,
	})
	if err != nil {
		return err
	}
	b.cl = n
	b.cfg.Cluster = n.Config()
	b.reconcile()
	return nil
}

// Rebalance plans and starts replica moves that spread the partitions'
// replicas evenly over the nodes, moving every replica off the drained
// nodes (to remove them afterwards). The moves go on in the background
// (DescribeCluster shows each moving partition's target); it returns the
// moves started. Errors: retriable ErrUnavailable.
func (b *Broker) Rebalance(ctx context.Context, drain []uint64) ([]Move, error) {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return nil, err
	}
	moves, err := b.cl.Rebalance(ctx, drain)
	b.auditChange(ctx, "rebalance started", err, "drain", fmt.Sprint(drain), "moves", len(moves))
	return moves, b.clusterError("rebalance", err)
}

// CancelMoves stops the replica moves in progress (see
// cluster.Node.CancelMoves) and returns them.
func (b *Broker) CancelMoves(ctx context.Context) ([]Move, error) {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return nil, err
	}
	moves, err := b.cl.CancelMoves(ctx)
	b.auditChange(ctx, "moves cancelled", err, "moves", len(moves))
	return moves, b.clusterError("cancel moves", err)
}

// AddNode adds a node (started with --join, listening for other nodes
// at raftAddr) to the cluster. ErrInvalidArgument for a bad id or
// address.
func (b *Broker) AddNode(ctx context.Context, id uint64, raftAddr string) error {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return err
	}
	err := b.cl.AddNode(ctx, id, raftAddr)
	b.auditChange(ctx, "node added", err, "node", id, "raft", raftAddr)
	return b.clusterError(fmt.Sprintf("add node %d", id), err)
}

// RemoveNode takes a node out of the cluster; refused
// (ErrInvalidArgument) while it holds partition replicas.
func (b *Broker) RemoveNode(ctx context.Context, id uint64) error {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return err
	}
	err := b.cl.RemoveNode(ctx, id)
	b.auditChange(ctx, "node removed", err, "node", id)
	if errors.Is(err, cluster.ErrNodeInUse) {
		return errorf(ErrInvalidArgument, "node %d still holds partition replicas; move them first with hermes cluster rebalance --drain %d (%v)", id, id, err)
	}
	return b.clusterError(fmt.Sprintf("remove node %d", id), err)
}

// clusterError maps a membership or move operation's error to its kind.
func (b *Broker) clusterError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrBadCommand):
		return errorf(ErrInvalidArgument, "%s: %v", what, err)
	}
	return &kindError{kind: ErrUnavailable, retryAfter: metadataRetry, msg: fmt.Sprintf("%s: %v", what, err)}
}

// onMetaChange acts on an applied metadata command: open the partitions of
// a new topic that this node holds, or remove a deleted topic. It runs on
// the metadata group's goroutine, in log order.
//
// While the metadata group replays its log at start (replaying), it does
// nothing: the history holds topics created and deleted long ago, and
// acting on it would, for instance, delete the files of a topic whose
// name a newer topic took. reconcile then acts on the state reached.
func (b *Broker) onMetaChange(ch cluster.Change) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if b.replaying {
		return
	}
	switch {
	case ch.Security:
		b.refreshSecurity()
	case ch.Created != nil:
		if err := b.openClusterTopic(ch.Created); err != nil {
			b.log.Error("cannot open the partitions of a new topic", "topic", ch.Created.Name, "err", err)
		}
	case ch.Deleted != nil:
		b.removeClusterTopic(ch.Deleted.Name, ch.Deleted.ID)
	case ch.Node != nil:
		b.log.Info("cluster node known", "node", ch.Node.ID, "grpc", ch.Node.GRPCAddr)
	case ch.Removed != nil:
		b.log.Info("cluster node deregistered", "node", ch.Removed.ID)
	case ch.Moved != nil:
		b.moveReplicas(ch.Moved)
	case ch.Altered != nil:
		b.alterTopic(ch.Altered)
	}
}

// reconcile ends the replay at start: it opens every topic of the
// metadata as this node has applied it so far (the commands committed
// since arrive as changes). Once the node has caught up with the metadata
// group's leader, sweepLater removes what this node no longer holds.
func (b *Broker) reconcile() {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	b.replaying = false
	b.refreshSecurity()
	for _, ct := range b.cl.Meta().Topics() {
		if err := b.openClusterTopic(ct); err != nil {
			b.log.Error("cannot open the partitions of a topic", "topic", ct.Name, "err", err)
		}
	}
}

// sweepLater waits until this node has applied everything the metadata
// group had committed (a restarted node's state lags until its leader
// tells it the commit index), then sweeps: the files and Raft state of
// topics deleted, and partitions moved away, while this node was down.
// Before that point the state cannot tell a deleted topic from one whose
// creation this node has not applied yet.
func (b *Broker) sweepLater() {
	defer b.wg.Done()
	for {
		// Short attempts: a read request sent to a leader that just died
		// is never answered.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := b.cl.Meta().Sync(ctx)
		cancel()
		if err == nil {
			b.metaSynced.Store(true)
			break
		}
		select {
		case <-b.stop:
			return
		case <-time.After(metadataRetry):
		}
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	dirs := make(map[string]bool) // topic directories to keep
	keep := make(map[string]bool) // group names of the partitions to keep
	for _, ct := range b.cl.Meta().Topics() {
		dirs[cluster.DirName(ct.Name, ct.ID)] = true
		for i := range ct.Replicas {
			if ct.Holds(i, b.cfg.Cluster.NodeID) {
				keep[cluster.GroupName(ct.Name, ct.ID, int32(i))] = true
			}
		}
	}
	// What is open here stays until its own change closes it (applied to
	// the state already, its OnChange waits for metaMu).
	for _, p := range b.activePartitions() {
		dirs[p.t.dirName()] = true
		if p.rep != nil {
			keep[p.group()] = true
		}
	}
	b.sweep(dirs, keep)
}

// sweep removes the topic directories not in dirs, the partition
// directories of kept topics whose groups are not in keep, and the Raft
// state of every partition group not in keep.
func (b *Broker) sweep(dirs, keep map[string]bool) {
	entries, err := os.ReadDir(topicsDir(b.cfg.DataDir))
	if err != nil {
		b.log.Warn("cannot list the topic directories", "err", err)
		return
	}
	for _, e := range entries {
		if !dirs[e.Name()] {
			b.log.Info("removing the files of a topic that no longer exists", "dir", e.Name())
			b.trash(e.Name())
			continue
		}
		parts, _ := os.ReadDir(filepath.Join(topicsDir(b.cfg.DataDir), e.Name()))
		for _, p := range parts {
			if !keep[e.Name()+"/"+p.Name()] {
				b.log.Info("removing the files of a partition this node no longer holds", "dir", e.Name()+"/"+p.Name())
				os.RemoveAll(filepath.Join(topicsDir(b.cfg.DataDir), e.Name(), p.Name()))
			}
		}
	}
	b.emptyTrash()
	groups, err := b.meta.RaftGroups()
	if err != nil {
		b.log.Warn("cannot list the raft groups", "err", err)
		return
	}
	for _, g := range groups {
		if g != cluster.MetaGroupName && !keep[g] {
			if err := b.meta.DeleteRaftState(g); err != nil {
				b.log.Warn("cannot delete the raft state of a partition this node no longer holds", "group", g, "err", err)
			}
		}
	}
}

// moveReplicas follows a change of a topic's replicas: a partition this
// node is getting is opened (empty: the leader sends it everything), one
// it no longer holds is closed and its files deleted. It runs on the
// metadata group's goroutine.
func (b *Broker) moveReplicas(ct *cluster.Topic) {
	b.mu.RLock()
	t := b.topics[ct.Name]
	b.mu.RUnlock()
	if t == nil || t.state != topicActive {
		return
	}
	self := b.cfg.Cluster.NodeID
	parts := slices.Clone(t.partitions())
	var gone []*partition
	for i, cur := range parts {
		if i >= len(ct.Replicas) {
			break
		}
		want := ct.Holds(i, self)
		if cur.rep != nil {
			cur.rep.SetAssigned(slices.Concat(ct.Replicas[i], ct.Target(i)))
		}
		switch {
		case want && cur.rep == nil:
			p, err := b.openClusterPartition(t, int32(i), ct.Replicas[i], ct.Target(i))
			if err != nil {
				b.log.Error("cannot open a partition moving here", "topic", t.name, "partition", i, "err", err)
				continue
			}
			p.setFloor(ct.Floor(i))
			parts[i] = p
			cur.close() // the placeholder's mirror
			b.log.Info("partition replica moving here", "topic", t.name, "partition", i, "target", ct.Target(i))
		case !want && cur.rep != nil && ct.Target(i) != nil && slices.Contains(cur.rep.Voters(), self):
			// Still a voter of a group whose move goes on without this
			// node (a cancelled move taking back the replica it added
			// here): the group may need it for its quorum until the
			// leader removes it. The move's completion drops it.
		case !want && cur.rep != nil:
			parts[i] = remotePartition(b, t, int32(i), ct.Replicas[i])
			gone = append(gone, cur)
		case !want:
			parts[i] = remotePartition(b, t, int32(i), ct.Replicas[i]) // where it is now
			cur.close()                                                // its mirror
		}
	}
	t.setPartitions(parts)
	t.broadcast()
	for _, p := range gone {
		p.close()
		p.delete()
		b.log.Info("partition replica moved away", "topic", t.name, "partition", p.id)
	}
}

// openClusterTopic opens a topic of the metadata on this node, unless it is
// open already. Lock: metaMu held.
func (b *Broker) openClusterTopic(ct *cluster.Topic) error {
	b.mu.RLock()
	cur := b.topics[ct.Name]
	b.mu.RUnlock()
	if cur != nil && cur.id == ct.ID {
		return nil
	}
	cfg := topicConfigFromCluster(ct.Config)
	t := newTopic(ct.Name, ct.ID, cfg)
	b.m.initTopic(t.name)
	for i := range ct.Replicas {
		p, err := b.openClusterPartition(t, int32(i), ct.Replicas[i], ct.Target(i))
		if err != nil {
			// One replica that cannot open (a corrupt log) leaves that
			// partition offline here, not the whole topic: the others
			// serve it.
			p = b.unopenedPartition(t, int32(i), ct.Replicas[i], err)
		}
		p.setFloor(ct.Floor(i))
		t.setPartitions(append(t.partitions(), p))
	}
	b.mu.Lock()
	b.topics[t.name] = t
	b.mu.Unlock()
	b.log.Info("topic opened", "topic", t.name, "partitions", len(t.partitions()))
	return nil
}

// openClusterPartition opens partition id of t: a Raft replica when this
// node holds it (or is getting it: it is in the move's target), else a
// placeholder that knows where the partition is. A replica of the
// original set bootstraps the group with it; one a move adds starts
// empty and gets everything from the leader.
func (b *Broker) openClusterPartition(t *topic, id int32, replicas, target []uint64) (*partition, error) {
	self := b.cfg.Cluster.NodeID
	if !slices.Contains(replicas, self) && !slices.Contains(target, self) {
		return remotePartition(b, t, id, replicas), nil
	}
	peers := replicas
	if !slices.Contains(replicas, self) {
		peers = nil
	}
	p, err := b.openPartition(t, id, replicas, peers)
	if err != nil {
		return nil, err
	}
	p.rep.SetAssigned(slices.Concat(replicas, target))
	b.cl.Host().Add(p.group(), p.rep)
	if p.rep.Bootstrapped() && len(peers) > 1 && peers[0] == self {
		go b.campaignNew(p.rep)
	}
	return p, nil
}

// campaignNew makes this node, the preferred leader of a partition just
// created, stand for election at once, and again while the other replicas
// may still be creating the group (they learn of the topic a heartbeat
// after this node): a new partition is writable in ~100 ms, not after an
// election timeout of 1-2 s.
func (b *Broker) campaignNew(rep *replication.Replica) {
	for _, d := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		time.Sleep(d)
		if rep.Leader() != 0 {
			return
		}
		rep.Campaign()
	}
}

// removeClusterTopic drops topic name of that id, if it is open here.
// Lock: metaMu held.
func (b *Broker) removeClusterTopic(name string, id uint64) {
	b.mu.Lock()
	t, ok := b.topics[name]
	ok = ok && t.id == id
	if ok {
		t.state = topicDeleting
	}
	b.mu.Unlock()
	if ok {
		b.dropTopic(t)
	}
}

// createClusterTopic runs the creation through the metadata group, from
// any node; it returns once this node has applied it.
func (b *Broker) createClusterTopic(name string, cfg TopicConfig, ifNotExists bool) (TopicInfo, error) {
	voters := len(b.cl.Meta().Voters())
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = b.cfg.Cluster.ReplicationFactor
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = int32(min(3, max(voters, 1)))
	}
	if voters > 0 && int(cfg.ReplicationFactor) > voters {
		return TopicInfo{}, errorf(ErrInvalidArgument, "replication factor %d needs %d nodes; the cluster has %d (add nodes with hermes cluster join)",
			cfg.ReplicationFactor, cfg.ReplicationFactor, voters)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := b.cl.Meta().Run(ctx, createTopicCmd(name, cfg, true))
	switch {
	case errors.Is(err, cluster.ErrTopicExists):
		if !ifNotExists {
			return TopicInfo{}, errorf(ErrTopicExists, "topic %q already exists", name)
		}
	case errors.Is(err, cluster.ErrNoNodes): // a node of the cluster has not registered yet
		return TopicInfo{}, &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: metadataRetry}
	case err != nil:
		return TopicInfo{}, &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("create topic %q: %v", name, err), retryAfter: topicBusyRetry}
	}
	return b.topicInfo(name)
}

func (b *Broker) deleteClusterTopic(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := &cpb.Command{Kind: &cpb.Command_DeleteTopic{DeleteTopic: &cpb.DeleteTopic{Name: name}}}
	_, err := b.cl.Meta().Run(ctx, cmd)
	switch {
	case errors.Is(err, cluster.ErrTopicNotFound):
		return errorf(ErrTopicNotFound, "topic %q does not exist", name)
	case err != nil:
		return &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("delete topic %q: %v", name, err), retryAfter: topicBusyRetry}
	}
	return nil
}

func topicConfigFromCluster(c *cpb.TopicConfig) TopicConfig {
	return TopicConfig{
		Partitions: c.GetPartitions(), RetentionAge: time.Duration(c.GetRetentionMs()) * time.Millisecond,
		RetentionBytes: c.GetRetentionBytes(), MaxMessageBytes: c.GetMaxMessageBytes(),
		DefaultMode: Mode(c.GetDefaultMode()), SegmentBytes: c.GetSegmentBytes(), ReplicationFactor: c.GetReplicationFactor(),
	}
}

// ClusterNode describes a node of the cluster.
type ClusterNode struct {
	ID                 uint64
	GRPCAddr, HTTPAddr string
	// KafkaAddr is where Kafka clients reach the node ("" without a
	// Kafka listener); WireAddr where hermes-wire clients do ("" without
	// a hermes-wire listener).
	KafkaAddr, WireAddr string
}

// ClusterNodes lists the registered nodes (nil on a single node).
func (b *Broker) ClusterNodes() []ClusterNode {
	var out []ClusterNode
	for _, n := range b.cl.Meta().Nodes() {
		out = append(out, ClusterNode{ID: n.ID, GRPCAddr: n.GRPCAddr, HTTPAddr: n.HTTPAddr, KafkaAddr: n.KafkaAddr, WireAddr: n.WireAddr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Nodes lists the cluster's nodes and the addresses they advertise,
// sorted by id; before this node has registered, it lists itself.
func (b *Broker) Nodes() []ClusterNode {
	nodes := b.ClusterNodes()
	for _, n := range nodes {
		if n.ID == b.cfg.Cluster.NodeID {
			return nodes
		}
	}
	c := b.cfg.Cluster
	self := ClusterNode{ID: c.NodeID, GRPCAddr: c.GRPCAddr, HTTPAddr: c.HTTPAddr, KafkaAddr: c.KafkaAddr, WireAddr: c.WireAddr}
	nodes = append(nodes, self)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes
}

// PartitionPlacement says where a partition is served.
type PartitionPlacement struct {
	Partition int32
	// Leader is the node leading the partition's Raft group as this node
	// last saw it (0: none known).
	Leader uint64
	// LeaderTerm is the group's Raft term as this node knows it: the
	// leader's term when this node leads (Kafka's leader epoch).
	LeaderTerm uint64
	Replicas   []uint64
	// Local: this node holds a replica (Leader and LeaderTerm are known
	// only then; elsewhere they come from the metadata group's view).
	Local bool
}

// replicasOf is a partition's replica set as the metadata group (ct, when
// known) or else this node knows it; the caller's to keep.
func replicasOf(ct *cluster.Topic, p *partition) []uint64 {
	if ct != nil && int(p.id) < len(ct.Replicas) {
		return ct.Replicas[p.id]
	}
	return slices.Clone(p.replicas)
}

// Placement reports where each partition of a topic is served.
func (b *Broker) Placement(ctx context.Context, topic string) ([]PartitionPlacement, error) {
	if err := b.authorize(ctx, ActionDescribe, topicResource(topic)); err != nil {
		return nil, err
	}
	t, err := b.topic(topic)
	if err != nil {
		return nil, err
	}
	ct, _ := b.cl.Meta().Topic(t.name)
	parts := t.partitions()
	out := make([]PartitionPlacement, len(parts))
	for i, p := range parts {
		pp := PartitionPlacement{Partition: p.id, Replicas: replicasOf(ct, p)}
		if p.rep != nil {
			pp.Local = true
			pp.Leader, pp.LeaderTerm = p.rep.Leader(), p.rep.Term()
		}
		out[i] = pp
	}
	return out, nil
}

// leaderAddr is the gRPC address of a node, when known.
func (b *Broker) leaderAddr(node uint64) string {
	if node == 0 {
		return ""
	}
	for _, n := range b.cl.Meta().Nodes() {
		if n.ID == node {
			return n.GRPCAddr
		}
	}
	return ""
}

// ClusterPartition is one partition as this node sees it.
type ClusterPartition struct {
	Topic     string
	Partition int32
	Leader    uint64 // 0: unknown here
	Replicas  []uint64
	// Target is the replica set the partition is moving to (nil: none).
	Target []uint64
	// Lag, in Raft entries behind the leader, per replica; only when this
	// node leads the partition.
	Lag           map[uint64]uint64
	HighWatermark int64
}

// ClusterStatus is what this node knows of the cluster.
type ClusterStatus struct {
	NodeID         uint64 // 0 on a single node
	MetadataLeader uint64
	Nodes          []ClusterNode
	Partitions     []ClusterPartition
}

// DescribeCluster reports the nodes and every partition's leader, replicas
// and (where this node leads) its followers' lag.
func (b *Broker) DescribeCluster(ctx context.Context) (ClusterStatus, error) {
	if err := b.authorize(ctx, ActionDescribe, clusterResource); err != nil {
		return ClusterStatus{}, err
	}
	return b.describeCluster(), nil
}

func (b *Broker) describeCluster() ClusterStatus {
	st := ClusterStatus{NodeID: b.cfg.Cluster.NodeID, MetadataLeader: b.cl.Meta().Leader(), Nodes: b.ClusterNodes()}
	for _, ti := range b.topicInfos() {
		t, err := b.topic(ti.Name)
		if err != nil {
			continue
		}
		ct, _ := b.cl.Meta().Topic(t.name)
		for _, p := range t.partitions() {
			cp := ClusterPartition{Topic: t.name, Partition: p.id, Replicas: replicasOf(ct, p)}
			if ct != nil && int(p.id) < len(ct.Replicas) {
				cp.Target = ct.Target(int(p.id))
			}
			if p.rep != nil {
				cp.Leader = p.rep.Leader()
				cp.Lag, _ = p.rep.Progress()
				_, cp.HighWatermark = p.offsets()
			}
			st.Partitions = append(st.Partitions, cp)
		}
	}
	return st
}
