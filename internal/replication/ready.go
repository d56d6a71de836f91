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

// handleReadies processes every pending Ready without waiting for an
// fsync (asynchronous storage writes, see syncer.go): it writes the
// entries and state the Ready appends and queues their fsync, with the
// messages that must follow it, to the syncer; it sends the other
// messages at once (a leader's appends and heartbeats: the followers
// write and fsync while it does, Raft thesis 10.2.1; raft counts the
// leader's own copy only once the syncer says it is durable); and it
// applies what committed (raft hands out only entries durable here). An
// error is a storage failure: the group stops.
func (r *Replica) handleReadies() error {
	for r.rn.HasReady() {
		rd := r.rn.Ready()
		if rd.SoftState != nil {
			r.softState(rd.SoftState, rd.Entries)
		}
		var send []*pb.Message
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				if err := r.storageAppend(rd, m); err != nil {
					return err
				}
			case raft.LocalApplyThread:
			default:
				send = append(send, m)
			}
		}
		// After storageAppend, which rebased the entries' batches in
		// place: the followers get the bytes this log stores.
		if msgs := r.withholdCampaign(send); len(msgs) > 0 {
			addReceiver(msgs)
			r.tr.Send(r.cfg.Group, msgs)
		}
		for _, m := range rd.Messages {
			if m.GetTo() != raft.LocalApplyThread {
				continue
			}
			if err := r.apply(m.GetEntries()); err != nil {
				return err
			}
			if err := r.maybeCompact(); err != nil {
				return err
			}
			r.stepLocal(m.GetResponses())
		}
		for _, rs := range rd.ReadStates {
			if ch := r.reads[string(rs.RequestCtx)]; ch != nil {
				delete(r.reads, string(rs.RequestCtx))
				ch <- rs.Index
			}
		}
		// A snapshot message may be dropped on the way (the transport never
		// blocks): report it sent, so that the follower's answer, or its
		// refusal of the next append, makes raft send it again.
		for _, m := range send {
			if m.GetType() == pb.MessageType_MsgSnap {
				r.stats.snapshotsSent.Add(1)
				r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
			}
		}
	}
	return nil
}

// storageAppend does the writes of rd (its MsgStorageAppend m): the hard
// state, a snapshot, the entries; then queues their fsync and m's
// responses to the syncer.
func (r *Replica) storageAppend(rd raft.Ready, m *pb.Message) error {
	if !raft.IsEmptyHardState(rd.HardState) {
		r.store.SetHardState(rd.HardState)
		r.term.Store(rd.HardState.GetTerm())
		r.stats.commit.Store(rd.HardState.GetCommit())
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		// It replaces the log and stores the state itself: every fsync
		// queued before goes first.
		if err := r.quiesce(); err != nil {
			return err
		}
		if err := r.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
		r.stats.snapshotsApplied.Add(1)
	}
	if len(rd.Entries) > 0 {
		if last, _ := r.store.LastIndex(); rd.Entries[0].GetIndex() <= last {
			// A new leader's entries replace some of this log's: the
			// proposals there were all answered or failed first.
			if err := r.quiesce(); err != nil {
				return err
			}
		}
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
	r.appended(apps)
	d, err := r.store.Flush()
	if err != nil {
		return err
	}
	j := &syncJob{d: d, resps: m.GetResponses(), apps: apps}
	for _, a := range apps {
		j.records += int(a.Next - a.First)
	}
	r.syncing++
	if r.alone.Load() && r.syncing == 1 {
		// A group of one fsyncs on its loop. Nobody answers it, so the
		// loop would only take proposals meanwhile, which must wait for
		// the next fsync anyway; taken after this one they make one
		// entry instead of one each (on one node the syncer cost 10%
		// more CPU for no lower latency: docs/BENCHMARKS.md).
		start := time.Now()
		j.err = r.store.sync(d)
		j.took, j.end = time.Since(start), nanotime()
		var peers []*pb.Message
		if j.err == nil {
			j.local, peers = splitResponses(j.resps, r.cfg.NodeID)
		}
		if len(peers) > 0 { // to nodes no longer voters
			r.tr.Send(r.cfg.Group, peers)
		}
		return r.complete([]*syncJob{j})
	}
	r.sync.push(j)
	return nil
}

// syncCompleted takes the syncer's completed jobs: AckPersisted answers,
// the Synced callback, and this replica's own responses (its copy is
// durable) stepped into raft. A job's error is a storage failure.
func (r *Replica) syncCompleted() error {
	if r.syncErr != nil {
		return r.syncErr
	}
	return r.complete(r.sync.completed())
}

// complete takes synced jobs back, in order (syncCompleted).
func (r *Replica) complete(jobs []*syncJob) error {
	var last *syncJob
	for _, j := range jobs {
		r.syncing--
		if j.err != nil {
			r.syncErr = j.err // sticky: a caller may not be the loop
			return j.err
		}
		if r.cfg.Synced != nil && j.records > 0 {
			r.cfg.Synced(j.took, j.records)
		}
		r.persisted(j.apps, j.end)
		r.stepLocal(j.local)
		if j.d.logOK {
			last = j
		}
	}
	if last != nil {
		r.store.log.Evict(last.d.log)
	}
	return nil
}

// quiesce waits until every queued fsync is done and taken: before the
// loop stores the state itself (a snapshot, a compaction) or cuts the
// log, so that the syncer never stores an older state after it.
func (r *Replica) quiesce() error {
	for {
		if err := r.syncCompleted(); err != nil {
			return err
		}
		if r.syncing == 0 {
			return nil
		}
		<-r.sync.notify
	}
}

// settle handles Readies and fsyncs until raft has nothing more to do:
// a new replica's bootstrap and first election before its loop starts.
func (r *Replica) settle() error {
	for {
		if err := r.handleReadies(); err != nil {
			return err
		}
		if r.syncing == 0 {
			return nil
		}
		if err := r.quiesce(); err != nil {
			return err
		}
	}
}

// stepLocal steps raft's responses to this replica's own storage
// messages (they never go through admit: they come from raft itself).
func (r *Replica) stepLocal(msgs []*pb.Message) {
	for _, m := range msgs {
		_ = r.rn.Step(m) // raft's own messages: it accepts them
	}
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
	if err := r.quiesce(); err != nil { // Compact stores the state itself
		return err
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

// appended notes where this replica's proposals landed in the log
// (written, not yet fsynced).
func (r *Replica) appended(apps []Appended) {
	for _, a := range apps {
		if a.Proposal.Node != r.cfg.NodeID {
			continue
		}
		pe := r.pending[a.Proposal.ID]
		if pe == nil {
			continue
		}
		pe.index = a.Index
		r.byIndex[a.Index] = pe
		off := a.First
		for _, p := range pe.props {
			if p.keyed {
				delete(r.inflight, p.key) // the log's window has it now
			}
			p.index, p.first = a.Index, off
			off += int64(p.records)
		}
	}
}

// persisted answers the AckPersisted proposals of the entries apps (their
// fsync ended at end, nanotime): they are durable on the leader. Entries
// overwritten or failed meanwhile were answered already.
func (r *Replica) persisted(apps []Appended, end int64) {
	for _, a := range apps {
		if a.Proposal.Node != r.cfg.NodeID {
			continue
		}
		pe := r.pending[a.Proposal.ID]
		if pe == nil || pe.index != a.Index || pe.acked {
			continue
		}
		pe.persisted = end
		for _, p := range pe.props {
			if p.ack == AckPersisted {
				p.done(p.first, nil)
			}
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
