package replication

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

type fixture struct {
	t    *testing.T
	dir  string
	meta *meta.Store
	log  *partlog.Log
	s    *LogStore
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, dir: t.TempDir()}
	var err error
	if f.meta, err = meta.Open(f.dir, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.meta.Close() })
	f.open()
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	var err error
	if f.log, err = partlog.Open(f.dir+"/log", partlog.Options{SegmentBytes: 64 << 10}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { f.log.Close() })
	if f.s, err = OpenLogStore("t/0", f.log, f.meta); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) reopen() {
	f.t.Helper()
	if err := f.log.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

// dataEntry makes an entry carrying n records whose payloads name it.
func dataEntry(idx, term uint64, n int, p Proposal) *pb.Entry {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Timestamp: 1, Payload: []byte(fmt.Sprintf("i%d-t%d-r%d", idx, term, i))}
	}
	half := n / 2
	var batches [][]byte
	if half > 0 {
		batches = append(batches, record.AppendBatch(nil, 0, recs[:half]))
	}
	batches = append(batches, record.AppendBatch(nil, 0, recs[half:]))
	return &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(term), Type: pb.EntryType_EntryNormal.Enum(),
		Data: EncodeEntry(nil, p, batches...)}
}

func emptyEntry(idx, term uint64) *pb.Entry {
	return &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(term), Type: pb.EntryType_EntryNormal.Enum()}
}

func (f *fixture) append(ents ...*pb.Entry) []Appended {
	f.t.Helper()
	out, err := f.s.Append(ents)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.s.Sync(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// payloads returns the record payloads of an entry's data (nil for an
// entry without batches).
func payloads(t *testing.T, e *pb.Entry) []string {
	_, body, ok := parseEntry(e)
	if !ok {
		return nil
	}
	var out []string
	for len(body) > 0 {
		h, err := record.ValidateBatch(body)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := record.DecodeRecords(nil, body[:h.Size()])
		for _, r := range recs {
			out = append(out, string(r.Payload))
		}
		body = body[h.Size():]
	}
	return out
}

func TestLogStoreAppendReadReopen(t *testing.T) {
	f := newFixture(t)
	app := f.append(emptyEntry(1, 1), dataEntry(2, 1, 3, Proposal{7, 1}), dataEntry(3, 1, 1, Proposal{7, 2}), emptyEntry(4, 2), dataEntry(5, 2, 4, Proposal{}))
	if len(app) != 2 || app[0].First != 0 || app[0].Next != 3 || app[1].First != 3 || app[1].Next != 4 {
		t.Fatalf("appended %+v", app)
	}
	f.s.SetHardState(&pb.HardState{Term: proto.Uint64(2), Vote: proto.Uint64(7), Commit: proto.Uint64(5)})
	if err := f.s.Sync(); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if last, _ := f.s.LastIndex(); last != 5 {
			t.Fatalf("%s: last index %d", when, last)
		}
		for i, want := range []uint64{1, 1, 1, 2, 2} {
			if got, _ := f.s.Term(uint64(i + 1)); got != want {
				t.Fatalf("%s: term(%d) = %d, want %d", when, i+1, got, want)
			}
		}
		ents, err := f.s.Entries(1, 6, 1<<30)
		if err != nil || len(ents) != 5 {
			t.Fatalf("%s: entries = %d, %v", when, len(ents), err)
		}
		if got := payloads(t, ents[1]); len(got) != 3 || got[2] != "i2-t1-r2" {
			t.Fatalf("%s: entry 2 payloads %v", when, got)
		}
		if ents[3].GetData() != nil || ents[3].GetTerm() != 2 {
			t.Fatalf("%s: entry 4 = %v", when, ents[3])
		}
		if got := f.s.OffsetAfter(5); got != 8 {
			t.Fatalf("%s: OffsetAfter(5) = %d", when, got)
		}
		hs, _, _ := f.s.InitialState()
		if hs.GetTerm() != 2 || hs.GetVote() != 7 {
			t.Fatalf("%s: hard state %v", when, hs)
		}
	}
	check("before reopen")
	f.reopen()
	check("after reopen")
	// The stored batches carry their Raft position and dense offsets.
	raw, _ := f.log.Read(0, 1<<20, f.log.NextOffset())
	h, _ := record.ParseBatch(raw)
	if h.RaftIndex != 2 || h.RaftTerm != 1 || h.BaseOffset != 0 {
		t.Fatalf("first stored batch header %+v", h)
	}
}

func TestLogStoreOverwritesConflictingSuffix(t *testing.T) {
	f := newFixture(t)
	f.append(dataEntry(1, 1, 2, Proposal{}), dataEntry(2, 1, 2, Proposal{}), emptyEntry(3, 1), dataEntry(4, 1, 2, Proposal{}))
	// A new leader of term 2 replaces entries from index 2 on.
	app := f.append(dataEntry(2, 2, 5, Proposal{9, 1}), emptyEntry(3, 2))
	if len(app) != 1 || app[0].First != 2 || app[0].Next != 7 {
		t.Fatalf("appended %+v", app)
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen()
		}
		if last, _ := f.s.LastIndex(); last != 3 {
			t.Fatalf("last index %d", last)
		}
		ents, _ := f.s.Entries(2, 4, 1<<30)
		if got := payloads(t, ents[0]); len(got) != 5 || got[0] != "i2-t2-r0" {
			t.Fatalf("entry 2 after overwrite: %v", got)
		}
		if f.log.NextOffset() != 7 {
			t.Fatalf("log next offset %d, want 7", f.log.NextOffset())
		}
	}
}

