package replication

import (
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/pkg/record"
)

// handleReadies processes every pending Ready: persist (one fsync for all
// its entries and state), answer AckPersisted proposals, send messages,
// apply what committed. An error is a storage failure: the group stops.
func (r *Replica) handleReadies() error {
	for r.rn.HasReady() {
		rd := r.rn.Ready()
		if rd.SoftState != nil {
			r.softState(rd.SoftState, rd.Entries)
		}
		// A leader whose term and vote stand sends its appends and
		// heartbeats before its own fsync (Raft thesis 10.2.1): the
		// followers write and fsync while it does, and it counts its own
		// copy only once persisted (raft learns that at Advance). Every
		// other message (a follower's answers, votes) waits for the fsync.
		early := r.leader.Load() == r.cfg.NodeID && len(rd.Messages) > 0 &&
			(raft.IsEmptyHardState(rd.HardState) || r.store.sameVote(rd.HardState))
		if !raft.IsEmptyHardState(rd.HardState) {
			r.store.SetHardState(rd.HardState)
			r.term.Store(rd.HardState.GetTerm())
			r.stats.commit.Store(rd.HardState.GetCommit())
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := r.installSnapshot(rd.Snapshot); err != nil {
				return err
			}
			r.stats.snapshotsApplied.Add(1)
		}
		r.overwritten(rd.Entries)
		var own uint64
		if r.leader.Load() == r.cfg.NodeID {
			own = r.cfg.NodeID // entries of this leader's term are its own
		}
		apps, err := r.store.AppendFrom(rd.Entries, own)
		if err != nil {
			return err
		}
		late := rd.Messages
		if early {
			// After AppendFrom, which rebased the entries' batches in
			// place: the followers get the bytes this log stores.
			var now []*pb.Message
			now, late = splitEarly(rd.Messages)
			if len(now) > 0 {
				r.tr.Send(r.cfg.Group, now)
			}
		}
		start := time.Now()
		if err := r.store.Sync(); err != nil {
			return err
		}
		if r.cfg.Synced != nil && len(rd.Entries) > 0 {
			records := 0
			for _, a := range apps {
				records += int(a.Next - a.First)
			}
			r.cfg.Synced(time.Since(start), records)
		}
		r.persisted(apps)
		if msgs := r.withholdCampaign(late); len(msgs) > 0 {
			addReceiver(msgs)
			r.tr.Send(r.cfg.Group, msgs)
		}
		if err := r.apply(rd.CommittedEntries); err != nil {
			return err
		}
		if err := r.maybeCompact(); err != nil {
			return err
		}
		for _, rs := range rd.ReadStates {
			if ch := r.reads[string(rs.RequestCtx)]; ch != nil {
				delete(r.reads, string(rs.RequestCtx))
				ch <- rs.Index
			}
		}
		r.rn.Advance(rd)
		// A snapshot message may be dropped on the way (the transport never
		// blocks): report it sent, so that the follower's answer, or its
		// refusal of the next append, makes raft send it again.
		for _, m := range rd.Messages {
			if m.GetType() == pb.MessageType_MsgSnap {
				r.stats.snapshotsSent.Add(1)
				r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
			}
		}
	}
	return nil
}

// splitEarly returns the appends and heartbeats of msgs, which a leader
// may send before its fsync, and the others, in order.
func splitEarly(msgs []*pb.Message) (early, late []*pb.Message) {
	for _, m := range msgs {
		switch m.GetType() {
		case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat:
			early = append(early, m)
		default:
			late = append(late, m)
		}
	}
	return early, late
}

// addReceiver makes each snapshot sent name its receiver, as a learner. A
// snapshot carries the configuration as of the compaction point (the
// receiver replays the changes after it), and a replica added since is
// not in it; etcd raft refuses to install a snapshot whose configuration
// lacks the receiver. Hermes' groups have no learners, so the receiver
// knows a learner in it for what it is and keeps it out of its own record
// of the compaction point's configuration (LogStore.ApplySnapshot); as a
// learner it neither votes nor campaigns until the replay reaches the
// change that made it a voter. (Named a voter, it was kept in that record
// and passed on with every snapshot it sent later: a chain of moves gave
// a new replica a configuration of long-removed nodes.)
func addReceiver(msgs []*pb.Message) {
	for i, m := range msgs {
		if m.GetType() != pb.MessageType_MsgSnap || m.GetSnapshot().GetMetadata() == nil {
			continue
		}
		cs := m.GetSnapshot().GetMetadata().GetConfState()
		to := m.GetTo()
		if slices.Contains(cs.GetVoters(), to) || slices.Contains(cs.GetLearners(), to) ||
			slices.Contains(cs.GetVotersOutgoing(), to) || slices.Contains(cs.GetLearnersNext(), to) {
			continue
		}
		c := proto.Clone(m).(*pb.Message)
		if c.Snapshot.Metadata.ConfState == nil {
			c.Snapshot.Metadata.ConfState = &pb.ConfState{}
		}
		c.Snapshot.Metadata.ConfState.Learners = append(c.Snapshot.Metadata.ConfState.Learners, to)
		msgs[i] = c
	}
}

