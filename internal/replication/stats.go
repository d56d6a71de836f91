package replication

import (
	"context"
	"sort"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
)

// stats are a replica's counters for metrics. The loop goroutine updates
// them on rare events (a leader change, a snapshot) or once per Ready
// (commit index, pending proposals): never per record. Readers (metric
// scrapes) load them from any goroutine.
type stats struct {
	leaderChanges     atomic.Uint64
	snapshotsSent     atomic.Uint64
	snapshotsReceived atomic.Uint64
	snapshotsApplied  atomic.Uint64
	votesWithheld     atomic.Uint64 // vote requests not answered or not sent while catching up
	commit            atomic.Uint64
	pending           atomic.Int64 // proposals in raft's hands, not answered yet
	// noLeaderSince is when this replica last lost sight of a leader
	// (Unix ns; 0 while it knows one, or before it knew any: see started).
	noLeaderSince atomic.Int64
	started       time.Time
}

// noteLeader records a change of the known leader (loop goroutine).
func (s *stats) noteLeader(lead uint64) {
	if lead == raft.None {
		s.noLeaderSince.Store(time.Now().UnixNano())
		return
	}
	s.leaderChanges.Add(1)
	s.noLeaderSince.Store(0)
}

// Stats is a replica's Raft state for metrics, as of its last Ready.
type Stats struct {
	Leader   uint64 // 0: none known
	IsLeader bool
	Term     uint64
	Commit   uint64 // the group's commit index as this replica knows it
	Applied  uint64 // the last index applied here
	// PendingProposals are the publishes waiting for their entry (queued)
	// or for their entry to be persisted or committed.
	PendingProposals int
	// LeaderChanges counts the times this replica saw a (new) leader;
	// the Snapshots* count snapshots sent to followers, received from a
	// leader, and installed here.
	LeaderChanges, SnapshotsSent, SnapshotsReceived, SnapshotsApplied uint64
	// CatchUp is the index this replica must hold again before it votes
	// (it lost entries it had acknowledged); 0 when it votes.
	// VotesWithheld counts the vote requests it did not answer or send
	// meanwhile.
	CatchUp, VotesWithheld uint64
	// NoLeaderFor is how long this replica has known no leader (0 while
	// it knows one).
	NoLeaderFor time.Duration
}

// Stats returns the replica's Raft state for metrics; it does not wait
// for the replica's goroutine.
func (r *Replica) Stats() Stats {
	lead := r.leader.Load()
	var noLeader time.Duration
	if lead == raft.None {
		since := time.Unix(0, r.stats.noLeaderSince.Load())
		if r.stats.noLeaderSince.Load() == 0 {
			since = r.stats.started
		}
		noLeader = max(time.Since(since), 0)
	}
	return Stats{
		NoLeaderFor: noLeader,
		Leader:      lead, IsLeader: lead != 0 && lead == r.cfg.NodeID,
		Term: r.term.Load(), Commit: r.stats.commit.Load(), Applied: r.applied.Load(),
		PendingProposals:  len(r.propc) + int(r.stats.pending.Load()),
		LeaderChanges:     r.stats.leaderChanges.Load(),
		SnapshotsSent:     r.stats.snapshotsSent.Load(),
		SnapshotsReceived: r.stats.snapshotsReceived.Load(),
		SnapshotsApplied:  r.stats.snapshotsApplied.Load(),
		CatchUp:           r.store.CatchUp(),
		VotesWithheld:     r.stats.votesWithheld.Load(),
	}
}

// FollowerLag is how far one follower is behind its leader.
type FollowerLag struct {
	Node    uint64
	Entries uint64 // Raft entries behind the leader's last entry
	// Records are the partition records behind the leader's log end: a
	// lower bound (the records the leader's log still holds) when the
	// follower needs entries the leader compacted (it gets a snapshot).
	Records int64
}

// FollowerLags returns, when this replica leads its group, how far each
// other replica is behind it, by node; nil otherwise, or when the
// replica's goroutine does not answer before ctx ends (a busy replica
// must not hold up a metrics scrape). It asks the replica's goroutine:
// call it per scrape, not per request.
func (r *Replica) FollowerLags(ctx context.Context) []FollowerLag {
	if r.leader.Load() != r.cfg.NodeID {
		return nil
	}
	var out []FollowerLag
	done := make(chan struct{})
	f := func() {
		defer close(done)
		st := r.rn.Status()
		if st.RaftState != raft.StateLeader {
			return
		}
		last, err := r.store.LastIndex()
		if err != nil {
			last = st.GetCommit()
		}
		end := r.store.OffsetAfter(last)
		for id, pr := range st.Progress {
			if id == r.cfg.NodeID {
				continue
			}
			fl := FollowerLag{Node: id}
			if pr.Match < last {
				fl.Entries = last - pr.Match
				fl.Records = max(end-r.store.OffsetAfter(pr.Match), 0)
			}
			out = append(out, fl)
		}
	}
	if r.call(ctx, f) != nil {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil
	case <-r.stopc:
		return nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// scrapeWait bounds how long FollowerLagsQuick waits for the replica.
const scrapeWait = 200 * time.Millisecond

// FollowerLagsQuick is FollowerLags with a short deadline of its own.
func (r *Replica) FollowerLagsQuick() []FollowerLag {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeWait)
	defer cancel()
	return r.FollowerLags(ctx)
}