// A crash after the data log was synced but before the state blob was
// written leaves an entry missing; everything after the gap is cut.
func TestLogStoreCutsAfterAGap(t *testing.T) {
	f := newFixture(t)
	f.append(dataEntry(1, 1, 2, Proposal{}), emptyEntry(2, 1), dataEntry(3, 1, 1, Proposal{}))
	if _, err := f.s.Append([]*pb.Entry{emptyEntry(4, 2), dataEntry(5, 2, 3, Proposal{})}); err != nil {
		t.Fatal(err)
	}
	if err := f.log.Sync(); err != nil { // the data log only: the state blob is lost
		t.Fatal(err)
	}
	f.reopen()
	if last, _ := f.s.LastIndex(); last != 3 {
		t.Fatalf("last index after the crash %d, want 3", last)
	}
	if f.log.NextOffset() != 3 {
		t.Fatalf("log next offset %d, want 3 (entry 5's records cut)", f.log.NextOffset())
	}
}

// TestLogStoreDropsAnEntryCutShort: an entry of two batches of which the
// log kept only the first (a write torn between them, a damaged tail cut
// at recovery) is dropped whole at open: kept, it would stand for the
// whole entry and every later record would sit at another offset than on
// the other replicas (found by the fault campaign).
func TestLogStoreDropsAnEntryCutShort(t *testing.T) {
	f := newFixture(t)
	f.append(dataEntry(1, 1, 2, Proposal{}), dataEntry(2, 1, 4, Proposal{}))
	// Entry 2's batches: offsets [2, 4) and [4, 6). Keep the first only.
	if err := f.log.Truncate(4); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if last, _ := f.s.LastIndex(); last != 1 {
		t.Fatalf("last index %d, want 1 (entry 2 cut short)", last)
	}
	if f.log.NextOffset() != 2 {
		t.Fatalf("log next offset %d, want 2 (entry 2's first batch dropped too)", f.log.NextOffset())
	}
	// A whole entry of two batches stays.
	f.append(dataEntry(2, 2, 4, Proposal{}))
	f.reopen()
	if last, _ := f.s.LastIndex(); last != 2 || f.log.NextOffset() != 6 {
		t.Fatalf("after a whole entry: last index %d, next offset %d, want 2 and 6", last, f.log.NextOffset())
	}
	ents, err := f.s.Entries(2, 3, 1<<20)
	if err != nil || len(ents) != 1 || len(payloads(t, ents[0])) != 4 {
		t.Fatalf("entry 2: %v, %v", ents, err)
	}
}

