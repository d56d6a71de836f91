package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/replication"
)

// NodeConfig says which cluster a node belongs to. A node with no Peers
// (the default) is a cluster of one: it bootstraps the metadata group
// alone, and grows into a cluster by adding nodes to it (started with
// Join). Every partition is a Raft group on its replicas (Place).
type NodeConfig struct {
	// NodeID is this node's id (default 1). A data directory belongs to
	// the id it was first opened with.
	NodeID uint64
	// RaftAddr is where this node listens for other nodes (Raft and the
	// node-to-node services; default 127.0.0.1:0: a free port, for a
	// cluster of one).
	RaftAddr string
	// Peers maps every node id of the metadata group (this one included)
	// to its RaftAddr, to bootstrap a cluster of several; empty: a
	// cluster of one.
	Peers map[uint64]string
	// GRPCAddr and HTTPAddr are the addresses clients reach this node at
	// (registered for the other nodes, which send clients here).
	GRPCAddr, HTTPAddr string
	// KafkaAddr is where Kafka clients reach this node ("" without a
	// Kafka listener); WireAddr where hermes-wire clients do ("" without
	// a hermes-wire listener).
	KafkaAddr, WireAddr string
	// ReplicationFactor is the default number of replicas of a partition
	// (0: min(3, the metadata group's voters) when the topic is created).
	ReplicationFactor int32
	// TickInterval is the Raft tick (default 100ms: elections after about
	// a second).
	TickInterval time.Duration
	// Join: this node is new to a running cluster. It does not bootstrap
	// the metadata group with Peers (which then only tell it where the
	// other nodes are); it waits until a member adds it (Node.AddNode),
	// then catches up and registers.
	Join bool
	// MetaSnapshotEntries: the metadata log is compacted every so many
	// entries (default 1000).
	MetaSnapshotEntries int
	// TLS secures the node-to-node listener and dials with mutual TLS
	// (nil: plaintext, for clusters on one machine's loopback).
	TLS *replication.NodeTLS
}

// MaxReplicationFactor bounds the replicas of a partition.
const MaxReplicationFactor = 7

// Validate checks c and fills its defaults.
func (c *NodeConfig) Validate() error {
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
	if c.ReplicationFactor < 0 || c.ReplicationFactor > MaxReplicationFactor {
		return fmt.Errorf("cluster: replication factor must be 1 to %d, got %d", MaxReplicationFactor, c.ReplicationFactor)
	}
	return nil
}

// Alone reports whether this node bootstraps a cluster of one.
func (c *NodeConfig) Alone() bool { return len(c.Peers) == 1 && !c.Join }

// Alone reports whether this node is a cluster of one: started without
// peers, and no node joined it since. Its metadata group then has no
// other voter, and it leads it from the start.
func (n *Node) Alone() bool { return n.alone }

