package cluster

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

func register(id uint64) *pb.Command {
	return &pb.Command{Kind: &pb.Command_RegisterNode{RegisterNode: &pb.RegisterNode{Id: id, RaftAddr: fmt.Sprint("r", id), GrpcAddr: fmt.Sprint("g", id)}}}
}

func create(name string, partitions, rf int32) *pb.Command {
	return &pb.Command{Kind: &pb.Command_CreateTopic{CreateTopic: &pb.CreateTopic{Name: name,
		Config: &pb.TopicConfig{Partitions: partitions, ReplicationFactor: rf, DefaultMode: 1}}}}
}

func del(name string) *pb.Command {
	return &pb.Command{Kind: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: name}}}
}

// The commands of a cluster's life, one per step, with the result each
// must have.
func TestMetadataScript(t *testing.T) {
	m := NewMetadata()
	steps := []struct {
		cmd  *pb.Command
		want error
	}{
		{register(2), nil},
		{register(1), nil},
		{create("early", 1, 3), ErrNoNodes},
		{register(3), nil},
		{create("orders", 6, 3), nil},
		{create("orders", 1, 1), ErrTopicExists},
		{create("", 1, 1), ErrBadCommand},
		{create("zero", 0, 1), ErrBadCommand},
		{create("big", 1, 4), ErrNoNodes},
		{create("audit", 2, 1), nil},
		{del("audit"), nil},
		{del("audit"), ErrTopicNotFound},
		{&pb.Command{}, ErrBadCommand},
		{register(0), ErrBadCommand},
	}
	for i, st := range steps {
		_, err := m.Apply(uint64(i+1), st.cmd)
		if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Fatalf("step %d (%v): err %v, want %v", i+1, st.cmd, err, st.want)
		}
	}
	if m.Applied != uint64(len(steps)) {
		t.Fatalf("applied %d", m.Applied)
	}
	topics := m.Topics()
	if len(topics) != 1 || topics[0].Name != "orders" {
		t.Fatalf("topics %v", topics)
	}
	leads := map[uint64]int{}
	for p, r := range topics[0].Replicas {
		if len(r) != 3 || r[0] == r[1] || r[1] == r[2] || r[0] == r[2] {
			t.Fatalf("partition %d replicas %v: want 3 distinct nodes", p, r)
		}
		leads[r[0]]++
	}
	for id := uint64(1); id <= 3; id++ {
		if leads[id] != 2 {
			t.Fatalf("preferred leaders %v: want 2 partitions led by each node", leads)
		}
	}
	if n := m.Nodes(); len(n) != 3 || n[0].ID != 1 || n[2].GRPCAddr != "g3" {
		t.Fatalf("nodes %v", n)
	}
}

func commit(group, topic string, partition int32, offset int64) *pb.Command {
	return &pb.Command{Kind: &pb.Command_CommitOffsets{CommitOffsets: &pb.CommitOffsets{Group: group,
		Offsets: []*pb.GroupOffset{{Topic: topic, Partition: partition, Offset: offset}}}}}
}

// Committed offsets are kept for partitions that exist, replaced by later
// commits, and forgotten with their topic.
func TestMetadataGroupOffsets(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) (Change, error) {
		i++
		return m.Apply(i, cmd)
	}
	apply(register(1))
	apply(create("orders", 2, 1))
	apply(create("audit", 1, 1))
	ch, err := apply(&pb.Command{Kind: &pb.Command_CommitOffsets{CommitOffsets: &pb.CommitOffsets{Group: "billing",
		Offsets: []*pb.GroupOffset{
			{Topic: "orders", Partition: 0, Offset: 10},
			{Topic: "orders", Partition: 1, Offset: 20},
			{Topic: "orders", Partition: 2, Offset: 30}, // no such partition
			{Topic: "gone", Partition: 0, Offset: 40},   // no such topic
			{Topic: "audit", Partition: 0, Offset: 5},
		}}}})
	if err != nil || len(ch.Committed.Offsets) != 3 {
		t.Fatalf("commit: %v, kept %v", err, ch.Committed)
	}
	apply(commit("billing", "orders", 0, 11))
	if off, ok := m.Committed("billing", Partition{"orders", 0}); !ok || off != 11 {
		t.Fatalf("orders/0: %d %v, want 11", off, ok)
	}
	if _, err := apply(commit("", "orders", 0, 1)); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("commit without a group: %v", err)
	}
	apply(del("orders"))
	if offs := m.GroupOffsets("billing"); len(offs) != 1 || offs[Partition{"audit", 0}] != 5 {
		t.Fatalf("after deleting orders: %v", offs)
	}
	apply(del("audit"))
	if g := m.Groups(); len(g) != 0 {
		t.Fatalf("groups left after deleting every topic: %v", g)
	}
	if _, err := apply(&pb.Command{Kind: &pb.Command_Barrier{Barrier: &pb.Barrier{}}}); err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