func TestLogStoreEntriesMaxSize(t *testing.T) {
	f := newFixture(t)
	f.append(dataEntry(1, 1, 10, Proposal{}), dataEntry(2, 1, 10, Proposal{}), dataEntry(3, 1, 10, Proposal{}))
	ents, err := f.s.Entries(1, 4, 1)
	if err != nil || len(ents) != 1 {
		t.Fatalf("maxSize 1: %d entries, %v (want exactly one)", len(ents), err)
	}
	if _, err := f.s.Entries(1, 5, 1<<30); err != raft.ErrUnavailable {
		t.Fatalf("past the end: %v", err)
	}
}

// A random mix of appends and overwrites gives the same terms and entry
// contents as raft's own MemoryStorage, before and after a reopen.
func TestLogStoreMatchesMemoryStorage(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			f := newFixture(t)
			ref := raft.NewMemoryStorage()
			term := uint64(1)
			for step := 0; step < 60; step++ {
				last, _ := ref.LastIndex()
				from := last + 1
				if last > 0 && rng.Intn(4) == 0 { // a new leader overwrites a suffix
					term++
					from = 1 + uint64(rng.Int63n(int64(last)))
				}
				var ents []*pb.Entry
				for i := 0; i < 1+rng.Intn(4); i++ {
					idx := from + uint64(i)
					if rng.Intn(5) == 0 {
						ents = append(ents, emptyEntry(idx, term))
					} else {
						ents = append(ents, dataEntry(idx, term, 1+rng.Intn(5), Proposal{}))
					}
				}
				refEnts := make([]*pb.Entry, len(ents))
				for i, e := range ents {
					refEnts[i] = proto.Clone(e).(*pb.Entry)
				}
				ref.Append(refEnts)
				f.append(ents...)
				if step%20 == 19 {
					f.reopen()
				}
				compareStores(t, f.s, ref)
			}
		})
	}
}

func compareStores(t *testing.T, s *LogStore, ref *raft.MemoryStorage) {
	t.Helper()
	last, _ := ref.LastIndex()
	if got, _ := s.LastIndex(); got != last {
		t.Fatalf("last index %d, reference %d", got, last)
	}
	first, _ := ref.FirstIndex()
	want, _ := ref.Entries(first, last+1, 1<<30)
	// From a cold entry on, Entries returns cold entries only: ask again,
	// as raft does.
	var got []*pb.Entry
	for lo := first; lo <= last; {
		ents, err := s.Entries(lo, last+1, 1<<30)
		if err != nil || len(ents) == 0 {
			t.Fatalf("entries from %d: %d, %v", lo, len(ents), err)
		}
		got, lo = append(got, ents...), lo+uint64(len(ents))
	}
	if len(got) != len(want) {
		t.Fatalf("entries: %d; reference %d", len(got), len(want))
	}
	for i := range want {
		if got[i].GetTerm() != want[i].GetTerm() || got[i].GetIndex() != want[i].GetIndex() {
			t.Fatalf("entry %d: (%d,%d) reference (%d,%d)", i+1, got[i].GetIndex(), got[i].GetTerm(), want[i].GetIndex(), want[i].GetTerm())
		}
		g, w := payloads(t, got[i]), payloads(t, want[i])
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("entry %d payloads %v, reference %v", i+1, g, w)
		}
	}
	// Offsets are dense over the data entries.
	var next int64
	for i := first; i <= last; i++ {
		if off := s.OffsetAfter(i); off < next {
			t.Fatalf("offset after %d went back: %d < %d", i, off, next)
		} else {
			next = off
		}
	}
}

func confEntry(idx, term, node uint64) *pb.Entry {
	data, _ := proto.Marshal(&pb.ConfChange{Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: proto.Uint64(node)})
	return &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(term), Type: pb.EntryType_EntryConfChange.Enum(), Data: data}
}

