package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc"

	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/pkg/record"
)

// ClusterConfig makes the broker a node of a cluster. The metadata group's
// voters are the static Peers; every partition is a Raft group on its
// replicas (placement by cluster.Place).
type ClusterConfig struct {
	NodeID uint64
	// RaftAddr is where this node listens for other nodes.
	RaftAddr string
	// Peers maps every node id of the metadata group (this one included)
	// to its RaftAddr.
	Peers map[uint64]string
	// GRPCAddr and HTTPAddr are the addresses clients reach this node at
	// (advertised to the other nodes for redirects).
	GRPCAddr, HTTPAddr string
	// ReplicationFactor is the default number of replicas of a partition
	// (default min(3, len(Peers))).
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
		return errors.New("cluster: the node id must be a positive integer")
	}
	if c.Peers[c.NodeID] == "" {
		return fmt.Errorf("cluster: node %d is not among the peers %v", c.NodeID, c.Peers)
	}
	if c.RaftAddr == "" {
		c.RaftAddr = c.Peers[c.NodeID]
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = int32(min(3, len(c.Peers)))
	}
	return nil
}

// startCluster joins the cluster: the node-to-node listener, the metadata
// group (whose replay opens the partitions this node holds), and the
// registration of this node's addresses.
func (b *Broker) startCluster() error {
	c := *b.cfg.Cluster
	if err := c.validate(); err != nil {
		return err
	}
	cn := &clusterNode{cfg: c, host: replication.NewHost()}
	cn.tr = replication.NewGRPCTransport(c.NodeID, cn.host.Deliver, b.log.With("component", "raft"))
	var voters []uint64
	for id, addr := range c.Peers {
		voters = append(voters, id)
		if id != c.NodeID {
			cn.tr.SetPeer(id, addr)
		}
	}
	slices.Sort(voters)
	lis, err := net.Listen("tcp", c.RaftAddr)
	if err != nil {
		cn.tr.Close()
		return fmt.Errorf("cluster: listen on %s: %w", c.RaftAddr, err)
	}
	cn.srv = grpc.NewServer(append(replication.TransportServerOptions(), grpc.MaxRecvMsgSize(64<<20))...)
	cn.tr.Register(cn.srv)
	go cn.srv.Serve(lis)
	b.cl = cn
	if c.Join {
		voters = nil
	}
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
	b.wg.Add(3)
	go b.registerSelf()
	go b.every(leaderBalanceInterval, b.balanceLeaders)
	go b.every(moveInterval, b.driveMoves)
	b.log.Info("cluster node started", "node", c.NodeID, "raft", c.RaftAddr, "peers", len(c.Peers))
	return nil
}

