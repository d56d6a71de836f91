package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// ClusterConfig says which cluster the broker is a node of. A node with no
// Peers (the default) is a cluster of one: it bootstraps the metadata
// group alone, and grows into a cluster by adding nodes to it (started
// with Join). Every partition is a Raft group on its replicas (placement
// by cluster.Place).
type ClusterConfig struct {
	// NodeID is this node's id (default 1). A data directory belongs to
	// the id it was first opened with.
	NodeID uint64
	// RaftAddr is where this node listens for other nodes (default
	// 127.0.0.1:0: a free port, for a cluster of one).
	RaftAddr string
	// Peers maps every node id of the metadata group (this one included)
	// to its RaftAddr, to bootstrap a cluster of several; empty: a
	// cluster of one.
	Peers map[uint64]string
	// GRPCAddr and HTTPAddr are the addresses clients reach this node at
	// (advertised to the other nodes for redirects).
	GRPCAddr, HTTPAddr string
	// ReplicationFactor is the default number of replicas of a partition
	// (0: min(3, the metadata group's voters) when the topic is created).
	ReplicationFactor int32
	// TickInterval is the Raft tick (default 100ms: elections after about
	// a second).
	TickInterval time.Duration
	// Join: this node is new to a running cluster. It does not bootstrap
	// the metadata group with Peers (which then only tell it where the
	// other nodes are); it waits until a member adds it (AddClusterNode),
	// then catches up and registers.
	Join bool
	// MetaSnapshotEntries: the metadata log is compacted every so many
	// entries (default 1000).
	MetaSnapshotEntries int
}

// clusterNode is the broker's part of a cluster.
type clusterNode struct {
	cfg  ClusterConfig
	host *replication.Host
	tr   *replication.GRPCTransport
	srv  *grpc.Server
	meta *cluster.MetaGroup
}

func (c *ClusterConfig) validate() error {
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if len(c.Peers) == 0 {
		if c.Join {
			return errors.New("cluster: joining a cluster needs its nodes' addresses (peers)")
		}
		if c.RaftAddr == "" {
			c.RaftAddr = "127.0.0.1:0"
		}
		c.Peers = map[uint64]string{c.NodeID: c.RaftAddr}
	}
	if c.Peers[c.NodeID] == "" {
		return fmt.Errorf("cluster: node %d is not among the peers %v", c.NodeID, c.Peers)
	}
	if c.RaftAddr == "" {
		c.RaftAddr = c.Peers[c.NodeID]
	}
	if c.ReplicationFactor < 0 || c.ReplicationFactor > maxReplicationFactor {
		return fmt.Errorf("cluster: replication factor must be 1 to %d, got %d", maxReplicationFactor, c.ReplicationFactor)
	}
	return nil
}

// alone reports whether this node bootstraps a cluster of one.
func (c *ClusterConfig) alone() bool { return len(c.Peers) == 1 && !c.Join }