// A group's commits are fenced by its coordinator epoch: once a node
// claimed the group, a commit made in an earlier epoch (by the previous
// coordinator, still sending) changes nothing; unfenced commits (epoch 0,
// written before epochs existed) still apply; a snapshot keeps the epochs.
func TestMetadataGroupClaimFencesCommits(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) (Change, error) {
		i++
		return m.Apply(i, cmd)
	}
	claim := func(g string) uint64 {
		t.Helper()
		ch, err := apply(&pb.Command{Kind: &pb.Command_ClaimGroup{ClaimGroup: &pb.ClaimGroup{Group: g}}})
		if err != nil || ch.GroupEpoch != i {
			t.Fatalf("claim %q: epoch %d, %v; want %d", g, ch.GroupEpoch, err, i)
		}
		return ch.GroupEpoch
	}
	fenced := func(g string, off int64, epoch uint64) error {
		c := commit(g, "orders", 0, off)
		c.GetCommitOffsets().CoordinatorEpoch = epoch
		_, err := apply(c)
		return err
	}
	apply(register(1))
	apply(create("orders", 1, 1))
	if _, err := apply(&pb.Command{Kind: &pb.Command_ClaimGroup{ClaimGroup: &pb.ClaimGroup{}}}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("claim without a group: %v", err)
	}
	old := claim("billing")
	if err := fenced("billing", 6618, old); err != nil {
		t.Fatal(err)
	}
	now := claim("billing") // another node takes the group over
	if err := fenced("billing", 6607, old); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit of the previous coordinator: %v, want ErrFenced", err)
	}
	if off, _ := m.Committed("billing", Partition{"orders", 0}); off != 6618 {
		t.Fatalf("committed %d after a fenced commit, want 6618", off)
	}
	if err := fenced("billing", 6620, now); err != nil {
		t.Fatal(err)
	}
	if err := fenced("billing", 6625, 0); err != nil {
		t.Fatalf("unfenced commit: %v", err)
	}
	other := claim("audit") // a claimed group with no offsets yet
	r := NewMetadata()
	r.Restore(m.Applied, m.Snapshot())
	if !proto.Equal(r.Snapshot(), m.Snapshot()) {
		t.Fatal("restore from a snapshot differs")
	}
	if r.groupEpochs["billing"] != now || r.groupEpochs["audit"] != other {
		t.Fatalf("restored epochs %v, want billing %d, audit %d", r.groupEpochs, now, other)
	}
	if g := r.Groups(); len(g) != 1 || g[0] != "billing" {
		t.Fatalf("restored groups with offsets: %v", g)
	}
}

func TestMetadataApplyOutOfOrderPanics(t *testing.T) {
	m := NewMetadata()
	m.Apply(5, register(1))
	defer func() {
		if recover() == nil {
			t.Fatal("applying index 5 twice did not panic")
		}
	}()
	m.Apply(5, register(2))
}

