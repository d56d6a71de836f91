package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
)

// A replica that lost entries it had acknowledged (its log was damaged
// or cut while the node was down: the storage broke Raft's assumption)
// hears heartbeats committing past its last entry. Its leader believes
// it holds them, and etcd raft never sends a follower entries below what
// it acknowledged, so it would stay behind for good. The replica tells
// the leader over the node-to-node service; the leader hands leadership
// to another caught-up voter, and the new leader, which tracks no
// acknowledgements yet, sends the replica what it lacks.

// lostPrefix marks a forwarded command that reports lost entries; the
// reporting node's id follows (8 bytes, little endian).
var lostPrefix = []byte("hermes/lost-entries\x00")

// lostReportEvery bounds the reports of one replica.
const lostReportEvery = 5 * time.Second

// forwarder is the part of NodeTransport a replica reports through.
type forwarder interface {
	ForwardTo(ctx context.Context, node uint64, req *tpb.ForwardRequest) (*tpb.ForwardResponse, error)
}

// reportLost tells leader that this replica lost entries up to commit
// (it has up to last), at most every lostReportEvery. Replica goroutine.
func (r *Replica) reportLost(leader, commit, last uint64) {
	fw, ok := r.tr.(forwarder)
	if !ok || time.Since(r.lostReported) < lostReportEvery {
		return
	}
	r.lostReported = time.Now()
	r.cfg.Logger.Warn("this replica lost entries it had acknowledged (its log was damaged or cut while the node was down): asking the leader for a new leader, which sends them again",
		"group", r.cfg.Group, "leader", leader, "leader_commit", commit, "last_stored", last)
	req := &tpb.ForwardRequest{Group: r.cfg.Group, Command: binary.LittleEndian.AppendUint64(bytes.Clone(lostPrefix), r.cfg.NodeID)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := fw.ForwardTo(ctx, leader, req); err != nil {
			r.cfg.Logger.Warn("reporting lost entries to the leader failed", "group", r.cfg.Group, "leader", leader, "err", err)
		}
	}()
}

// lostReport parses a lost-entries report: the reporting node.
func lostReport(cmd []byte) (uint64, bool) {
	if !bytes.HasPrefix(cmd, lostPrefix) || len(cmd) != len(lostPrefix)+8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(cmd[len(lostPrefix):]), true
}

// peerLost is the leader's side: node lost entries it acknowledged.
// Leadership goes to another voter that is caught up, so that the group
// starts over tracking what each follower holds.
func (r *Replica) peerLost(node uint64) error {
	var target uint64
	var why string
	f := func() {
		st := r.rn.Status()
		if st.RaftState != raft.StateLeader {
			why = "not the leader"
			return
		}
		last, err := r.store.LastIndex()
		if err != nil {
			why = err.Error()
			return
		}
		for id, pr := range st.Progress {
			if id != r.cfg.NodeID && id != node && !pr.IsLearner && pr.Match == last {
				target = id
				break
			}
		}
		if target == 0 {
			why = "no other voter is caught up"
			return
		}
		r.rn.TransferLeader(target)
	}
	if err := r.call(context.Background(), f); err != nil {
		return err
	}
	if target == 0 {
		r.cfg.Logger.Warn("a follower lost entries it had acknowledged; leadership cannot move", "group", r.cfg.Group, "follower", node, "why", why)
		return fmt.Errorf("%s", why)
	}
	r.cfg.Logger.Warn("a follower lost entries it had acknowledged: leadership moves, so that the new leader sends them again",
		"group", r.cfg.Group, "follower", node, "to", target)
	return nil
}
