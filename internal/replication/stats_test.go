package replication

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestStats checks the Raft state a replica exports for metrics: a leader
// change, term, commit and applied indexes, follower lag as the leader
// sees it, snapshots sent and installed, and how long a replica cut off
// from its peers has known no leader.
func TestStats(t *testing.T) {
	g := newGroupSnap(t, 3, false, 10)
	l := g.leader()
	hw := g.publish("a", 5, AckCommitted) + 5
	g.converged(hw)
	st := l.r.Stats()
	if !st.IsLeader || st.Leader != l.id || st.LeaderChanges == 0 || st.Term == 0 {
		t.Fatalf("leader's stats: %+v", st)
	}
	if st.Commit == 0 || st.Applied == 0 || st.Applied > st.Commit {
		t.Fatalf("leader's indexes: %+v", st)
	}
	if st.NoLeaderFor != 0 {
		t.Fatalf("the leader says it knows no leader for %s", st.NoLeaderFor)
	}
	var f *member
	for _, m := range g.ms {
		if m != l {
			f = m
		}
	}
	if fs := f.r.Stats(); fs.IsLeader || fs.Leader != l.id || fs.LeaderChanges == 0 {
		t.Fatalf("follower's stats: %+v", fs)
	}
	if lags := f.r.FollowerLags(context.Background()); lags != nil {
		t.Fatalf("a follower reports follower lag: %+v", lags)
	}
	lags := l.r.FollowerLagsQuick()
	if len(lags) != 2 {
		t.Fatalf("leader reports lag of %d followers, want 2: %+v", len(lags), lags)
	}

	// A follower away falls behind: the leader sees its lag in entries
	// and records, then sends it a snapshot.
	g.stop(f)
	for i := 0; i < 300; i++ {
		hw = g.publish(fmt.Sprint("b", i), 3, AckCommitted) + 3
	}
	l = g.leader()
	var behind *FollowerLag
	for _, fl := range l.r.FollowerLagsQuick() {
		if fl.Node == f.id {
			behind = &fl
		}
	}
	// Records are counted from the leader's log: with the follower's
	// entries compacted away, what the log still holds (a lower bound).
	if behind == nil || behind.Entries < 100 || behind.Records <= 0 {
		t.Fatalf("lag of the stopped follower as the leader sees it: %+v", behind)
	}
	g.start(f)
	deadline := time.Now().Add(10 * time.Second)
	for f.highWatermark() != hw {
		if time.Now().After(deadline) {
			t.Fatalf("follower hw %d, want %d", f.highWatermark(), hw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if fs := f.r.Stats(); fs.SnapshotsReceived == 0 || fs.SnapshotsApplied == 0 {
		t.Fatalf("the follower caught up by snapshot but counts none: %+v", fs)
	}
	if ls := l.r.Stats(); ls.SnapshotsSent == 0 {
		t.Fatalf("the leader sent a snapshot but counts none: %+v", ls)
	}

	// Cut the leader off: it steps down (CheckQuorum) and knows no leader.
	g.net.setCut(l.id, true)
	deadline = time.Now().Add(10 * time.Second)
	for l.r.Stats().NoLeaderFor < 100*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("a leader cut off from its group still knows a leader: %+v", l.r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.net.setCut(l.id, false)
}