// startCluster joins the cluster: the node-to-node listener, the metadata
// group (whose replay opens the partitions this node holds), and the
// registration of this node's addresses. A cluster of one is registered
// before startCluster returns; on a cluster of several, registration
// waits for a quorum in the background.
func (b *Broker) startCluster() error {
	c := &b.cfg.Cluster // validated
	lis, err := net.Listen("tcp", c.RaftAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen on %s: %w", c.RaftAddr, err)
	}
	if c.alone() { // a free port chosen by the kernel is the address
		c.RaftAddr = lis.Addr().String()
		c.Peers = map[uint64]string{c.NodeID: c.RaftAddr}
	}
	cn := &clusterNode{cfg: *c, host: replication.NewHost()}
	cn.tr = replication.NewGRPCTransport(c.NodeID, cn.host.Deliver, b.log.With("component", "raft"))
	var voters []uint64
	for id, addr := range c.Peers {
		voters = append(voters, id)
		if id != c.NodeID {
			cn.tr.SetPeer(id, addr)
		}
	}
	slices.Sort(voters)
	cn.srv = grpc.NewServer(replication.TransportServerOptions()...)
	cn.tr.Register(cn.srv)
	nodepb.RegisterNodeServer(cn.srv, &nodeService{b: b})
	go cn.srv.Serve(lis)
	b.cl = cn
	if c.Join {
		voters = nil
	}
	b.replaying = true
	cn.meta, err = cluster.OpenMetaGroup(cluster.MetaConfig{
		NodeID: c.NodeID, Peers: voters, Dir: filepath.Join(b.cfg.DataDir, "cluster", "meta"), OnMember: b.onMember,
		Meta: b.meta, Transport: cn.tr, Host: cn.host, Forward: cn.tr,
		Logger: b.log.With("group", cluster.MetaGroupName), TickInterval: c.TickInterval, SnapshotEntries: c.MetaSnapshotEntries,
		OnChange: b.onMetaChange,
	})
	if err != nil {
		cn.srv.Stop()
		cn.tr.Close()
		return err
	}
	b.reconcile()
	if c.alone() {
		ctx, cancel := context.WithTimeout(context.Background(), aloneStartTimeout)
		err := b.registerNode(ctx)
		cancel()
		if err != nil {
			cn.close()
			return fmt.Errorf("cluster: register this node: %w", err)
		}
	} else {
		b.wg.Add(1)
		go b.registerSelf()
	}
	b.wg.Add(2)
	go b.every(leaderBalanceInterval, b.balanceLeaders)
	go b.every(moveInterval, b.driveMoves)
	b.log.Info("cluster node started", "node", c.NodeID, "raft", c.RaftAddr, "peers", len(c.Peers))
	return nil
}

// aloneStartTimeout bounds the start of a cluster of one: electing itself
// and registering take a few fsyncs.
const aloneStartTimeout = 30 * time.Second

// maxReplicationFactor bounds the replicas of a partition.
const maxReplicationFactor = 7

// registerCmd announces this node's addresses.
func (b *Broker) registerCmd() *cpb.Command {
	c := b.cl.cfg
	return &cpb.Command{Kind: &cpb.Command_RegisterNode{RegisterNode: &cpb.RegisterNode{
		Id: c.NodeID, RaftAddr: c.RaftAddr, GrpcAddr: c.GRPCAddr, HttpAddr: c.HTTPAddr}}}
}

// registerNode announces this node's addresses through the metadata group.
func (b *Broker) registerNode(ctx context.Context) error {
	_, err := b.cl.meta.Run(ctx, b.registerCmd())
	return err
}

// registerSelf announces this node's addresses through the metadata group,
// retrying until it succeeds or the broker stops.
func (b *Broker) registerSelf() {
	defer b.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.registerNode(ctx)
		cancel()
		if err == nil {
			b.log.Info("cluster node registered", "node", b.cl.cfg.NodeID)
			return
		}
		select {
		case <-b.stop:
			return
		case <-time.After(metadataRetry):
		}
	}
}

func (cn *clusterNode) close() {
	cn.meta.Close()
	cn.srv.Stop()
	cn.tr.Close()
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
	case ch.Created != nil:
		if err := b.openClusterTopic(ch.Created); err != nil {
			b.log.Error("cannot open the partitions of a new topic", "topic", ch.Created.Name, "err", err)
		}
	case ch.Deleted != nil:
		b.removeClusterTopic(ch.Deleted.Name, ch.Deleted.ID)
	case ch.Node != nil:
		b.learnNode(*ch.Node)
	case ch.Removed != nil:
		b.log.Info("cluster node deregistered", "node", ch.Removed.ID)
	case ch.Moved != nil:
		b.moveReplicas(ch.Moved)
	}
}

// learnNode makes the transport reach a node that joined at runtime at
// the address it registered; the static --peers addresses (which may
// differ: a proxy, a NAT) stay as configured.
func (b *Broker) learnNode(n cluster.Node) {
	if _, static := b.cl.cfg.Peers[n.ID]; !static && n.ID != b.cl.cfg.NodeID && n.RaftAddr != "" {
		b.cl.tr.SetPeer(n.ID, n.RaftAddr)
	}
	b.log.Info("cluster node known", "node", n.ID, "grpc", n.GRPCAddr)
}