// A commit is persisted before the entries it covers are applied. When the
// process dies in between, the configuration changes among them are not
// in the persisted ConfState: the replica must apply them again, not start
// as applied up to the commit with a configuration lacking them (a node
// then missing from its own group cannot campaign, and a move waiting to
// transfer leadership to it never ends).
func TestLogStoreAppliedStopsBeforeUnappliedConfChange(t *testing.T) {
	f := newFixture(t)
	f.append(confEntry(1, 1, 1), confEntry(2, 1, 2), dataEntry(3, 1, 2, Proposal{}))
	f.s.SetHardState(&pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(3)})
	if err := f.s.Sync(); err != nil {
		t.Fatal(err)
	}
	f.reopen() // died before applying: the ConfState is still empty
	if got := f.s.Applied(); got != 0 {
		t.Fatalf("applied %d with the changes at 1 and 2 not in the ConfState, want 0", got)
	}

	f.s.SetConfState(&pb.ConfState{Voters: []uint64{1}}, 1)
	if err := f.s.Sync(); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if got := f.s.Applied(); got != 1 {
		t.Fatalf("applied %d with the change at 2 not in the ConfState, want 1", got)
	}

	f.s.SetConfState(&pb.ConfState{Voters: []uint64{1, 2}}, 2)
	if err := f.s.Sync(); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if got := f.s.Applied(); got != 3 {
		t.Fatalf("applied %d with every change in the ConfState, want the commit 3", got)
	}
	if _, cs, _ := f.s.InitialState(); len(cs.GetVoters()) != 2 {
		t.Fatalf("voters after reopen: %v", cs.GetVoters())
	}
}

// A state written before confIndex existed (version 1) reads as consistent
// up to its commit, as that version assumed; one written before catchUp
// existed (version 2) reads with none; catchUp round-trips.
func TestRaftStateVersions(t *testing.T) {
	st := newRaftState()
	st.hard.Commit = proto.Uint64(7)
	st.conf.Voters = []uint64{1, 2, 3}
	st.compactIndex, st.compactTerm, st.compactOffset = 4, 2, 100
	enc, err := st.encode()
	if err != nil {
		t.Fatal(err)
	}
	// Version 4 puts confIndex, catchUp and the compactConf flag (one
	// uvarint byte each: 0) after compactOffset; version 3 has no flag,
	// version 2 no catchUp either, version 1 no confIndex either.
	head := func(v uint64) []byte {
		return binary.AppendVarint(binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil, v), 4), 2), 100)
	}
	h4 := head(4)
	if string(enc[:len(h4)]) != string(h4) || enc[len(h4)] != 0 || enc[len(h4)+1] != 0 || enc[len(h4)+2] != 0 {
		t.Fatalf("unexpected version 4 layout % x", enc)
	}
	rest := enc[len(h4)+3:]
	v1 := append(head(1), rest...)
	got, err := decodeState(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.confIndex != 7 || got.compactOffset != 100 || len(got.conf.GetVoters()) != 3 || got.catchUp != 0 {
		t.Fatalf("version 1 state read as confIndex %d, offset %d, voters %v, catchUp %d", got.confIndex, got.compactOffset, got.conf.GetVoters(), got.catchUp)
	}
	v2 := append(append(head(2), 5), rest...)
	if got, err = decodeState(v2); err != nil || got.confIndex != 5 || got.catchUp != 0 || got.hard.GetCommit() != 7 {
		t.Fatalf("version 2 state read as %+v, %v", got, err)
	}
	v3 := append(append(head(3), 5, 9), rest...)
	if got, err = decodeState(v3); err != nil || got.confIndex != 5 || got.catchUp != 9 || got.compactConf != nil {
		t.Fatalf("version 3 state read as %+v, %v", got, err)
	}
	st.catchUp = 1234
	if enc, err = st.encode(); err != nil {
		t.Fatal(err)
	}
	st.compactConf = &pb.ConfState{Voters: []uint64{1, 2, 3}}
	st.side[5] = &pb.Entry{Index: proto.Uint64(5), Term: proto.Uint64(2)}
	if enc, err = st.encode(); err != nil {
		t.Fatal(err)
	}
	if got, err = decodeState(enc); err != nil || got.catchUp != 1234 || len(got.compactConf.GetVoters()) != 3 || len(got.side) != 1 {
		t.Fatalf("version 4 read back as %+v, %v", got, err)
	}
}