// installSnapshot replaces this replica's log and state by the leader's
// snapshot. Proposals of this replica at indexes the snapshot covers were
// replaced by whatever the leader has there.
func (r *Replica) installSnapshot(snap *pb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	state, off, err := r.store.ApplySnapshot(snap)
	if err != nil {
		return err
	}
	r.noteVoters()
	for i, pe := range r.byIndex {
		if i <= idx {
			r.finish(pe, 0, fmt.Errorf("%w at index %d of %s (a snapshot replaced it)", ErrOverwritten, i, r.cfg.Group))
			delete(r.byIndex, i)
			delete(r.pending, pe.id)
		}
	}
	if r.cfg.OnSnapshot != nil {
		r.cfg.OnSnapshot(state, off)
	}
	r.applied.Store(idx)
	r.cfg.Logger.Info("snapshot installed", "group", r.cfg.Group, "index", idx, "offset", off, "bytes", len(state))
	return nil
}

// maybeCompact folds the applied entries into a snapshot of the owner's
// state once SnapshotEntries of them accumulated.
func (r *Replica) maybeCompact() error {
	if r.cfg.SnapshotEntries <= 0 || r.cfg.Snapshot == nil {
		return nil
	}
	applied := r.applied.Load()
	first, _ := r.store.FirstIndex()
	if applied < first || applied-first+1 < uint64(r.cfg.SnapshotEntries) {
		return nil
	}
	return r.store.Compact(applied, r.cfg.Snapshot())
}

// softState notes the leader; a replica that stops leading fails the
// proposals raft may never hand back (not yet in any Ready): they were not
// stored, the client sends them again.
func (r *Replica) softState(ss *raft.SoftState, ents []*pb.Entry) {
	if r.leader.Swap(ss.Lead) != ss.Lead {
		r.stats.noteLeader(ss.Lead)
		r.leaderMu.Lock()
		close(r.leaderc)
		r.leaderc = make(chan struct{})
		r.leaderMu.Unlock()
	}
	if ss.RaftState == raft.StateLeader {
		// A new leader appends an empty entry of its term: the last one
		// of this Ready.
		if r.leadIndex.Load() == 0 {
			idx, _ := r.store.LastIndex()
			if len(ents) > 0 {
				idx = max(idx, ents[len(ents)-1].GetIndex())
			}
			r.leadIndex.Store(idx)
		}
		return
	}
	r.leadIndex.Store(0)
	for id, pe := range r.pending {
		if pe.index == 0 {
			r.finish(pe, 0, fmt.Errorf("%w of %s (leader: node %d)", ErrNotLeader, r.cfg.Group, ss.Lead))
			delete(r.pending, id)
		}
	}
}

// overwritten fails the proposals whose persisted entry is being replaced
// by a different one at the same index.
func (r *Replica) overwritten(ents []*pb.Entry) {
	for _, e := range ents {
		idx := e.GetIndex()
		for i, pe := range r.byIndex {
			if i < idx {
				continue
			}
			if p, _, ok := parseEntry(e); i == idx && ok && p == (Proposal{r.cfg.NodeID, pe.id}) {
				continue
			}
			r.finish(pe, 0, fmt.Errorf("%w at index %d of %s", ErrOverwritten, i, r.cfg.Group))
			delete(r.byIndex, i)
			delete(r.pending, pe.id)
		}
	}
}

// persisted notes where this replica's proposals landed and answers the
// AckPersisted ones: their entry is fsynced on the leader.
func (r *Replica) persisted(apps []Appended) {
	var now int64
	if r.cfg.Stages != nil && len(apps) > 0 {
		now = nanotime()
	}
	for _, a := range apps {
		if a.Proposal.Node != r.cfg.NodeID {
			continue
		}
		pe := r.pending[a.Proposal.ID]
		if pe == nil {
			continue
		}
		pe.index = a.Index
		pe.persisted = now
		r.byIndex[a.Index] = pe
		off := a.First
		for _, p := range pe.props {
			if p.keyed {
				delete(r.inflight, p.key) // the log's window has it now
			}
			p.index, p.first = a.Index, off
			if p.ack == AckPersisted {
				p.done(off, nil)
			}
			off += int64(p.records)
		}
		pe.acked = true
	}
}