// registerSelf announces this node's addresses through the metadata group,
// retrying until it succeeds or the broker stops.
func (b *Broker) registerSelf() {
	defer b.wg.Done()
	c := b.cl.cfg
	cmd := &cpb.Command{Kind: &cpb.Command_RegisterNode{RegisterNode: &cpb.RegisterNode{
		Id: c.NodeID, RaftAddr: c.RaftAddr, GrpcAddr: c.GRPCAddr, HttpAddr: c.HTTPAddr}}}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := b.cl.meta.Run(ctx, cmd)
		cancel()
		if err == nil {
			b.log.Info("cluster node registered", "node", c.NodeID)
			return
		}
		select {
		case <-b.stop:
			return
		case <-time.After(200 * time.Millisecond):
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
func (b *Broker) onMetaChange(ch cluster.Change) {
	switch {
	case ch.Created != nil:
		if err := b.openClusterTopic(ch.Created); err != nil {
			b.log.Error("cannot open the partitions of a new topic", "topic", ch.Created.Name, "err", err)
		}
	case ch.Deleted != nil:
		b.removeClusterTopic(ch.Deleted.Name)
	case ch.Node != nil:
		// A node that joined at runtime is reached at the address it
		// registered; the static --peers addresses (which may differ: a
		// proxy, a NAT) stay as configured.
		if _, static := b.cl.cfg.Peers[ch.Node.ID]; !static && ch.Node.ID != b.cl.cfg.NodeID && ch.Node.RaftAddr != "" {
			b.cl.tr.SetPeer(ch.Node.ID, ch.Node.RaftAddr)
		}
		b.log.Info("cluster node known", "node", ch.Node.ID, "grpc", ch.Node.GRPCAddr)
	case ch.Removed != nil:
		b.log.Info("cluster node deregistered", "node", ch.Removed.ID)
	case ch.Moved != nil:
		b.moveReplicas(ch.Moved)
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
		}
	}
	t.setPartitions(parts)
	t.broadcast()
	for _, p := range gone {
		group := fmt.Sprintf("%s/%d", t.name, p.id)
		b.cl.host.Remove(group)
		p.close()
		if err := p.log.Delete(); err != nil {
			b.log.Warn("cannot delete a partition moved away", "topic", t.name, "partition", p.id, "err", err)
		}
		if err := b.meta.DeleteRaftState(group); err != nil {
			b.log.Warn("cannot delete the raft state of a partition moved away", "group", group, "err", err)
		}
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
	if b.cl == nil {
		return nil, errorf(ErrInvalidArgument, "this broker is a single node, not a cluster")
	}
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
	if b.cl == nil {
		return errorf(ErrInvalidArgument, "this broker is a single node, not a cluster")
	}
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
	if b.cl == nil {
		return errorf(ErrInvalidArgument, "this broker is a single node, not a cluster")
	}
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

func (b *Broker) openClusterTopic(ct *cluster.Topic) error {
	cfg := topicConfigFromCluster(ct.Config)
	t := newTopic(ct.Name, cfg)
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
	self := b.cl.cfg.NodeID
	if !slices.Contains(replicas, self) && !slices.Contains(target, self) {
		return remotePartition(b, t, id, replicas), nil
	}
	peers := replicas
	if !slices.Contains(replicas, self) {
		peers = nil
	}
	p, err := openPartition(b, t, id, b.partitionDir(t.name, id))
	if err != nil {
		return nil, err
	}
	group := fmt.Sprintf("%s/%d", t.name, id)
	store, err := replication.OpenLogStore(group, p.log, b.meta)
	if err != nil {
		p.close()
		return nil, err
	}
	hs, _, _ := store.InitialState()
	p.mu.Lock()
	p.hw = store.OffsetAfter(hs.GetCommit()) // only what is known committed
	p.mu.Unlock()
	p.dedup.TruncateFrom(p.log.NextOffset()) // the store may have cut a torn tail
	store.SetDedup(p.dedup)
	p.replicas = replicas
	p.rep, err = replication.NewReplica(replication.Config{
		Group: group, NodeID: b.cl.cfg.NodeID, Peers: peers, TickInterval: b.cl.cfg.TickInterval,
		Logger: b.log.With("group", group), OnCommit: p.committed, OnSnapshot: p.installed,
	}, store, b.cl.tr)
	if err != nil {
		p.close()
		return nil, err
	}
	b.cl.host.Add(group, p.rep)
	if fresh := hs.GetCommit() == 0 && hs.GetTerm() == 0; fresh && len(peers) > 0 && peers[0] == self {
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

// installed is a replicated partition's snapshot callback: this replica
// was behind its leader's retention, and its log now starts at offset.
func (p *partition) installed(_ []byte, offset int64) {
	p.mu.Lock()
	p.start = offset
	if p.hw < offset {
		p.hw = offset
	}
	p.tail.reset()
	p.mu.Unlock()
	p.t.broadcast()
	p.b.log.Info("partition replica restarted from its leader's retention point", "topic", p.t.name, "partition", p.id, "offset", offset)
}

// committed is a replicated partition's commit callback: committed batches
// feed the tail cache and the high watermark moves, as after a local fsync.
func (p *partition) committed(batches [][]byte, hw int64) {
	p.mu.Lock()
	for _, bt := range batches {
		h, err := record.ParseHeader(bt)
		if err != nil {
			continue
		}
		if len(p.tail.entries) > 0 && p.tail.entries[len(p.tail.entries)-1].next != h.BaseOffset {
			p.tail.reset() // a restart left a gap: the cache starts over
		}
		p.tail.add(h.BaseOffset, h.NextOffset(), bt)
	}
	if hw > p.hw {
		p.hw = hw
	}
	p.mu.Unlock()
	p.t.broadcast()
}

func (b *Broker) removeClusterTopic(name string) {
	b.mu.Lock()
	t, ok := b.topics[name]
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
	rf := cfg.ReplicationFactor
	if rf == 0 {
		rf = b.cl.cfg.ReplicationFactor
	}
	cmd := &cpb.Command{Kind: &cpb.Command_CreateTopic{CreateTopic: &cpb.CreateTopic{Name: name, Config: &cpb.TopicConfig{
		Partitions: cfg.Partitions, RetentionMs: cfg.RetentionAge.Milliseconds(), RetentionBytes: cfg.RetentionBytes,
		MaxMessageBytes: cfg.MaxMessageBytes, DefaultMode: int32(cfg.DefaultMode), SegmentBytes: cfg.SegmentBytes,
		ReplicationFactor: rf,
	}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := b.cl.meta.Run(ctx, cmd)
	switch {
	case errors.Is(err, cluster.ErrTopicExists):
		if !ifNotExists {
			return TopicInfo{}, errorf(ErrTopicExists, "topic %q already exists", name)
		}
	case errors.Is(err, cluster.ErrNoNodes):
		return TopicInfo{}, &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: time.Second}
	case err != nil:
		return TopicInfo{}, &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("create topic %q: %v", name, err), retryAfter: 100 * time.Millisecond}
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
		return &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("delete topic %q: %v", name, err), retryAfter: 100 * time.Millisecond}
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
	if b.cl == nil {
		return nil
	}
	var out []ClusterNode
	for _, n := range b.cl.meta.Nodes() {
		out = append(out, ClusterNode{ID: n.ID, GRPCAddr: n.GRPCAddr, HTTPAddr: n.HTTPAddr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// leaderAddr is the gRPC address of a node, when known.
func (b *Broker) leaderAddr(node uint64) string {
	if b.cl == nil || node == 0 {
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
	if b.cl == nil {
		return ClusterStatus{}
	}
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
