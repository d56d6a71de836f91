package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
)

// errorKinds name the command failures that travel with a forwarded
// command, so the forwarding node can test them with errors.Is.
var errorKinds = map[string]error{
	"topic_exists":    ErrTopicExists,
	"topic_not_found": ErrTopicNotFound,
	"no_nodes":        ErrNoNodes,
	"bad_command":     ErrBadCommand,
	"node_in_use":     ErrNodeInUse,
	"fenced":          ErrFenced,
}

func errorKind(err error) string {
	for k, e := range errorKinds {
		if errors.Is(err, e) {
			return k
		}
	}
	return ""
}

// AddMember makes node (listening for other nodes at raftAddr) a voter of
// the metadata group, from any node. The new node, started with no peers
// to bootstrap (--join), then gets the group's snapshot and log, and
// registers itself once it has caught up.
func (g *MetaGroup) AddMember(ctx context.Context, node uint64, raftAddr string) error {
	if node == 0 || raftAddr == "" {
		return fmt.Errorf("%w: add node %d at %q", ErrBadCommand, node, raftAddr)
	}
	_, err := g.Run(ctx, &pb.Command{Kind: &pb.Command_AddMember{AddMember: &pb.AddMember{Id: node, RaftAddr: raftAddr}}})
	return err
}

// RemoveMember takes node out of the cluster, from any node: it is
// deregistered (ErrNodeInUse while it still holds partition replicas) and
// removed from the metadata group's voters.
func (g *MetaGroup) RemoveMember(ctx context.Context, node uint64) error {
	if _, err := g.Run(ctx, &pb.Command{Kind: &pb.Command_DeregisterNode{DeregisterNode: &pb.DeregisterNode{Id: node}}}); err != nil && !errors.Is(err, ErrBadCommand) {
		return err
	}
	_, err := g.Run(ctx, &pb.Command{Kind: &pb.Command_RemoveMember{RemoveMember: &pb.RemoveMember{Id: node}}})
	return err
}

// maxForwardAttempts bounds how often Run looks for the leader.
const maxForwardAttempts = 50