// apply handles committed entries: configuration changes, the answers of
// AckCommitted proposals, and the new high watermark with the committed
// batches for the broker.
func (r *Replica) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	var batches [][]byte
	var acks []*proposal
	var seen int64 // when the commit was seen, for Config.Stages
	if r.cfg.Stages != nil {
		seen = nanotime()
	}
	for _, e := range ents {
		switch e.GetType() {
		case pb.EntryType_EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("%s: conf change at %d: %w", r.cfg.Group, e.GetIndex(), err)
			}
			r.applyConf(&cc, e)
			if r.cfg.OnConfChange != nil && cc.GetNodeId() != 0 {
				r.cfg.OnConfChange(cc.GetNodeId(), cc.GetType() == pb.ConfChangeType_ConfChangeAddNode, cc.GetContext())
			}
		case pb.EntryType_EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("%s: conf change at %d: %w", r.cfg.Group, e.GetIndex(), err)
			}
			r.applyConf(&cc, e)
		default:
			batches, acks = r.applyNormal(e, batches, acks)
		}
	}
	// The owner learns of the commit before the publishers hear of it: a
	// publisher that reads right after its acknowledgement finds its
	// records.
	hw := r.store.OffsetAfter(ents[len(ents)-1].GetIndex())
	if r.cfg.OnCommit != nil {
		r.cfg.OnCommit(batches, hw)
	}
	r.applied.Store(ents[len(ents)-1].GetIndex())
	for _, p := range acks {
		p.done(p.first, nil)
	}
	if r.cfg.Stages != nil && len(r.timed) > 0 {
		r.reportStages(seen)
	}
	return nil
}

// reportStages hands Config.Stages the times of the entries applied by
// the last apply that this replica proposed, whose commit it saw at seen,
// and forgets them.
func (r *Replica) reportStages(seen int64) {
	done := nanotime()
	for i, pe := range r.timed {
		records := 0
		for _, p := range pe.props {
			records += p.records
		}
		r.cfg.Stages(Stages{
			Queue:   time.Duration(pe.proposed - pe.arrived),
			Persist: time.Duration(pe.persisted - pe.proposed),
			Commit:  time.Duration(seen - pe.persisted),
			Apply:   time.Duration(done - seen),
			Records: records,
		})
		r.timed[i] = nil
	}
	r.timed = r.timed[:0]
}

// applyNormal adds the batches of a committed entry to batches, and its
// AckCommitted proposals (this replica's, when it proposed the entry) to
// acks.
func (r *Replica) applyNormal(e *pb.Entry, batches [][]byte, acks []*proposal) ([][]byte, []*proposal) {
	idx := e.GetIndex()
	p, body, ok := parseEntry(e)
	if pe := r.byIndex[idx]; pe != nil {
		delete(r.byIndex, idx)
		delete(r.pending, pe.id)
		// Any other entry at idx would have gone through Append, where
		// overwritten() drops pe. An entry read back from storage is
		// anonymous (Proposal{}), so only a named, different one is proof
		// of an overwrite here.
		if ok && (p == (Proposal{}) || p == (Proposal{r.cfg.NodeID, pe.id})) {
			for _, pr := range pe.props {
				if pr.ack == AckCommitted {
					acks = append(acks, pr)
				}
			}
			if r.cfg.Stages != nil && pe.persisted != 0 {
				r.timed = append(r.timed, pe)
			}
		} else {
			r.finish(pe, 0, fmt.Errorf("%w at index %d of %s", ErrOverwritten, idx, r.cfg.Group))
		}
	}
	for ok && len(body) > 0 {
		h, err := record.ParseHeader(body)
		if err != nil {
			break // it was validated when it was stored
		}
		batches = append(batches, body[:h.Size()])
		body = body[h.Size():]
	}
	return batches, acks
}

// applyConf applies a committed configuration change and logs the
// configuration it leads to: a replica move or a membership change can be
// followed group by group in the nodes' logs.
func (r *Replica) applyConf(cc pb.ConfChangeI, e *pb.Entry) {
	cs := r.rn.ApplyConfChange(cc)
	r.store.SetConfState(cs, e.GetIndex())
	r.noteVoters()
	r.cfg.Logger.Info("group configuration changed", "group", r.cfg.Group, "index", e.GetIndex(), "term", e.GetTerm(),
		"voters", cs.GetVoters(), "learners", cs.GetLearners(), "outgoing", cs.GetVotersOutgoing())
}