// TestLogStoreEpochEnd: for a term, the largest term at or below it in
// the log and the offset after its last entry's records.
func TestLogStoreEpochEnd(t *testing.T) {
	f := newFixture(t)
	f.open()
	// Terms 1 (3 records), 3 (2 records), 5 (4 records, then an empty
	// entry of term 5).
	f.append(dataEntry(1, 1, 3, Proposal{}), dataEntry(2, 3, 2, Proposal{}), dataEntry(3, 5, 4, Proposal{}), emptyEntry(4, 5))
	for _, c := range []struct {
		e    uint64
		term uint64
		end  int64
		ok   bool
	}{
		{0, 0, 0, false}, // older than the log
		{1, 1, 3, true},
		{2, 1, 3, true}, // no entry of term 2: term 1's end
		{3, 3, 5, true},
		{4, 3, 5, true},
		{5, 5, 9, true}, // the current term: the log's end
		{9, 5, 9, true}, // a future term: the same
	} {
		term, end, ok := f.s.EpochEnd(c.e)
		if term != c.term || end != c.end || ok != c.ok {
			t.Errorf("EpochEnd(%d) = %d, %d, %v; want %d, %d, %v", c.e, term, end, ok, c.term, c.end, c.ok)
		}
	}
}

// The snapshot at the compaction point carries the configuration as of
// that point, not the current one: a replica that installs it replays the
// changes after it (a replica added after a node was removed and another
// came back got the node removed long ago among its voters, and refused
// the real leader's messages: a replica move never finished).
func TestSnapshotCarriesTheCompactionPointsConfiguration(t *testing.T) {
	f := newFixture(t)
	f.append(confEntry(1, 1, 1), confEntry(2, 1, 2), confEntry(3, 1, 3), dataEntry(4, 1, 2, Proposal{}))
	for i, v := range [][]uint64{{1}, {1, 2}, {1, 2, 3}} {
		f.s.SetConfState(&pb.ConfState{Voters: v}, uint64(i+1))
	}
	if err := f.s.Compact(4, []byte("state at 4")); err != nil {
		t.Fatal(err)
	}
	// Later: node 7 comes and 3 goes, 3 comes back and 7 goes, 8 comes.
	f.append(confEntry(5, 1, 7), confEntry(6, 1, 3), dataEntry(7, 1, 2, Proposal{}), confEntry(8, 1, 3), confEntry(9, 1, 7), confEntry(10, 1, 8))
	for i, v := range [][]uint64{{1, 2, 3, 7}, {1, 2, 7}, nil, {1, 2, 3, 7}, {1, 2, 3}, {1, 2, 3, 8}} {
		if v != nil {
			f.s.SetConfState(&pb.ConfState{Voters: v}, uint64(i+5))
		}
	}
	want := []uint64{1, 2, 3}
	snapVoters := func() []uint64 {
		snap, err := f.s.Snapshot()
		if err != nil || snap.GetMetadata().GetIndex() != 4 {
			t.Fatalf("snapshot: %+v, %v", snap.GetMetadata(), err)
		}
		return snap.GetMetadata().GetConfState().GetVoters()
	}
	if got := snapVoters(); !slices.Equal(got, want) {
		t.Fatalf("snapshot at 4 carries voters %v, want %v (the configuration then)", got, want)
	}
	if err := f.s.Sync(); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if got := snapVoters(); !slices.Equal(got, want) {
		t.Fatalf("after a reopen the snapshot at 4 carries voters %v, want %v", got, want)
	}
	if _, cs, _ := f.s.InitialState(); !slices.Equal(cs.GetVoters(), []uint64{1, 2, 3, 8}) {
		t.Fatalf("current voters %v", cs.GetVoters())
	}
	// Compacting past the moves: the configuration then is the current one.
	if err := f.s.Compact(10, []byte("state at 10")); err != nil {
		t.Fatal(err)
	}
	snap, _ := f.s.Snapshot()
	if got := snap.GetMetadata().GetConfState().GetVoters(); !slices.Equal(got, []uint64{1, 2, 3, 8}) {
		t.Fatalf("snapshot at 10 carries voters %v", got)
	}
}

