package meta

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// The old single-node format is read back as written, and deleting it
// leaves everything else alone.
func TestLegacyKeysReadAndDeleted(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := func(k string, v []byte) {
		if err := s.db.Set([]byte(k), v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	set(topicPrefix+"orders", []byte(`{"partitions":3}`))
	set(topicPrefix+"audit", []byte(`{}`))
	want := []LegacyOffset{
		{Group: "billing", Topic: "orders", Partition: 0, Offset: 17},
		{Group: "billing", Topic: "orders", Partition: 2, Offset: 5},
		{Group: "search", Topic: "audit", Partition: 0, Offset: 1 << 40},
	}
	for _, o := range want {
		set(string(offsetKey(o.Group, o.Topic, o.Partition)), binary.BigEndian.AppendUint64(nil, uint64(o.Offset)))
	}
	if err := s.PutRaftState("orders/0", []byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	topics, err := s.LegacyTopics()
	if err != nil || len(topics) != 2 || string(topics["orders"]) != `{"partitions":3}` {
		t.Fatalf("topics = %q, %v", topics, err)
	}
	got, err := s.LegacyOffsets()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("offsets = %v, %v; want %v", got, err, want)
	}
	if err := s.DeleteLegacy(); err != nil {
		t.Fatal(err)
	}
	if topics, _ := s.LegacyTopics(); topics != nil {
		t.Fatalf("topics left: %q", topics)
	}
	if got, _ := s.LegacyOffsets(); len(got) != 0 {
		t.Fatalf("offsets left: %v", got)
	}
	if st, err := s.RaftState("orders/0"); err != nil || string(st) != "state" {
		t.Fatalf("raft state after DeleteLegacy: %q, %v", st, err)
	}
}

func TestNodeIDAndRaftGroups(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.NodeID(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("node id of a new store: %v", err)
	}
	if err := s.PutNodeID(42); err != nil {
		t.Fatal(err)
	}
	if id, err := s.NodeID(); err != nil || id != 42 {
		t.Fatalf("node id %d, %v", id, err)
	}
	for _, g := range []string{"__meta", "a/0", "a@7/1"} {
		if err := s.PutRaftStateAndSnapshot(g, []byte("s"), []byte("snap")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRaftState("a/0"); err != nil {
		t.Fatal(err)
	}
	groups, err := s.RaftGroups()
	if err != nil || !slices.Equal(groups, []string{"__meta", "a@7/1"}) {
		t.Fatalf("groups %v, %v", groups, err)
	}
	if _, err := s.RaftSnapshot("a/0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot of a deleted group: %v", err)
	}
}