// Run runs a command wherever the metadata leader is: here, or forwarded
// to it. A forwarded command also waits until this node has applied it
// (waitApplied), so a caller reads its own write here.
func (g *MetaGroup) Run(ctx context.Context, cmd *pb.Command) (Change, error) {
	for attempt := 0; attempt < maxForwardAttempts; attempt++ {
		ch, err := g.runHere(ctx, cmd)
		if !errors.Is(err, ErrNotLeader) {
			return ch, err
		}
		leader := g.Leader()
		if leader != 0 && leader != g.cfg.NodeID && g.cfg.Forward != nil {
			ch, applied, done, err := g.forward(ctx, leader, cmd)
			if done {
				if err == nil {
					g.waitApplied(ctx, cmd, applied)
				}
				return ch, err
			}
		}
		select {
		case <-ctx.Done():
			return Change{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return Change{}, fmt.Errorf("%w: no leader found after %d attempts", ErrNotLeader, maxForwardAttempts)
}

// runHere runs cmd on this node: a membership change of the metadata
// group, or a command through its log. ErrNotLeader when this node does
// not lead.
func (g *MetaGroup) runHere(ctx context.Context, cmd *pb.Command) (Change, error) {
	switch k := cmd.Kind.(type) {
	case *pb.Command_AddMember:
		return Change{}, g.changeMember(ctx, k.AddMember.GetId(), true, k.AddMember.GetRaftAddr())
	case *pb.Command_RemoveMember:
		return Change{}, g.changeMember(ctx, k.RemoveMember.GetId(), false, "")
	}
	return g.Propose(ctx, cmd)
}

// forward sends cmd to node; done is false when it should be tried again.
// applied is how far the leader had applied its metadata after cmd.
func (g *MetaGroup) forward(ctx context.Context, node uint64, cmd *pb.Command) (ch Change, applied uint64, done bool, err error) {
	enc, err := proto.Marshal(cmd)
	if err != nil {
		return Change{}, 0, true, err
	}
	resp, err := g.cfg.Forward.ForwardTo(ctx, node, &tpb.ForwardRequest{Group: MetaGroupName, Command: enc})
	if err != nil || resp.NotLeader {
		return Change{}, 0, false, nil
	}
	if resp.Error != "" {
		if kind, ok := errorKinds[resp.ErrorKind]; ok {
			return Change{}, 0, true, fmt.Errorf("%w (on node %d: %s)", kind, node, resp.Error)
		}
		return Change{}, 0, true, fmt.Errorf("cluster: node %d: %s", node, resp.Error)
	}
	if len(resp.Result) > 0 {
		var ts pb.TopicState
		if err := proto.Unmarshal(resp.Result, &ts); err != nil {
			return Change{}, 0, true, err
		}
		ch.Created = topicFromState(&ts)
	}
	return ch, resp.Applied, true, nil
}

// handleForward runs a command another node forwarded here.
func (g *MetaGroup) handleForward(ctx context.Context, req *tpb.ForwardRequest) *tpb.ForwardResponse {
	var cmd pb.Command
	if err := proto.Unmarshal(req.Command, &cmd); err != nil {
		return &tpb.ForwardResponse{Error: err.Error(), ErrorKind: "bad_command"}
	}
	ch, err := g.runHere(ctx, &cmd)
	if errors.Is(err, ErrNotLeader) {
		return &tpb.ForwardResponse{NotLeader: true, Leader: g.Leader()}
	}
	if err != nil {
		return &tpb.ForwardResponse{Error: err.Error(), ErrorKind: errorKind(err)}
	}
	resp := &tpb.ForwardResponse{}
	switch cmd.Kind.(type) {
	case *pb.Command_AddMember, *pb.Command_RemoveMember: // configuration changes, not log commands
	default:
		g.mu.Lock()
		resp.Applied = g.md.Applied
		g.mu.Unlock()
	}
	if ch.Created != nil {
		resp.Result, _ = proto.Marshal(topicState(ch.Created))
	}
	return resp
}

// waitApplied waits until this node has applied a command it forwarded:
// its metadata is as far as the leader's was after the command (applied),
// and for a topic creation or deletion the node has also acted on it
// (OnChange ran), so a caller reads its own write here (`cluster
// rebalance --wait` polls the node it asked). The command succeeded
// whatever happens here: when ctx ends first (this node is cut off, or
// was itself removed), that is logged, not returned.
func (g *MetaGroup) waitApplied(ctx context.Context, cmd *pb.Command, applied uint64) {
	for {
		g.mu.Lock()
		caught := g.md.Applied >= applied && g.settled == g.md.Applied
		g.mu.Unlock()
		if caught {
			return
		}
		select {
		case <-ctx.Done():
			g.cfg.Logger.Warn("a forwarded metadata command succeeded but is not applied here yet", "command", fmt.Sprintf("%T", cmd.Kind), "leader_applied", applied, "err", ctx.Err())
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func topicState(t *Topic) *pb.TopicState {
	ts := &pb.TopicState{Name: t.Name, Id: t.ID, Config: t.Config}
	for p, r := range t.Replicas {
		ts.Partitions = append(ts.Partitions, &pb.PartitionState{Replicas: r, Target: t.Target(p), DeletedBefore: t.Floor(p)})
	}
	return ts
}

func topicFromState(ts *pb.TopicState) *Topic {
	t := &Topic{Name: ts.GetName(), ID: ts.GetId(), Config: ts.GetConfig()}
	for i, p := range ts.GetPartitions() {
		t.Replicas = append(t.Replicas, p.GetReplicas())
		if f := p.GetDeletedBefore(); f > 0 {
			t.setFloor(i, f)
		}
	}
	return t
}