// A window whose committed entries turned cold (their positions looked up
// in the log) answers every question as raft's MemoryStorage and a model
// of the offsets do, through appends, overwrites of the uncommitted tail,
// commits, compactions and reopens.
func TestLogStoreColdWindow(t *testing.T) {
	defer func(n int) { hotEntries = n }(hotEntries)
	hotEntries = 0
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			f := newFixture(t)
			ref := raft.NewMemoryStorage()
			recs := []int{0} // records per index (index 0: none)
			term, commit, cold := uint64(1), uint64(0), 0
			for step := 0; step < 300; step++ {
				last, _ := ref.LastIndex()
				from := last + 1
				if last > commit && rng.Intn(5) == 0 { // a new leader overwrites the uncommitted tail
					term++
					from = commit + 1 + uint64(rng.Int63n(int64(last-commit)))
				} else if rng.Intn(8) == 0 {
					term++
				}
				var ents []*pb.Entry
				recs = recs[:from]
				for i := 0; i < 1+rng.Intn(4); i++ {
					idx := from + uint64(i)
					n := 0
					if rng.Intn(5) == 0 {
						ents = append(ents, emptyEntry(idx, term))
					} else {
						n = 1 + rng.Intn(5)
						ents = append(ents, dataEntry(idx, term, n, Proposal{}))
					}
					recs = append(recs, n)
				}
				refEnts := make([]*pb.Entry, len(ents))
				for i, e := range ents {
					refEnts[i] = proto.Clone(e).(*pb.Entry)
				}
				if err := ref.Append(refEnts); err != nil {
					t.Fatal(err)
				}
				f.append(ents...)
				last, _ = ref.LastIndex()
				if rng.Intn(3) > 0 {
					commit = last
				} else {
					commit += uint64(rng.Int63n(int64(last-commit) + 1))
				}
				f.s.SetHardState(&pb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(commit)})
				if err := f.s.Sync(); err != nil {
					t.Fatal(err)
				}
				if f.s.hot > f.s.first {
					cold++
				}
				switch rng.Intn(25) {
				case 0:
					f.reopen()
					f.s.SetHardState(&pb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(commit)})
				case 1, 2: // retention up to a random offset
					first, _ := ref.FirstIndex()
					end := sumRecs(recs, last)
					offset := sumRecs(recs, first-1) + rng.Int63n(end-sumRecs(recs, first-1)+1)
					want := first - 1
					for i := first; i <= commit && sumRecs(recs, i) <= offset; i++ {
						want = i
					}
					got, err := f.s.CompactBefore(offset, commit, []byte("state"))
					if err != nil || got != want {
						t.Fatalf("CompactBefore(%d, %d) = %d, %v; want %d", offset, commit, got, err, want)
					}
					if want >= first {
						if err := ref.Compact(want); err != nil {
							t.Fatal(err)
						}
					}
				}
				compareStores(t, f.s, ref)
				checkColdWindow(t, f.s, ref, recs, rng)
			}
			if cold == 0 {
				t.Fatal("no entry turned cold")
			}
		})
	}
}

// sumRecs is the offset after index i's records.
func sumRecs(recs []int, i uint64) int64 {
	var n int64
	for _, r := range recs[:i+1] {
		n += int64(r)
	}
	return n
}