// Two nodes applying the same commands reach the same state, and a
// snapshot restores it exactly.
func TestMetadataDeterministicAndSnapshot(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	a, b := NewMetadata(), NewMetadata()
	for i := 1; i <= 300; i++ {
		var cmd *pb.Command
		switch rng.Intn(5) {
		case 4:
			cmd = &pb.Command{Kind: &pb.Command_ClaimGroup{ClaimGroup: &pb.ClaimGroup{Group: fmt.Sprint("g", rng.Intn(5))}}}
		case 3:
			cmd = commit(fmt.Sprint("g", rng.Intn(3)), fmt.Sprint("t", rng.Intn(20)), int32(rng.Intn(4)), int64(rng.Intn(1000)))
		case 0:
			cmd = register(uint64(1 + rng.Intn(5)))
		case 1:
			cmd = create(fmt.Sprint("t", rng.Intn(20)), int32(1+rng.Intn(8)), int32(1+rng.Intn(3)))
		default:
			cmd = del(fmt.Sprint("t", rng.Intn(20)))
		}
		_, errA := a.Apply(uint64(i), cmd)
		_, errB := b.Apply(uint64(i), proto.Clone(cmd).(*pb.Command))
		if fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("command %d: %v vs %v", i, errA, errB)
		}
	}
	if !proto.Equal(a.Snapshot(), b.Snapshot()) {
		t.Fatal("two replicas of the metadata diverged")
	}
	c := NewMetadata()
	c.Restore(a.Applied, a.Snapshot())
	if !proto.Equal(a.Snapshot(), c.Snapshot()) || c.Applied != a.Applied {
		t.Fatal("restore from a snapshot differs")
	}
}