// reconcile ends the replay at start: it opens every topic of the
// metadata as this node has applied it so far (the commands committed
// since arrive as changes). Once the node has caught up with the metadata
// group's leader, sweepLater removes what this node no longer holds.
func (b *Broker) reconcile() {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	b.replaying = false
	for _, n := range b.cl.meta.Nodes() {
		b.learnNode(n)
	}
	for _, ct := range b.cl.meta.Topics() {
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.cl.meta.Sync(ctx)
		cancel()
		if err == nil {
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
	for _, ct := range b.cl.meta.Topics() {
		dirs[dirName(ct.Name, ct.ID)] = true
		for i := range ct.Replicas {
			if ct.Holds(i, b.cfg.Cluster.NodeID) {
				keep[groupName(ct.Name, ct.ID, int32(i))] = true
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
	self := b.cl.cfg.NodeID
	parts := slices.Clone(t.partitions())
	var gone []*partition
	for i, cur := range parts {
		if i >= len(ct.Replicas) {
			break
		}
		want := ct.Holds(i, self)
		switch {
		case want && cur.rep == nil:
			p, err := b.openClusterPartition(t, int32(i), ct.Replicas[i], ct.Target(i))
			if err != nil {
				b.log.Error("cannot open a partition moving here", "topic", t.name, "partition", i, "err", err)
				continue
			}
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

// every runs fn every d until the broker stops.
func (b *Broker) every(d time.Duration, fn func()) {
	defer b.wg.Done()
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			fn()
		}
	}
}

// moveInterval is how often a partition leader takes the next step of a
// replica move.
const moveInterval = 300 * time.Millisecond

// driveMoves carries out replica moves on the partitions this node leads,
// one step at a time: add each target voter, wait until every target
// replica has caught up, remove the voters not in the target (handing
// leadership over first when this node leaves), then complete the move
// in the metadata group. Every step is retried until it holds, so a move
// survives a leader change: the next leader goes on from the voters it
// finds.
func (b *Broker) driveMoves() {
	for _, ct := range b.cl.meta.Topics() {
		if ct.Targets == nil {
			continue
		}
		t, err := b.lookupTopic(ct.Name)
		if err != nil {
			continue
		}
		parts := t.partitions()
		for i, target := range ct.Targets {
			if target != nil && i < len(parts) && parts[i].rep != nil && parts[i].rep.Leader() == b.cl.cfg.NodeID {
				b.moveStep(ct.Name, int32(i), parts[i].rep, target)
			}
		}
	}
}

func (b *Broker) moveStep(topic string, id int32, rep *replication.Replica, target []uint64) {
	self := b.cl.cfg.NodeID
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	voters := rep.Voters()
	for _, n := range target {
		if !slices.Contains(voters, n) {
			if err := rep.ChangeVoter(ctx, n, true, nil); err != nil {
				b.log.Debug("replica move: add voter", "topic", topic, "partition", id, "node", n, "err", err)
			} else {
				b.log.Info("replica move: voter added", "topic", topic, "partition", id, "node", n)
			}
			return
		}
	}
	lag, ok := rep.Progress()
	if !ok {
		return
	}
	for _, n := range target {
		if lag[n] != 0 {
			return // a new replica is catching up
		}
	}
	for _, n := range voters {
		if slices.Contains(target, n) {
			continue
		}
		if n == self {
			rep.TransferLeadership(target[0]) // the next leader goes on
			return
		}
		if err := rep.ChangeVoter(ctx, n, false, nil); err != nil {
			b.log.Debug("replica move: remove voter", "topic", topic, "partition", id, "node", n, "err", err)
		} else {
			b.log.Info("replica move: voter removed", "topic", topic, "partition", id, "node", n)
		}
		return
	}
	_, err := b.cl.meta.Run(ctx, &cpb.Command{Kind: &cpb.Command_CompleteReassignment{CompleteReassignment: &cpb.CompleteReassignment{
		Topic: topic, Partition: id, Replicas: voters}}})
	if err != nil {
		b.log.Debug("replica move: complete", "topic", topic, "partition", id, "err", err)
		return
	}
	b.log.Info("replica move complete", "topic", topic, "partition", id, "replicas", voters)
}

// Move is one partition's planned replica move.
type Move struct {
	Topic     string
	Partition int32
	From, To  []uint64
}

// Rebalance plans and starts replica moves that spread the partitions'
// replicas evenly over the nodes, moving every replica off the drained
// nodes (to remove them afterwards). The moves go on in the background
// (DescribeCluster shows each moving partition's target); it returns the
// moves started.
func (b *Broker) Rebalance(drain []uint64) ([]Move, error) {
	return b.reassign("rebalance", func() []*cpb.ReassignPartitions { return b.cl.meta.Balance(drain) })
}

// CancelMoves stops the replica moves in progress: each moving partition
// is sent back to its replicas, so its leader removes any replica added on
// the way (cancelling a move whose new node died, which could never
// finish). It returns the moves cancelled, From being where they went.
func (b *Broker) CancelMoves() ([]Move, error) {
	return b.reassign("cancel moves", func() []*cpb.ReassignPartitions {
		var plan []*cpb.ReassignPartitions
		for _, ct := range b.cl.meta.Topics() {
			c := &cpb.ReassignPartitions{Replace: true}
			for i, target := range ct.Targets {
				if target != nil && i < len(ct.Replicas) {
					c.Moves = append(c.Moves, &cpb.Reassignment{Topic: ct.Name, Partition: int32(i), Target: ct.Replicas[i]})
				}
			}
			if len(c.Moves) > 0 {
				plan = append(plan, c)
			}
		}
		return plan
	})
}

// reassign runs the reassignments plan makes from the metadata as the
// leader has it, and returns the moves, each From where the partition
// was going (its target if it was moving, else its replicas).
func (b *Broker) reassign(what string, plan func() []*cpb.ReassignPartitions) ([]Move, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.cl.meta.Sync(ctx); err != nil {
		return nil, &kindError{kind: ErrUnavailable, retryAfter: 200 * time.Millisecond, msg: fmt.Sprintf("%s: catch up with the metadata: %v", what, err)}
	}
	var out []Move
	for _, c := range plan() {
		var moves []Move
		for _, mv := range c.GetMoves() {
			m := Move{Topic: mv.GetTopic(), Partition: mv.GetPartition(), To: mv.GetTarget()}
			if ct, ok := b.cl.meta.Topic(m.Topic); ok && int(m.Partition) < len(ct.Replicas) {
				m.From = ct.Replicas[m.Partition]
				if t := ct.Target(int(m.Partition)); t != nil {
					m.From = t
				}
			}
			moves = append(moves, m)
		}
		if _, err := b.cl.meta.Run(ctx, &cpb.Command{Kind: &cpb.Command_ReassignPartitions{ReassignPartitions: c}}); err != nil {
			return out, &kindError{kind: ErrUnavailable, retryAfter: 200 * time.Millisecond, msg: fmt.Sprintf("%s: %v", what, err)}
		}
		out = append(out, moves...)
	}
	return out, nil
}

// onMember learns where a node added to the metadata group listens, so
// this node's transport reaches it (before it has registered itself).
func (b *Broker) onMember(node uint64, added bool, raftAddr string) {
	switch {
	case added && node != b.cl.cfg.NodeID:
		if _, static := b.cl.cfg.Peers[node]; !static {
			b.cl.tr.SetPeer(node, raftAddr)
		}
		b.log.Info("cluster node added", "node", node, "raft", raftAddr)
	case !added && node == b.cl.cfg.NodeID:
		b.log.Warn("this node was removed from the cluster; stop it")
	case !added:
		b.log.Info("cluster node removed", "node", node)
	}
}

// AddClusterNode adds a node (started with --join, listening for other
// nodes at raftAddr) to the cluster.
func (b *Broker) AddClusterNode(id uint64, raftAddr string) error {
	if id == 0 || raftAddr == "" {
		return errorf(ErrInvalidArgument, "a node id (positive) and its raft address are needed")
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return errorf(ErrInvalidArgument, "raft address %q: %v", raftAddr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.cl.meta.AddMember(ctx, id, raftAddr); err != nil {
		return &kindError{kind: ErrUnavailable, retryAfter: 200 * time.Millisecond, msg: fmt.Sprintf("add node %d: %v", id, err)}
	}
	return nil
}

// RemoveClusterNode takes a node out of the cluster; refused while it
// holds partition replicas.
func (b *Broker) RemoveClusterNode(id uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := b.cl.meta.RemoveMember(ctx, id)
	switch {
	case errors.Is(err, cluster.ErrNodeInUse):
		return errorf(ErrInvalidArgument, "node %d still holds partition replicas; move them first with hermes cluster rebalance --drain %d (%v)", id, id, err)
	case err != nil:
		return &kindError{kind: ErrUnavailable, retryAfter: 200 * time.Millisecond, msg: fmt.Sprintf("remove node %d: %v", id, err)}
	}
	return nil
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
			for _, q := range t.partitions() {
				q.close()
			}
			return err
		}
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
	b.cl.host.Add(p.group(), p.rep)
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
	voters := len(b.cl.meta.Voters())
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
	_, err := b.cl.meta.Run(ctx, createTopicCmd(name, cfg, true))
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
	return b.Topic(name)
}

func (b *Broker) deleteClusterTopic(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := &cpb.Command{Kind: &cpb.Command_DeleteTopic{DeleteTopic: &cpb.DeleteTopic{Name: name}}}
	_, err := b.cl.meta.Run(ctx, cmd)
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
}

// ClusterNodes lists the registered nodes (nil on a single node).
func (b *Broker) ClusterNodes() []ClusterNode {
	var out []ClusterNode
	for _, n := range b.cl.meta.Nodes() {
		out = append(out, ClusterNode{ID: n.ID, GRPCAddr: n.GRPCAddr, HTTPAddr: n.HTTPAddr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// leaderAddr is the gRPC address of a node, when known.
func (b *Broker) leaderAddr(node uint64) string {
	if node == 0 {
		return ""
	}
	for _, n := range b.cl.meta.Nodes() {
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
func (b *Broker) DescribeCluster() ClusterStatus {
	st := ClusterStatus{NodeID: b.cl.cfg.NodeID, MetadataLeader: b.cl.meta.Leader(), Nodes: b.ClusterNodes()}
	for _, ti := range b.Topics() {
		t, err := b.topic(ti.Name)
		if err != nil {
			continue
		}
		ct, _ := b.cl.meta.Topic(t.name)
		for _, p := range t.partitions() {
			cp := ClusterPartition{Topic: t.name, Partition: p.id, Replicas: slices.Clone(p.replicas)}
			if ct != nil && int(p.id) < len(ct.Replicas) {
				cp.Replicas, cp.Target = ct.Replicas[p.id], ct.Target(int(p.id))
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

// leaderBalanceInterval is how often a node hands partitions it leads to
// their preferred leaders.
const leaderBalanceInterval = 3 * time.Second

// balanceLeaders spreads partition leadership: placement makes each
// partition's first replica its preferred leader, rotating over the nodes;
// after failovers, leadership gathers on the survivors, so a leader that
// is not preferred hands over to the preferred replica once it has caught
// up.
func (b *Broker) balanceLeaders() {
	for _, p := range b.activePartitions() {
		if p.rep == nil {
			continue
		}
		ct, ok := b.cl.meta.Topic(p.t.name)
		if !ok || int(p.id) >= len(ct.Replicas) || ct.Target(int(p.id)) != nil {
			continue // a moving partition's leadership is the move's business
		}
		if preferred := ct.Replicas[p.id][0]; preferred != b.cl.cfg.NodeID && p.rep.Leader() == b.cl.cfg.NodeID {
			p.rep.TransferLeadership(preferred)
		}
	}
}