// checkColdWindow compares terms, offsets, epochs and size-bounded reads
// of s with the reference and the record counts.
func checkColdWindow(t *testing.T, s *LogStore, ref *raft.MemoryStorage, recs []int, rng *rand.Rand) {
	t.Helper()
	first, _ := ref.FirstIndex()
	last, _ := ref.LastIndex()
	if got, _ := s.FirstIndex(); got != first {
		t.Fatalf("first index %d, reference %d", got, first)
	}
	for i := first - 1; i <= last; i++ {
		want, _ := ref.Term(i)
		if got, err := s.Term(i); err != nil || got != want {
			t.Fatalf("Term(%d) = %d, %v; want %d", i, got, err, want)
		}
		if got := s.OffsetAfter(i); i >= first && got != sumRecs(recs, i) {
			t.Fatalf("OffsetAfter(%d) = %d; want %d", i, got, sumRecs(recs, i))
		}
	}
	lastTerm, _ := ref.Term(last)
	for e := uint64(0); e <= lastTerm+1; e++ {
		wantTerm, wantEnd, wantOK := uint64(0), int64(0), false
		for i := last; i >= first; i-- {
			if tm, _ := ref.Term(i); tm <= e {
				wantTerm, wantEnd, wantOK = tm, sumRecs(recs, i), true
				break
			}
		}
		if ct, _ := ref.Term(first - 1); !wantOK && ct > 0 && ct <= e {
			wantTerm, wantEnd, wantOK = ct, sumRecs(recs, first-1), true
		}
		if tm, end, ok := s.EpochEnd(e); tm != wantTerm || end != wantEnd || ok != wantOK {
			t.Fatalf("EpochEnd(%d) = %d, %d, %v; want %d, %d, %v", e, tm, end, ok, wantTerm, wantEnd, wantOK)
		}
	}
	if last < first {
		return
	}
	lo := first + uint64(rng.Int63n(int64(last-first+1)))
	max := uint64(rng.Intn(200))
	got, err := s.Entries(lo, last+1, max)
	if err != nil || len(got) == 0 {
		t.Fatalf("Entries(%d, %d, %d): %d, %v", lo, last+1, max, len(got), err)
	}
	want, _ := ref.Entries(lo, last+1, 1<<30)
	var size uint64
	for i, e := range got {
		if e.GetIndex() != lo+uint64(i) || e.GetTerm() != want[i].GetTerm() || fmt.Sprint(payloads(t, e)) != fmt.Sprint(payloads(t, want[i])) {
			t.Fatalf("Entries(%d, %d, %d): entry %d differs", lo, last+1, max, i)
		}
		if size += uint64(len(e.GetData())); i > 0 && size > max {
			t.Fatalf("Entries(%d, %d, %d): %d bytes in %d entries", lo, last+1, max, size, i+1)
		}
	}
	if _, err := s.Entries(first-1, last+1, 1<<30); first > 1 && err != raft.ErrCompacted {
		t.Fatalf("below the window: %v", err)
	}
}

// Committed entries turn cold a whole chunk at a time, past hotEntries
// kept in memory, while running and when a log is opened: the entries in
// memory stay bounded however long the log, and every entry still has its
// term and offsets.
func TestLogStoreKeepsHotEntriesBounded(t *testing.T) {
	defer func(n int) { hotEntries = n }(hotEntries)
	hotEntries = posChunk
	f := newFixture(t)
	const n = 3*posChunk + 100
	var ents []*pb.Entry
	for i := uint64(1); i <= n; i++ {
		term := 1 + i/5000 // runs of terms across chunks
		if i%7 == 0 {
			ents = append(ents, emptyEntry(i, term))
		} else {
			ents = append(ents, dataEntry(i, term, 1, Proposal{}))
		}
		if len(ents) == 512 || i == n {
			f.append(ents...)
			f.s.SetHardState(&pb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(i)})
			ents = nil
		}
	}
	check := func(when string) {
		t.Helper()
		if err := f.s.Sync(); err != nil {
			t.Fatal(err)
		}
		hot := f.s.ents.len()
		if hot < hotEntries || hot >= hotEntries+posChunk || f.s.hot != n-uint64(hot)+1 {
			t.Fatalf("%s: %d entries in memory from %d, want [%d, %d)", when, hot, f.s.hot, hotEntries, hotEntries+posChunk)
		}
		var end int64
		for i := uint64(1); i <= n; i++ {
			if i%7 != 0 {
				end++
			}
			if tm, err := f.s.Term(i); err != nil || tm != 1+i/5000 {
				t.Fatalf("%s: Term(%d) = %d, %v", when, i, tm, err)
			}
			if i%97 == 0 || i == f.s.hot-1 || i == f.s.hot {
				if got := f.s.OffsetAfter(i); got != end {
					t.Fatalf("%s: OffsetAfter(%d) = %d, want %d", when, i, got, end)
				}
			}
		}
	}
	check("running")
	f.reopen()
	f.s.SetHardState(&pb.HardState{Term: proto.Uint64(1 + n/5000), Commit: proto.Uint64(n)})
	check("reopened")
}
