package replication

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// basicStatus reads r's raft status on its goroutine.
func basicStatus(t *testing.T, r *Replica) raft.BasicStatus {
	t.Helper()
	ch := make(chan raft.BasicStatus, 1)
	if err := r.call(context.Background(), func() { ch <- r.rn.BasicStatus() }); err != nil {
		t.Fatal(err)
	}
	return <-ch
}

func msg(typ pb.MessageType, from, to, term uint64) *pb.Message {
	return &pb.Message{Type: typ.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Term: proto.Uint64(term)}
}

// Messages no correct peer sends reach neither raft (which would panic on
// some, or follow a forged term) nor stop the group: each is dropped and
// counted, the replicas keep their term and leader, and the group goes on
// committing.
func TestForgedRaftMessagesAreDropped(t *testing.T) {
	g := newGroup(t, 3)
	var total int64
	for i := 0; i < 5; i++ {
		g.publish("warm", 2, AckCommitted)
		total += 2
	}
	g.converged(total)
	leader := g.leader()
	var follower *member
	for _, m := range g.ms {
		if m != leader {
			follower = m
			break
		}
	}
	st := basicStatus(t, follower.r)
	term, last := st.HardState.GetTerm(), st.HardState.GetCommit()

	type forgery struct {
		to *member
		m  *pb.Message
	}
	forged := map[string]forgery{}
	// The leader's id, a term far ahead, a commit beyond the log: etcd
	// raft panics on it ("tocommit(...) is out of range").
	hb := msg(pb.MessageType_MsgHeartbeat, leader.id, follower.id, term+1000)
	hb.Commit = proto.Uint64(last + 1_000_000)
	forged["heartbeat beyond the log"] = forgery{follower, hb}
	// A node that is not a member, with a higher term.
	forged["non-member"] = forgery{follower, msg(pb.MessageType_MsgHeartbeat, 99, follower.id, term+5000)}
	// An append that rewrites committed entries: raft panics ("conflict
	// with committed entry").
	app := msg(pb.MessageType_MsgApp, leader.id, follower.id, term)
	app.Index, app.LogTerm = proto.Uint64(1), proto.Uint64(1)
	app.Entries = []*pb.Entry{{Index: proto.Uint64(2), Term: proto.Uint64(term + 7), Data: []byte("forged")}}
	forged["append rewriting the committed log"] = forgery{follower, app}
	// Entries that are not consecutive.
	gap := msg(pb.MessageType_MsgApp, leader.id, follower.id, term)
	gap.Index, gap.LogTerm = proto.Uint64(last), proto.Uint64(term)
	gap.Entries = []*pb.Entry{{Index: proto.Uint64(last + 5), Term: proto.Uint64(term)}}
	forged["append with a gap"] = forgery{follower, gap}
	// A follower acknowledging what the leader never had: it would make
	// the leader commit entries no quorum stored.
	ack := msg(pb.MessageType_MsgAppResp, follower.id, leader.id, term)
	ack.Index = proto.Uint64(last + 1_000_000)
	forged["acknowledgement beyond the log"] = forgery{leader, ack}
	// A message local to a node (an election timeout).
	forged["local message"] = forgery{follower, msg(pb.MessageType_MsgHup, leader.id, follower.id, term)}
	// Addressed to another node.
	forged["misaddressed"] = forgery{follower, msg(pb.MessageType_MsgHeartbeat, leader.id, leader.id, term+3)}

	for name, f := range forged {
		before := f.to.refused.Load()
		f.to.r.Step(f.m)
		deadline := time.Now().Add(5 * time.Second)
		for f.to.refused.Load() == before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not refused", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, m := range g.ms {
		if m.failed.Load() {
			t.Fatalf("node %d's replica failed", m.id)
		}
		if got := basicStatus(t, m.r).HardState.GetTerm(); got != term {
			t.Errorf("node %d: term %d after the forged messages, want %d", m.id, got, term)
		}
	}
	if got := g.leader(); got != leader {
		t.Errorf("leader changed from %d to %d", leader.id, got.id)
	}
	for i := 0; i < 5; i++ {
		g.publish("after", 1, AckCommitted)
		total++
	}
	g.converged(total)
}

// A node the cluster assigns the group to is admitted although this
// replica's configuration does not name it yet (a replica replaying the
// changes since its snapshot would otherwise refuse its leader for good);
// one assigned nowhere is still refused.
func TestAssignedNodesAreAdmitted(t *testing.T) {
	g := newGroup(t, 3)
	g.publish("warm", 1, AckCommitted)
	g.converged(1)
	follower := g.ms[0]
	if follower == g.leader() {
		follower = g.ms[1]
	}
	admit := func(from uint64) string {
		t.Helper()
		ch := make(chan string, 1)
		m := msg(pb.MessageType_MsgHeartbeat, from, follower.id, basicStatus(t, follower.r).HardState.GetTerm())
		if err := follower.r.call(context.Background(), func() { ch <- follower.r.admit(m) }); err != nil {
			t.Fatal(err)
		}
		return <-ch
	}
	if why := admit(7); why == "" {
		t.Fatal("node 7, assigned nowhere, was admitted")
	}
	follower.r.SetAssigned([]uint64{7, 1, 2, 3, 7})
	if why := admit(7); why != "" {
		t.Fatalf("node 7, assigned the group, was refused: %s", why)
	}
	if why := admit(8); why == "" {
		t.Fatal("node 8, assigned nowhere, was admitted")
	}
}

// A replica of a stopping node (Retire) takes no leadership handed to it;
// the same transfer to a replica that is not retiring moves the
// leadership (the control).
func TestRetiringReplicaTakesNoLeadership(t *testing.T) {
	g := newGroup(t, 3)
	g.publish("warm", 1, AckCommitted)
	g.converged(1)
	leader := g.leader()
	var others []*member
	for _, m := range g.ms {
		if m != leader {
			others = append(others, m)
		}
	}
	others[0].r.Retire()
	if !leader.r.TransferLeadership(others[0].id) {
		t.Fatal("the transfer to the retiring replica did not start")
	}
	time.Sleep(time.Second) // a transfer takes a few ticks; it is dropped here
	if l := g.leader(); l != leader {
		t.Fatalf("the leadership moved to node %d, retiring or not (was %d, retiring %d)", l.id, leader.id, others[0].id)
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.leader() != others[1] {
		if time.Now().After(deadline) {
			t.Fatalf("the leadership did not move to node %d, which is not retiring", others[1].id)
		}
		leader.r.TransferLeadership(others[1].id)
		time.Sleep(100 * time.Millisecond)
	}
}
