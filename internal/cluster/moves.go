package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/internal/replication"
)

// moveInterval is how often a partition leader takes the next step of a
// replica move.
const moveInterval = 300 * time.Millisecond

// moveStepTimeout bounds one step of a move.
const moveStepTimeout = 5 * time.Second

// driveMoves carries out replica moves on the partitions this node leads,
// one step at a time: add each target voter, wait until every target
// replica has caught up, remove the voters not in the target (handing
// leadership over first when this node leaves), then complete the move
// in the metadata group. Every step is retried until it holds, so a move
// survives a leader change: the next leader goes on from the voters it
// finds.
func (n *Node) driveMoves() {
	for _, t := range n.Meta().Topics() {
		for p, target := range t.Targets {
			if target == nil {
				continue
			}
			if r := n.localLeader(t, p); r != nil {
				n.moveStep(t.Name, int32(p), r, target)
			}
		}
	}
}

func (n *Node) moveStep(topic string, id int32, rep *replication.Replica, target []uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), moveStepTimeout)
	defer cancel()
	voters := rep.Voters()
	for _, nd := range target {
		if !slices.Contains(voters, nd) {
			if err := rep.ChangeVoter(ctx, nd, true, nil); err != nil {
				n.log.Debug("replica move: add voter", "topic", topic, "partition", id, "node", nd, "err", err)
			} else {
				n.log.Info("replica move: voter added", "topic", topic, "partition", id, "node", nd)
			}
			return
		}
	}
	lag, ok := rep.Progress()
	if !ok {
		return
	}
	for _, nd := range target {
		if lag[nd] != 0 {
			return // a new replica is catching up
		}
	}
	for _, nd := range voters {
		if slices.Contains(target, nd) {
			continue
		}
		if nd == n.cfg.NodeID {
			rep.TransferLeadership(target[0]) // the next leader goes on
			return
		}
		if err := rep.ChangeVoter(ctx, nd, false, nil); err != nil {
			n.log.Debug("replica move: remove voter", "topic", topic, "partition", id, "node", nd, "err", err)
		} else {
			n.log.Info("replica move: voter removed", "topic", topic, "partition", id, "node", nd)
		}
		return
	}
	_, err := n.Meta().Run(ctx, &pb.Command{Kind: &pb.Command_CompleteReassignment{CompleteReassignment: &pb.CompleteReassignment{
		Topic: topic, Partition: id, Replicas: voters}}})
	if err != nil {
		n.log.Debug("replica move: complete", "topic", topic, "partition", id, "err", err)
		return
	}
	n.log.Info("replica move complete", "topic", topic, "partition", id, "replicas", voters)
}

// Move is one partition's planned replica move.
type Move struct {
	Topic     string
	Partition int32
	From, To  []uint64
}

// Errors of the membership and move operations, besides the metadata
// group's own (ErrNotLeader, ErrNodeInUse, ErrBadCommand).
var (
	// ErrNotCaughtUp: this node could not catch up with the metadata
	// group (no leader, or it is cut off); retriable.
	ErrNotCaughtUp = errors.New("cluster: cannot catch up with the metadata group")
)

// reassignTimeout bounds Rebalance and CancelMoves; membershipTimeout
// AddNode and RemoveNode.
const (
	reassignTimeout   = 20 * time.Second
	membershipTimeout = 20 * time.Second
)

// Rebalance plans and starts replica moves that spread the partitions'
// replicas evenly over the nodes, moving every replica off the drained
// nodes (to remove them afterwards). The moves go on in the background
// (their targets are in the metadata); it returns the moves started.
// Errors: ErrNotCaughtUp, or the metadata group's.
func (n *Node) Rebalance(ctx context.Context, drain []uint64) ([]Move, error) {
	return n.reassign(ctx, func() []*pb.ReassignPartitions { return n.Meta().Balance(drain) })
}

// CancelMoves stops the replica moves in progress: each moving partition
// is sent back to its replicas, so its leader removes any replica added on
// the way (cancelling a move whose new node died, which could never
// finish). It returns the moves cancelled, From being where they went.
func (n *Node) CancelMoves(ctx context.Context) ([]Move, error) {
	return n.reassign(ctx, func() []*pb.ReassignPartitions {
		var plan []*pb.ReassignPartitions
		for _, t := range n.Meta().Topics() {
			c := &pb.ReassignPartitions{Replace: true}
			for i, target := range t.Targets {
				if target != nil && i < len(t.Replicas) {
					c.Moves = append(c.Moves, &pb.Reassignment{Topic: t.Name, Partition: int32(i), Target: t.Replicas[i]})
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
func (n *Node) reassign(ctx context.Context, plan func() []*pb.ReassignPartitions) ([]Move, error) {
	ctx, cancel := context.WithTimeout(ctx, reassignTimeout)
	defer cancel()
	if err := n.Meta().Sync(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCaughtUp, err)
	}
	var out []Move
	for _, c := range plan() {
		var moves []Move
		for _, mv := range c.GetMoves() {
			m := Move{Topic: mv.GetTopic(), Partition: mv.GetPartition(), To: mv.GetTarget()}
			if t, ok := n.Meta().Topic(m.Topic); ok && int(m.Partition) < len(t.Replicas) {
				m.From = t.Replicas[m.Partition]
				if tg := t.Target(int(m.Partition)); tg != nil {
					m.From = tg
				}
			}
			moves = append(moves, m)
		}
		if _, err := n.Meta().Run(ctx, &pb.Command{Kind: &pb.Command_ReassignPartitions{ReassignPartitions: c}}); err != nil {
			return out, err
		}
		out = append(out, moves...)
	}
	return out, nil
}

// AddNode adds a node (started with Join, listening for other nodes at
// raftAddr) to the cluster, from any node. Errors: ErrBadCommand for a
// bad id or address, or the metadata group's.
func (n *Node) AddNode(ctx context.Context, id uint64, raftAddr string) error {
	if id == 0 || raftAddr == "" {
		return fmt.Errorf("%w: a node id (positive) and its raft address are needed", ErrBadCommand)
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return fmt.Errorf("%w: raft address %q: %v", ErrBadCommand, raftAddr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, membershipTimeout)
	defer cancel()
	// A node the others cannot talk to would be a voter that never votes.
	pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
	err := n.tr.Probe(pctx, id, raftAddr)
	pcancel()
	if err != nil {
		return fmt.Errorf("%w: node %d does not answer at %s as a node of this cluster: %v", ErrBadCommand, id, raftAddr, err)
	}
	return n.Meta().AddMember(ctx, id, raftAddr)
}

// probeTimeout bounds the check that a node being added answers.
const probeTimeout = 5 * time.Second

// RemoveNode takes a node out of the cluster, from any node; ErrNodeInUse
// while it holds partition replicas.
func (n *Node) RemoveNode(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, membershipTimeout)
	defer cancel()
	return n.Meta().RemoveMember(ctx, id)
}