// Balance spreads replicas over a new node and drains a leaving one;
// reassignments complete only with the target's voters.
func TestMetadataBalanceAndMoves(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) (Change, error) {
		i++
		return m.Apply(i, cmd)
	}
	for id := uint64(1); id <= 3; id++ {
		apply(register(id))
	}
	apply(create("orders", 4, 2))
	if m.Balance(nil) != nil {
		t.Fatal("a balanced cluster got moves")
	}
	apply(register(4))
	plan := m.Balance(nil)
	if len(plan) != 1 {
		t.Fatalf("plan %v", plan)
	}
	for _, mv := range plan[0].Moves {
		tp, _ := m.Topic(mv.Topic)
		was := tp.Replicas[mv.Partition]
		changed := 0
		for _, n := range mv.Target {
			if !slices.Contains(was, n) {
				changed++
			}
		}
		if changed != 1 {
			t.Fatalf("orders/%d moves %d replicas (%v -> %v); one per partition is enough here", mv.Partition, changed, was, mv.Target)
		}
	}
	for _, c := range plan {
		if _, err := apply(&pb.Command{Kind: &pb.Command_ReassignPartitions{ReassignPartitions: c}}); err != nil {
			t.Fatal(err)
		}
		if _, err := apply(&pb.Command{Kind: &pb.Command_ReassignPartitions{ReassignPartitions: c}}); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("a second move of moving partitions: %v", err)
		}
		for _, mv := range c.Moves {
			bad := &pb.CompleteReassignment{Topic: mv.Topic, Partition: mv.Partition, Replicas: []uint64{1}}
			if _, err := apply(&pb.Command{Kind: &pb.Command_CompleteReassignment{CompleteReassignment: bad}}); !errors.Is(err, ErrBadCommand) {
				t.Fatalf("completing with other voters: %v", err)
			}
			done := &pb.CompleteReassignment{Topic: mv.Topic, Partition: mv.Partition, Replicas: mv.Target}
			if _, err := apply(&pb.Command{Kind: &pb.Command_CompleteReassignment{CompleteReassignment: done}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id := uint64(1); id <= 4; id++ {
		if n := m.ReplicasOn(id); n != 2 {
			t.Fatalf("node %d holds %d replicas after balancing 8 over 4 nodes", id, n)
		}
	}
	for _, c := range m.Balance([]uint64{4}) {
		apply(&pb.Command{Kind: &pb.Command_ReassignPartitions{ReassignPartitions: c}})
		for _, mv := range c.Moves {
			apply(&pb.Command{Kind: &pb.Command_CompleteReassignment{CompleteReassignment: &pb.CompleteReassignment{
				Topic: mv.Topic, Partition: mv.Partition, Replicas: mv.Target}}})
		}
	}
	if n := m.ReplicasOn(4); n != 0 {
		t.Fatalf("node 4 holds %d replicas after draining it", n)
	}
	if _, err := apply(&pb.Command{Kind: &pb.Command_DeregisterNode{DeregisterNode: &pb.DeregisterNode{Id: 4}}}); err != nil {
		t.Fatalf("deregister the drained node: %v", err)
	}
	for _, tp := range m.Topics() {
		for p, r := range tp.Replicas {
			if len(r) != 2 || r[0] == r[1] {
				t.Fatalf("%s/%d replicas %v", tp.Name, p, r)
			}
		}
	}
}

// A move in progress is replaced only when the command says so: cancelling
// sends the partition back to its replicas, and it completes with them.
func TestMetadataCancelMove(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) (Change, error) {
		i++
		return m.Apply(i, cmd)
	}
	for id := uint64(1); id <= 4; id++ {
		apply(register(id))
	}
	apply(create("orders", 1, 2))
	tp, _ := m.Topic("orders")
	was := slices.Clone(tp.Replicas[0])
	to := []uint64{was[0], 4}
	if slices.Contains(was, 4) {
		t.Fatalf("replicas %v already on node 4", was)
	}
	move := func(target []uint64, replace bool) error {
		_, err := apply(&pb.Command{Kind: &pb.Command_ReassignPartitions{ReassignPartitions: &pb.ReassignPartitions{
			Replace: replace, Moves: []*pb.Reassignment{{Topic: "orders", Partition: 0, Target: target}}}}})
		return err
	}
	if err := move(to, false); err != nil {
		t.Fatal(err)
	}
	if err := move(was, false); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("re-targeting a moving partition without replace: %v", err)
	}
	if err := move(was, true); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if tp, _ := m.Topic("orders"); !slices.Equal(tp.Target(0), was) {
		t.Fatalf("target after cancelling %v, want the replicas %v", tp.Target(0), was)
	}
	// The leader removed the voter it had added: the group is back to the replicas.
	if _, err := apply(&pb.Command{Kind: &pb.Command_CompleteReassignment{CompleteReassignment: &pb.CompleteReassignment{
		Topic: "orders", Partition: 0, Replicas: was}}}); err != nil {
		t.Fatal(err)
	}
	if tp, _ := m.Topic("orders"); tp.Target(0) != nil || !slices.Equal(tp.Replicas[0], was) {
		t.Fatalf("after the cancelled move: replicas %v target %v", tp.Replicas[0], tp.Target(0))
	}
}

// Balance moves at most one replica of a partition when moving one
// suffices: over random placements of 4 partitions (2 replicas each) on 3
// nodes, adding a fourth node moves one replica of two partitions.
func TestMetadataBalanceMovesOneReplicaPerPartition(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		m := NewMetadata()
		for id := uint64(1); id <= 4; id++ {
			m.nodes[id] = &NodeInfo{ID: id}
		}
		tp := &Topic{Name: "x", Config: &pb.TopicConfig{Partitions: 4, ReplicationFactor: 2}}
		for range 4 {
			a := uint64(rng.Intn(3) + 1)
			b := uint64(rng.Intn(2) + 1)
			if b >= a {
				b++
			}
			tp.Replicas = append(tp.Replicas, []uint64{a, b})
		}
		m.topics["x"] = tp
		plan := m.Balance(nil)
		load := map[uint64]int{}
		for p, r := range tp.Replicas {
			target := r
			for _, c := range plan {
				for _, mv := range c.Moves {
					if int(mv.Partition) == p {
						target = mv.Target
					}
				}
			}
			changed := 0
			for _, n := range target {
				load[n]++
				if !slices.Contains(r, n) {
					changed++
				}
			}
			if changed > 1 {
				t.Fatalf("round %d: x/%d moves %d replicas (%v -> %v), placement %v", round, p, changed, r, target, tp.Replicas)
			}
		}
		for id := uint64(1); id <= 4; id++ {
			if load[id] != 2 {
				t.Fatalf("round %d: node %d holds %d replicas after balancing, placement %v, plan %v", round, id, load[id], tp.Replicas, plan)
			}
		}
	}
}