// Node is this node's part of the cluster: the node-to-node listener (Raft
// and the other services served there), the transport and host of its
// Raft groups, the metadata group, and the cluster's orchestration: this
// node's registration, the replica moves of the partitions it leads,
// leader balancing, and membership changes.
type Node struct {
	cfg  NodeConfig
	log  *slog.Logger
	host *replication.Host
	tr   *replication.NodeTransport
	srv  *grpc.Server
	// meta is the metadata group, replaced by ReopenMeta after its
	// storage failed; metaCfg opens it.
	meta    atomic.Pointer[MetaGroup]
	metaCfg MetaConfig
	// metaClosed: ReopenMeta closed the failed group (it is not closed
	// twice when opening the new one fails).
	metaClosed bool

	// alone: this node is the only voter of its metadata group (see Alone).
	alone bool
	// handingOver is set by HandOver: the node is about to stop, so it
	// no longer takes leadership back through leader balancing.
	handingOver atomic.Bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// StartConfig is what StartNode needs besides the node's configuration.
type StartConfig struct {
	// Dir holds the metadata log; Meta is the node's store (Raft state).
	Dir    string
	Meta   *meta.Store
	Logger *slog.Logger
	// Services registers the node-to-node services served beside Raft.
	Services func(*grpc.Server)
	// OnChange acts on what each applied metadata command changed (see
	// MetaConfig.OnChange), after the node itself learned a registered
	// node's address.
	OnChange func(Change)
	// OnMetaFail is called once, on the metadata group's goroutine, when
	// this node's replica of it stopped after a storage failure.
	OnMetaFail func(error)
}

// aloneStartTimeout bounds the start of a cluster of one: electing itself
// and registering take a few fsyncs.
const aloneStartTimeout = 30 * time.Second

// StartNode listens for other nodes, opens the metadata group (its replay
// calls OnChange for the commands committed so far) and starts the
// node's background work. A cluster of one is registered (its addresses
// in the metadata) before StartNode returns; on a cluster of several,
// registration waits for a quorum in the background.
func StartNode(cfg NodeConfig, sc StartConfig) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen on %s: %w", cfg.RaftAddr, err)
	}
	if cfg.Alone() { // a free port chosen by the kernel is the address
		cfg.RaftAddr = lis.Addr().String()
		cfg.Peers = map[uint64]string{cfg.NodeID: cfg.RaftAddr}
	}
	n := &Node{cfg: cfg, log: sc.Logger, host: replication.NewHost(), stop: make(chan struct{})}
	n.tr = replication.NewNodeTransport(cfg.NodeID, cfg.TLS, n.host.Deliver, sc.Logger.With("component", "raft"))
	n.tr.SetReplicas(n.host.Replica)
	var voters []uint64
	for id, addr := range cfg.Peers {
		voters = append(voters, id)
		if id != cfg.NodeID {
			n.tr.SetPeer(id, addr)
		}
	}
	slices.Sort(voters)
	n.srv = grpc.NewServer(n.tr.ServerOptions()...)
	n.tr.Register(n.srv)
	if sc.Services != nil {
		sc.Services(n.srv)
	}
	go n.srv.Serve(n.tr.Listen(lis))
	if cfg.Join {
		voters = nil
	}
	n.metaCfg = MetaConfig{
		NodeID: cfg.NodeID, Peers: voters, Dir: filepath.Join(sc.Dir, "meta"), OnMember: n.onMember,
		Meta: sc.Meta, Transport: n.tr, Host: n.host, Forward: n.tr,
		Logger: sc.Logger.With("group", MetaGroupName), TickInterval: cfg.TickInterval, SnapshotEntries: cfg.MetaSnapshotEntries,
		OnFail: sc.OnMetaFail,
		OnChange: func(ch Change) {
			if ch.Node != nil {
				n.learnNode(*ch.Node)
			}
			if sc.OnChange != nil {
				sc.OnChange(ch)
			}
		},
	}
	g, err := OpenMetaGroup(n.metaCfg)
	if err != nil {
		n.srv.Stop()
		n.tr.Close()
		return nil, err
	}
	n.meta.Store(g)
	for _, nd := range g.Nodes() { // the addresses the replay did not tell OnChange
		n.learnNode(nd)
	}
	cfg.TLS.SetMembers(n.isMember)
	// Started without peers, a node is a cluster of one only while its
	// metadata group has no other voter: a single node that nodes joined
	// (hermes cluster join) is restarted with the flags it always had, and
	// then waits for its cluster like any member.
	n.alone = cfg.Alone() && slices.Equal(g.Voters(), []uint64{cfg.NodeID})
	if cfg.Alone() && !n.alone {
		n.log.Info("started without --peers, but nodes joined this one: a member of their cluster", "voters", g.Voters())
	}
	if n.alone {
		ctx, cancel := context.WithTimeout(context.Background(), aloneStartTimeout)
		err := n.register(ctx)
		cancel()
		if err != nil {
			n.Stop()
			n.Close()
			return nil, fmt.Errorf("cluster: register this node: %w", err)
		}
	} else {
		n.wg.Add(1)
		go n.registerSelf()
	}
	n.wg.Add(2)
	go n.every(leaderBalanceInterval, n.balanceLeaders)
	go n.every(moveInterval, n.driveMoves)
	n.log.Info("cluster node started", "node", cfg.NodeID, "raft", cfg.RaftAddr, "peers", len(cfg.Peers))
	return n, nil
}

