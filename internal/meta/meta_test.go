package meta

import (
	"errors"
	"testing"
)

func TestTopicsAndOffsetsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic("orders", []byte(`{"partitions":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic("audit", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	want := []Offset{
		{Group: "billing", Topic: "orders", Partition: 0, Offset: 17},
		{Group: "billing", Topic: "orders", Partition: 2, Offset: 5},
		{Group: "search", Topic: "audit", Partition: 0, Offset: 1 << 40},
	}
	if err := s.CommitOffsets(want); err != nil {
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
	topics, err := s.Topics()
	if err != nil || len(topics) != 2 || string(topics["orders"]) != `{"partitions":3}` {
		t.Fatalf("topics = %q, %v", topics, err)
	}
	got, err := s.AllOffsets()
	if err != nil || len(got) != len(want) {
		t.Fatalf("offsets = %v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("offset %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if o, err := s.CommittedOffset("billing", "orders", 2); err != nil || o != 5 {
		t.Errorf("CommittedOffset = %d, %v", o, err)
	}
	if _, err := s.CommittedOffset("billing", "orders", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing offset err = %v, want ErrNotFound", err)
	}

	if err := s.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.AllOffsets()
	if len(got) != 1 || got[0].Topic != "audit" {
		t.Errorf("after DeleteTopic offsets = %v", got)
	}
}