// A topic created with assign_id gets the index of its creation as its
// id; one deleted and created again under its name is another topic (a
// new id), and snapshots keep ids. Creations without assign_id (logged
// before topics had ids) keep id 0.
func TestMetadataTopicIDs(t *testing.T) {
	m := NewMetadata()
	withID := func(name string) *pb.Command {
		c := create(name, 1, 1)
		c.GetCreateTopic().AssignId = true
		return c
	}
	for i, c := range []*pb.Command{register(1), withID("a"), create("old", 1, 1), del("a"), withID("a")} {
		if _, err := m.Apply(uint64(i+1), c); err != nil {
			t.Fatalf("command %d: %v", i+1, err)
		}
	}
	a, _ := m.Topic("a")
	old, _ := m.Topic("old")
	if a.ID != 5 || old.ID != 0 {
		t.Fatalf("ids: a %d (want 5, its second creation), old %d (want 0)", a.ID, old.ID)
	}
	r := NewMetadata()
	r.Restore(m.Applied, m.Snapshot())
	if ra, _ := r.Topic("a"); ra.ID != 5 {
		t.Fatalf("after a snapshot a has id %d", ra.ID)
	}
}

// AlterTopic replaces a topic's configuration and grows its partitions,
// placed as a new topic's would be; it never shrinks them, changes the
// replication factor, or touches a newer topic of the same name.
func TestMetadataAlterTopic(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) (Change, error) {
		i++
		return m.Apply(i, cmd)
	}
	for id := uint64(1); id <= 3; id++ {
		if _, err := apply(register(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := apply(&pb.Command{Kind: &pb.Command_CreateTopic{CreateTopic: &pb.CreateTopic{Name: "t",
		Config: &pb.TopicConfig{Partitions: 2, ReplicationFactor: 2, DefaultMode: 1}, AssignId: true}}}); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Topic("t")
	alter := func(id uint64, partitions, rf int32, retention int64) *pb.Command {
		return &pb.Command{Kind: &pb.Command_AlterTopic{AlterTopic: &pb.AlterTopic{Name: "t", Id: id,
			Config: &pb.TopicConfig{Partitions: partitions, ReplicationFactor: rf, DefaultMode: 1, RetentionMs: retention}}}}
	}
	ch, err := apply(alter(before.ID, 5, 2, 60000))
	if err != nil {
		t.Fatal(err)
	}
	after := ch.Altered
	want := Place("t", 5, 2, []uint64{1, 2, 3})
	if after == nil || !slices.EqualFunc(after.Replicas, want, slices.Equal) || after.Config.GetRetentionMs() != 60000 {
		t.Fatalf("altered: %+v, want replicas %v", after, want)
	}
	if !slices.EqualFunc(after.Replicas[:2], before.Replicas, slices.Equal) {
		t.Fatalf("existing partitions moved: %v → %v", before.Replicas, after.Replicas)
	}
	for _, c := range []struct {
		cmd  *pb.Command
		want error
	}{
		{alter(before.ID, 4, 2, 0), ErrBadCommand},      // fewer partitions
		{alter(before.ID, 5, 3, 0), ErrBadCommand},      // another replication factor
		{alter(before.ID+1, 6, 2, 0), ErrTopicNotFound}, // another topic of that name
	} {
		if _, err := apply(c.cmd); !errors.Is(err, c.want) {
			t.Fatalf("%v: %v, want %v", c.cmd, err, c.want)
		}
	}
	if got, _ := m.Topic("t"); len(got.Replicas) != 5 || got.Config.GetRetentionMs() != 60000 {
		t.Fatalf("a refused alter changed the topic: %+v", got)
	}
}

// DeleteRecords raises a partition's floor, never lowers it, and the
// floor survives a snapshot.
func TestMetadataDeleteRecords(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) (Change, error) {
		i++
		return m.Apply(i, cmd)
	}
	if _, err := apply(register(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(&pb.Command{Kind: &pb.Command_CreateTopic{CreateTopic: &pb.CreateTopic{Name: "t",
		Config: &pb.TopicConfig{Partitions: 2, ReplicationFactor: 1, DefaultMode: 1}, AssignId: true}}}); err != nil {
		t.Fatal(err)
	}
	tp, _ := m.Topic("t")
	del := func(p int32, before int64) *pb.Command {
		return &pb.Command{Kind: &pb.Command_DeleteRecords{DeleteRecords: &pb.DeleteRecords{Name: "t", Id: tp.ID, Partition: p, Before: before}}}
	}
	if ch, err := apply(del(1, 50)); err != nil || ch.Altered.Floor(1) != 50 || ch.Altered.Floor(0) != 0 {
		t.Fatalf("delete below 50: %+v %v", ch.Altered, err)
	}
	if ch, err := apply(del(1, 20)); err != nil || ch.Altered.Floor(1) != 50 {
		t.Fatalf("a lower offset moved the floor: %+v %v", ch.Altered, err)
	}
	if _, err := apply(del(2, 10)); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("a partition the topic lacks: %v", err)
	}
	r := NewMetadata()
	r.Restore(i, m.Snapshot())
	if got, _ := r.Topic("t"); got.Floor(1) != 50 || got.Floor(0) != 0 {
		t.Fatalf("restored floors %v", got.DeletedBefore)
	}
}

// PutTransaction stores a transaction's state if its version is the one
// expected; aborted ranges are kept per partition, survive a snapshot and
// go with their topic.
func TestMetadataTransactions(t *testing.T) {
	m := NewMetadata()
	i := uint64(0)
	apply := func(cmd *pb.Command) error {
		i++
		_, err := m.Apply(i, cmd)
		return err
	}
	put := func(txn *pb.Transaction, prev uint64, aborted ...*pb.AbortedTxn) *pb.Command {
		return &pb.Command{Kind: &pb.Command_PutTransaction{PutTransaction: &pb.PutTransaction{Txn: txn, PrevVersion: prev, Aborted: aborted}}}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(apply(register(1)))
	must(apply(create("t", 1, 1)))
	must(apply(put(&pb.Transaction{Id: "a", ProducerId: 7, State: 1}, 0)))
	v, _ := m.Transaction("a")
	if v.GetVersion() != i || v.GetProducerId() != 7 {
		t.Fatalf("stored %+v", v)
	}
	if err := apply(put(&pb.Transaction{Id: "a", State: 2}, 0)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("a stale version: %v", err)
	}
	must(apply(put(&pb.Transaction{Id: "a", ProducerId: 7, State: 3}, v.GetVersion(),
		&pb.AbortedTxn{Topic: "t", Partition: 0, ProducerId: 7, FirstOffset: 10, LastOffset: 20})))
	if got := m.Aborted(Partition{"t", 0}, 15, 100); len(got) != 1 || got[0].GetLastOffset() != 20 {
		t.Fatalf("aborted overlapping [15, 100): %v", got)
	}
	if got := m.Aborted(Partition{"t", 0}, 21, 100); len(got) != 0 {
		t.Fatalf("aborted overlapping [21, 100): %v", got)
	}
	r := NewMetadata()
	r.Restore(i, m.Snapshot())
	if got, ok := r.Transaction("a"); !ok || got.GetState() != 3 || len(r.Aborted(Partition{"t", 0}, 0, 100)) != 1 {
		t.Fatalf("restored %+v, aborted %v", got, r.Aborted(Partition{"t", 0}, 0, 100))
	}
	must(apply(del("t")))
	if got := m.Aborted(Partition{"t", 0}, 0, 100); len(got) != 0 {
		t.Fatalf("aborted ranges of a deleted topic: %v", got)
	}
}