// Config is the node's configuration (validated; RaftAddr is the address
// listened at).
func (n *Node) Config() NodeConfig { return n.cfg }

// Meta is the metadata group.
func (n *Node) Meta() *MetaGroup { return n.meta.Load() }

// ReopenMeta replaces the metadata group, whose replica stopped after a
// storage failure, by the same group opened again from disk: its log is
// recovered and replayed (OnChange sees the replay, as at start), and it
// catches up with the group's leader. REQUIRES: the failed group's
// OnFail was called; not called concurrently.
func (n *Node) ReopenMeta() error {
	if !n.metaClosed {
		n.Meta().Close()
		n.metaClosed = true
	}
	g, err := OpenMetaGroup(n.metaCfg)
	if err != nil {
		return err
	}
	n.metaClosed = false
	n.meta.Store(g)
	for _, nd := range g.Nodes() {
		n.learnNode(nd)
	}
	return nil
}

// Transport carries the Raft messages of this node's groups.
func (n *Node) Transport() *replication.NodeTransport { return n.tr }

// Host routes inbound Raft messages to this node's groups.
func (n *Node) Host() *replication.Host { return n.host }

// Stop ends the background work and the metadata group (no more changes
// are applied). Close then stops the listener and the transport, once the
// partitions' groups are stopped.
func (n *Node) Stop() {
	select {
	case <-n.stop:
		return
	default:
	}
	close(n.stop)
	n.wg.Wait()
	n.Meta().Close()
}

// handOverPoll is how often HandOver looks at the groups it still leads.
const handOverPoll = 20 * time.Millisecond

// HandOver is the first step of a graceful stop: it hands the leadership
// of every group this node leads (the metadata group and partitions) to a
// voter that is fully caught up, and returns once this node leads no
// group that has another voter, or when ctx ends. Clients then find the
// new leaders while this node still answers, instead of waiting for an
// election timeout after it is gone. A single node has nobody to hand
// over to and returns at once.
func (n *Node) HandOver(ctx context.Context) {
	n.handingOver.Store(true)
	for _, r := range n.host.Replicas() {
		r.Retire() // another leader's balancer may not hand a group back here
	}
	for {
		led := 0
		for _, r := range n.host.Replicas() {
			voters := r.Voters()
			if r.Leader() != n.cfg.NodeID || len(voters) < 2 {
				continue
			}
			led++
			lag, ok := r.Progress()
			if !ok {
				continue
			}
			for _, v := range voters {
				if l, known := lag[v]; v != n.cfg.NodeID && known && l == 0 && r.TransferLeadership(v) {
					break
				}
			}
		}
		if led == 0 {
			return
		}
		select {
		case <-ctx.Done():
			n.log.Warn("stopping while still leading groups: no voter was caught up in time", "groups", led)
			return
		case <-time.After(handOverPoll):
		}
	}
}

// Close stops the node-to-node listener and the transport.
//
// REQUIRES: Stop was called.
func (n *Node) Close() {
	n.srv.Stop()
	n.tr.Close()
}

// registerCmd announces this node's addresses.
func (n *Node) registerCmd() *pb.Command {
	c := n.cfg
	return &pb.Command{Kind: &pb.Command_RegisterNode{RegisterNode: &pb.RegisterNode{
		Id: c.NodeID, RaftAddr: c.RaftAddr, GrpcAddr: c.GRPCAddr, HttpAddr: c.HTTPAddr, KafkaAddr: c.KafkaAddr, WireAddr: c.WireAddr}}}
}

func (n *Node) register(ctx context.Context) error {
	_, err := n.Meta().Run(ctx, n.registerCmd())
	return err
}

// registerRetry is the pause between attempts to register.
const registerRetry = 200 * time.Millisecond

// registerSelf announces this node's addresses through the metadata group,
// retrying until it succeeds or the node stops.
func (n *Node) registerSelf() {
	defer n.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.register(ctx)
		cancel()
		if err == nil {
			n.log.Info("cluster node registered", "node", n.cfg.NodeID)
			return
		}
		select {
		case <-n.stop:
			return
		case <-time.After(registerRetry):
		}
	}
}

// learnNode makes the transport reach a node that joined at runtime at
// the address it registered; the static peers' addresses (which may
// differ: a proxy, a NAT) stay as configured.
func (n *Node) learnNode(nd NodeInfo) {
	if _, static := n.cfg.Peers[nd.ID]; !static && nd.ID != n.cfg.NodeID && nd.RaftAddr != "" {
		n.tr.SetPeer(nd.ID, nd.RaftAddr)
	}
}

// onMember learns where a node added to the metadata group listens, so
// this node's transport reaches it (before it has registered itself).
func (n *Node) onMember(node uint64, added bool, raftAddr string) {
	switch {
	case added && node != n.cfg.NodeID:
		if _, static := n.cfg.Peers[node]; !static {
			n.tr.SetPeer(node, raftAddr)
		}
		n.log.Info("cluster node added", "node", node, "raft", raftAddr)
	case !added && node == n.cfg.NodeID:
		n.log.Warn("this node was removed from the cluster; stop it")
	case !added:
		n.log.Info("cluster node removed", "node", node)
	}
}

// isMember reports whether node may use this node's node-to-node
// services: it is a voter of the metadata group, or this node does not
// know the group's members yet (it is joining: the leader that added it
// is the first to call).
func (n *Node) isMember(node uint64) bool {
	voters := n.Meta().Voters()
	return len(voters) == 0 || slices.Contains(voters, node)
}

// every runs fn every d until the node stops.
func (n *Node) every(d time.Duration, fn func()) {
	defer n.wg.Done()
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
			fn()
		}
	}
}

// DirName names the files and Raft groups of topic name with id: the name
// alone for a topic of id 0 (created before topics had ids), else
// name@id. '@' is not allowed in topic names, so no two topics share one.
func DirName(name string, id uint64) string {
	if id == 0 {
		return name
	}
	return name + "@" + strconv.FormatUint(id, 10)
}

// GroupName is the Raft group of partition p of topic name with id.
func GroupName(name string, id uint64, p int32) string {
	return DirName(name, id) + "/" + strconv.Itoa(int(p))
}

// localLeader returns this node's replica of partition p of t when it
// leads the partition's group.
func (n *Node) localLeader(t *Topic, p int) *replication.Replica {
	r := n.host.Replica(GroupName(t.Name, t.ID, int32(p)))
	if r == nil || r.Leader() != n.cfg.NodeID {
		return nil
	}
	return r
}

// leaderBalanceInterval is how often a node hands partitions it leads to
// their preferred leaders.
const leaderBalanceInterval = 3 * time.Second

// balanceLeaders spreads partition leadership: placement makes each
// partition's first replica its preferred leader, rotating over the nodes;
// after failovers, leadership gathers on the survivors, so a leader that
// is not preferred hands over to the preferred replica once it has caught
// up.
func (n *Node) balanceLeaders() {
	if n.handingOver.Load() {
		return
	}
	for _, t := range n.Meta().Topics() {
		for p, replicas := range t.Replicas {
			if t.Target(p) != nil || len(replicas) == 0 || replicas[0] == n.cfg.NodeID {
				continue // a moving partition's leadership is the move's business
			}
			if r := n.localLeader(t, p); r != nil {
				r.TransferLeadership(replicas[0])
			}
		}
	}
}
