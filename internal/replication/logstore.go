// Package replication makes a partition a Raft group: LogStore is the
// group's raft.Storage over the partition's own data log, so a record is
// written once, as the batch it arrived in, on every replica.
package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/dedup"
	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

// kindBatches marks entry data that carries record batches.
const kindBatches byte = 1

// envelopeSize is the prefix of a batches entry: kind, proposer node id,
// proposal id.
const envelopeSize = 1 + 8 + 8

// Proposal names who proposed an entry: a node and its own counter. The
// zero Proposal is anonymous (an entry read back from storage).
type Proposal struct {
	Node uint64
	ID   uint64
}

// EncodeEntry appends to dst the data of an entry carrying batches.
//
// REQUIRES: each batch is one whole, valid record batch.
func EncodeEntry(dst []byte, p Proposal, batches ...[]byte) []byte {
	dst = append(dst, kindBatches)
	dst = binary.LittleEndian.AppendUint64(dst, p.Node)
	dst = binary.LittleEndian.AppendUint64(dst, p.ID)
	for _, b := range batches {
		dst = append(dst, b...)
	}
	return dst
}

// parseEntry splits an entry carrying batches; ok is false for any other
// entry (an empty entry, a configuration change).
func parseEntry(e *pb.Entry) (p Proposal, body []byte, ok bool) {
	d := e.GetData()
	if e.GetType() != pb.EntryType_EntryNormal || len(d) < envelopeSize || d[0] != kindBatches {
		return Proposal{}, nil, false
	}
	p.Node = binary.LittleEndian.Uint64(d[1:])
	p.ID = binary.LittleEndian.Uint64(d[9:])
	return p, d[envelopeSize:], true
}

// entryPos locates one entry of the index window.
type entryPos struct {
	term uint64
	// off and next bound the entry's records: offsets [off, next). For an
	// entry without records off == next, the offset where it stands.
	off, next int64
	bytes     int32 // the size of the entry's batches in the log (bounded by maxNodeMessageBytes)
	side      bool  // the entry carries no records; its data is in raftState.side
	// cut: at open, the entry's last batch in the log says more follow
	// (EntryFollowing): the rest was lost (a torn write, a damaged tail).
	cut bool
}

// Appended describes an entry carrying batches that Append stored.
type Appended struct {
	Index, Term uint64
	Proposal    Proposal
	// Offsets [First, Next) are the entry's records.
	First, Next int64
}

// LogStore is a partition's Raft log. Entries that carry batches are their
// batches in the partition log (raftTerm, raftIndex and baseOffset set when
// they are persisted); other entries, the HardState, the ConfState and the
// compaction point are a small state blob in the node's meta store.
//
// It implements raft.Storage. The partition's Ready loop is its only
// writer (Append, SetHardState, Sync); the raft.Storage methods are called
// by the same goroutine through RawNode, and the read methods may be called
// by others (mu guards the index).
type LogStore struct {
	group  string
	log    *partlog.Log
	meta   *meta.Store
	logger *slog.Logger

	mu sync.Mutex
	st *raftState
	// first is the index of the window's first entry. Invariant:
	// first == st.compactIndex+1.
	first uint64
	// The window is in two parts. Entries [first, hot) are cold: only
	// their terms are in memory (coldTerms); their positions are found in
	// the partition log, by the Raft index each batch header carries
	// (coldStart). Entries [hot, last] have their positions in ents. Only
	// committed entries already in the log turn cold (freeze), so a cold
	// entry is never truncated, and a replica's memory does not grow with
	// its log.
	hot  uint64
	ents posIndex
	// coldEnd is the offset after the cold entries' records: where ents'
	// first entry starts (st.compactOffset while no entry is cold).
	coldEnd int64
	// coldTerms holds the first index of each run of one term among the
	// cold entries, in index order.
	coldTerms []indexTerm
	// dirty: st changed in a way that must be durable before the next
	// messages are sent (term, vote, side entries, compaction point), or
	// the commit moved commitPersistEvery entries past savedCommit.
	dirty bool
	// savedCommit is the commit index last written with the state.
	savedCommit uint64
	// recent holds the newest appended entries, so appends to followers
	// are built from memory instead of read back from the log.
	recent entryCache
	// confs are the configurations SetConfState recorded in this process
	// since the compaction point, by the index of their change (confAt).
	confs map[uint64]*pb.ConfState
	// snap is the owner's state at the compaction point (see Compact),
	// nil before the first compaction.
	snap []byte
	// dedup, when set, learns every batch appended (and forgets those cut
	// off), so this replica recognises retried publishes once it leads.
	// Used by the Ready loop's goroutine only.
	dedup *dedup.Window
}

// indexTerm starts a run of entries of one term.
type indexTerm struct{ index, term uint64 }

// hotEntries is how many entry positions a LogStore keeps in memory at
// least (13 bytes each, about 210 KiB): appends to followers that keep
// up, commits, applies and truncations only ever look at these. Older
// committed entries are looked up in the log (a binary search over batch
// headers), which only a follower far behind, a compaction or an old
// leader epoch asks for. A variable for tests.
var hotEntries = 4 * posChunk

// SetDedup makes w follow the batches of this log from now on. Call it
// before the replica starts, with w filled from the log as it stands.
func (s *LogStore) SetDedup(w *dedup.Window) { s.dedup = w }

// entryCacheBytes bounds the recent entries kept per group.
const entryCacheBytes = 16 << 20

// entryCache is a window of consecutive recent entries, bounded by the
// bytes of their data. The entries are shared, never modified: their
// batches were rebased before they were added. Lock: LogStore.mu.
type entryCache struct {
	ents  []*pb.Entry
	bytes int
}

func (c *entryCache) add(e *pb.Entry) {
	if n := len(c.ents); n > 0 && c.ents[n-1].GetIndex()+1 != e.GetIndex() {
		c.ents, c.bytes = nil, 0
	}
	c.ents = append(c.ents, e)
	c.bytes += len(e.GetData())
	drop := 0
	for c.bytes > entryCacheBytes && drop < len(c.ents)-1 {
		c.bytes -= len(c.ents[drop].GetData())
		c.ents[drop] = nil
		drop++
	}
	c.ents = c.ents[drop:]
}

// dropThrough drops cached entries up to index idx.
func (c *entryCache) dropThrough(idx uint64) {
	drop := 0
	for drop < len(c.ents) && c.ents[drop].GetIndex() <= idx {
		c.bytes -= len(c.ents[drop].GetData())
		c.ents[drop] = nil
		drop++
	}
	c.ents = c.ents[drop:]
}

// truncateFrom drops cached entries from index idx on.
func (c *entryCache) truncateFrom(idx uint64) {
	for n := len(c.ents); n > 0 && c.ents[n-1].GetIndex() >= idx; n = len(c.ents) {
		c.bytes -= len(c.ents[n-1].GetData())
		c.ents[n-1] = nil
		c.ents = c.ents[:n-1]
	}
}

// get returns the cached entries [lo, hi) within maxSize (at least one),
// or false when the cache does not hold lo.
func (c *entryCache) get(lo, hi, maxSize uint64) ([]*pb.Entry, bool) {
	if len(c.ents) == 0 || lo < c.ents[0].GetIndex() || hi-1 > c.ents[len(c.ents)-1].GetIndex() {
		return nil, false
	}
	first := lo - c.ents[0].GetIndex()
	var out []*pb.Entry
	var size uint64
	for _, e := range c.ents[first : first+(hi-lo)] {
		size += uint64(len(e.GetData()))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, true
}

var _ raft.Storage = (*LogStore)(nil)

// OpenLogStore opens the Raft log of the group over log, rebuilding the
// index from the batch headers after the compaction point. An incomplete
// tail (a crash between writing the data log and the state) is cut back to
// the longest contiguous run of entries: nothing after it had been
// reported as persisted.
func OpenLogStore(group string, log *partlog.Log, ms *meta.Store, logger ...*slog.Logger) (*LogStore, error) {
	st := newRaftState()
	if enc, err := ms.RaftState(group); err == nil {
		if st, err = decodeState(enc); err != nil {
			return nil, fmt.Errorf("raft state of %s: %w", group, err)
		}
	} else if !errors.Is(err, meta.ErrNotFound) {
		return nil, err
	}
	s := &LogStore{group: group, log: log, meta: ms, st: st, first: st.compactIndex + 1, hot: st.compactIndex + 1,
		coldEnd: st.compactOffset, savedCommit: st.hard.GetCommit(), logger: slog.Default()}
	if len(logger) > 0 && logger[0] != nil {
		s.logger = logger[0]
	}
	if st.compactIndex > 0 {
		snap, err := ms.RaftSnapshot(group)
		if err != nil {
			return nil, fmt.Errorf("snapshot of %s at index %d: %w", group, st.compactIndex, err)
		}
		s.snap = snap
	}
	if log.NextOffset() < st.compactOffset || log.StartOffset() > st.compactOffset {
		// A snapshot was installed but the crash came before the log was
		// reset to it.
		if err := log.Reset(st.compactOffset); err != nil {
			return nil, fmt.Errorf("%s: reset the log to the snapshot at offset %d: %w", group, st.compactOffset, err)
		}
	}
	if err := s.rebuild(); err != nil {
		return nil, err
	}
	if last := s.lastIndex(); st.hard.GetCommit() > last {
		// Entries known committed are gone (a damaged or cut log): this
		// replica acknowledged them, so it must not vote before it holds
		// them again (CatchUp).
		s.logger.Warn("this replica lost committed entries: it votes again once it holds them", "group", group,
			"last", last, "committed", st.hard.GetCommit())
		st.catchUp = max(st.catchUp, st.hard.GetCommit())
		st.hard.Commit = proto.Uint64(last)
		s.dirty = true
	}
	return s, nil
}

// CatchUp is the index this replica must hold before it may vote or stand
// for election again; 0 when it may. See NeedCatchUp.
func (s *LogStore) CatchUp() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.catchUp
}

// NeedCatchUp records that this replica lost entries it acknowledged, up
// to index at least (a leader commits past its log): until its log holds
// index again, it neither votes nor campaigns, so that no election it
// takes part in can choose a leader without them. Durable at the next
// Sync; cleared by the Sync after which the log holds index.
func (s *LogStore) NeedCatchUp(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index > s.st.catchUp {
		s.st.catchUp = index
		s.dirty = true
	}
}

// rebuild lays out the index window from the compaction point on, from
// the batch headers in the log (grouped by their Raft index) and the side
// entries, and cuts whatever follows a gap or an entry cut short. The
// window's committed entries turn cold as it goes, so opening a long log
// takes no more memory than running over it.
func (s *LogStore) rebuild() error {
	// cur is the entry whose batches are being read (index curIdx, 0:
	// none yet).
	var cur entryPos
	var curIdx uint64
	stopped := false
	// take places the entry read before the next one, after the side
	// entries before it; false when it does not continue the window.
	take := func() bool {
		s.pushSides(curIdx)
		if curIdx != s.lastIndex()+1 || cur.off != s.nextOffset() {
			return false
		}
		if cur.cut {
			// Only part of the entry's batches is here: it is dropped
			// whole (cut below), and the leader sends it again.
			s.logger.Warn("an entry cut short at the end of the log is dropped; the leader sends it again", "group", s.group,
				"index", curIdx, "offsets", fmt.Sprintf("[%d, %d)", cur.off, cur.next))
			return false
		}
		s.ents.push(cur)
		s.freeze()
		return true
	}
	end := s.log.NextOffset()
scan:
	for off := s.st.compactOffset; off < end; {
		raw, err := s.log.Read(off, 4<<20, end)
		if err != nil {
			return fmt.Errorf("scan %s at %d: %w", s.group, off, err)
		}
		for len(raw) > 0 {
			h, err := record.ParseHeader(raw)
			if err != nil {
				return fmt.Errorf("scan %s at %d: %w", s.group, off, err)
			}
			if h.RaftIndex == 0 {
				return fmt.Errorf("%s: the batch at offset %d was not written by replication", s.group, h.BaseOffset)
			}
			if h.RaftIndex != curIdx || h.BaseOffset != cur.next {
				if curIdx != 0 && !take() {
					stopped = true
					break scan
				}
				cur, curIdx = entryPos{term: h.RaftTerm, off: h.BaseOffset}, h.RaftIndex
			}
			cur.next = h.NextOffset()
			cur.bytes += int32(h.Size())
			cur.cut = h.EntryFollowing > 0
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	if curIdx != 0 && !stopped {
		take()
	}
	s.pushSides(math.MaxUint64)
	last, next := s.lastIndex(), s.nextOffset()
	for i := range s.st.side {
		if i > last {
			delete(s.st.side, i)
			s.dirty = true
		}
	}
	if next < s.log.NextOffset() {
		if err := s.log.Truncate(next); err != nil {
			return fmt.Errorf("%s: cut the log after index %d: %w", s.group, last, err)
		}
	}
	if s.dirty {
		return s.saveState()
	}
	return nil
}

// pushSides appends to the window the side entries that follow it, up to
// index below (excluded), while they follow on. Lock: mu held (or s not
// yet shared).
func (s *LogStore) pushSides(below uint64) {
	for i := s.lastIndex() + 1; i < below; i++ {
		e, ok := s.st.side[i]
		if !ok {
			return
		}
		s.ents.push(entryPos{term: e.GetTerm(), off: s.nextOffset(), next: s.nextOffset(), side: true})
	}
}

func (s *LogStore) lastIndex() uint64 { return s.hot + uint64(s.ents.len()) - 1 }

// nextOffset is the partition offset after the last entry's records.
func (s *LogStore) nextOffset() int64 {
	if s.ents.len() == 0 {
		return s.coldEnd
	}
	return s.ents.start(s.ents.len())
}

// freeze turns the window's oldest positions cold, a chunk at a time,
// while more than hotEntries would stay and the chunk is committed. Its
// entries must be in the log (readable): Flush, or at open.
// Lock: mu held.
func (s *LogStore) freeze() {
	commit := s.st.hard.GetCommit()
	for {
		k := s.ents.headChunk()
		if k == 0 || s.ents.len()-k < hotEntries || s.hot+uint64(k)-1 > commit {
			return
		}
		for i := range k {
			if t := s.ents.term(i); len(s.coldTerms) == 0 || s.coldTerms[len(s.coldTerms)-1].term != t {
				s.coldTerms = append(s.coldTerms, indexTerm{s.hot + uint64(i), t})
			}
		}
		s.coldEnd = s.ents.start(k)
		s.ents.dropFront(k)
		s.hot += uint64(k)
	}
}

// term returns the term of entry i. REQUIRES: first <= i <= lastIndex.
// Lock: mu held.
func (s *LogStore) term(i uint64) uint64 {
	if i >= s.hot {
		return s.ents.term(int(i - s.hot))
	}
	r := sort.Search(len(s.coldTerms), func(r int) bool { return s.coldTerms[r].index > i })
	return s.coldTerms[r-1].term
}

// start returns the first offset of entry i: where its records begin, or
// for a record-less entry where it stands. A cold entry's is looked up
// in the log: the first batch of an index at or above i, found by a
// binary search over offsets that reads one batch header a step (a
// segment's offset index finds each). REQUIRES: first <= i <=
// lastIndex+1. Lock: mu held.
func (s *LogStore) start(i uint64) (int64, error) {
	switch {
	case i > s.hot:
		return s.ents.start(int(i - s.hot)), nil
	case i == s.hot:
		return s.coldEnd, nil // ents' base, also when ents is empty
	case i <= s.first:
		return s.st.compactOffset, nil
	}
	// Batches below lo are of indexes below i, those from hi on of i or
	// above; lo and hi are batch boundaries.
	lo, hi := s.st.compactOffset, s.coldEnd
	for lo < hi {
		h, err := s.log.HeaderAt(lo + (hi-lo)/2)
		if err != nil {
			return 0, fmt.Errorf("%s: look up index %d: %w", s.group, i, err)
		}
		if h.RaftIndex >= i {
			hi = h.BaseOffset
		} else {
			lo = h.NextOffset()
		}
	}
	return lo, nil
}

// Append stores entries from a Ready, cutting a conflicting suffix first.
// It writes without syncing: Flush, then sync, before what waits for them
// (raft's responses) goes out.
// It returns where the batches of proposed entries went.
//
// The batches are rebased in place, inside the entries' data: raft never
// reads Data of a normal entry, every replica rewrites the same fields to
// the same values for committed entries, and this happens before the
// Ready's messages (which may carry the same entries) are sent. The log
// keeps the bytes (AppendShared); nothing modifies them afterwards.
func (s *LogStore) Append(ents []*pb.Entry) ([]Appended, error) { return s.AppendFrom(ents, 0) }

// AppendFrom is Append by a replica that leads its group as node own (0:
// it does not lead): the batches of entries node own proposed were
// checked when they were published, so their CRCs are not computed again
// (about 4% of a leader's CPU at 10 KB records). Entries that came from
// another node are checked in full.
func (s *LogStore) AppendFrom(ents []*pb.Entry, own uint64) ([]Appended, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Appended
	now := time.Now() // for the duplicate window
	for _, e := range ents {
		idx := e.GetIndex()
		if idx < s.first {
			return out, fmt.Errorf("%s: append of index %d below the compaction point %d", s.group, idx, s.first-1)
		}
		if idx <= s.lastIndex() {
			if err := s.truncateFrom(idx); err != nil {
				return out, err
			}
		}
		if idx != s.lastIndex()+1 {
			return out, fmt.Errorf("%s: append of index %d after %d leaves a gap", s.group, idx, s.lastIndex())
		}
		a, err := s.appendEntry(e, now, own)
		if err != nil {
			return out, err
		}
		s.recent.add(e)
		if a.Proposal.Node != 0 {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *LogStore) appendEntry(e *pb.Entry, now time.Time, own uint64) (Appended, error) {
	idx, term := e.GetIndex(), e.GetTerm()
	off := s.nextOffset()
	p, body, ok := parseEntry(e)
	if !ok {
		s.st.side[idx] = proto.Clone(e).(*pb.Entry)
		s.ents.push(entryPos{term: term, off: off, next: off, side: true})
		s.dirty = true
		return Appended{}, nil
	}
	next, size := off, int64(len(body))
	checked := own != 0 && p.Node == own
	// Each batch says how many follow it in the entry: recovery tells an
	// entry cut short (a torn write, a damaged tail) from a whole one.
	following := countBatches(body) - 1
	for len(body) > 0 {
		var h record.BatchHeader
		var err error
		if checked {
			h, err = record.ParseHeader(body)
			if err == nil && len(body) < h.Size() {
				err = record.ErrShortBatch
			}
		} else {
			h, err = record.ParseBatch(body)
		}
		if err != nil {
			return Appended{}, fmt.Errorf("%s: entry %d: %w", s.group, idx, err)
		}
		b := body[:h.Size()]
		record.SetPosition(b, next, term, idx, max(following, 0))
		following--
		if err := s.log.AppendShared(b); err != nil {
			return Appended{}, err
		}
		if s.dedup != nil {
			if k, ok := dedup.KeyOfHeader(h, b); ok {
				s.dedup.Add(k, next, now)
			}
		}
		next += int64(h.RecordCount)
		body = body[h.Size():]
	}
	s.ents.push(entryPos{term: term, off: off, next: next, bytes: int32(size)})
	return Appended{Index: idx, Term: term, Proposal: p, First: off, Next: next}, nil
}

// countBatches counts the batches an entry's body holds, by their
// headers (the loop that appends them checks each one).
func countBatches(body []byte) int {
	n := 0
	for len(body) >= record.BatchHeaderSize {
		h, err := record.ParseHeader(body)
		if err != nil || h.Size() > len(body) {
			break
		}
		body = body[h.Size():]
		n++
	}
	return n
}

// truncateFrom drops entries from index idx on, from the log and the side
// entries. Lock: mu held.
func (s *LogStore) truncateFrom(idx uint64) error {
	if idx < s.hot {
		// Raft never cuts committed entries, and only those turn cold.
		return fmt.Errorf("%s: truncate at index %d, below the uncommitted entries from %d", s.group, idx, s.hot)
	}
	pos := s.ents.at(int(idx - s.hot))
	if pos.off < s.log.NextOffset() {
		if err := s.log.Truncate(pos.off); err != nil {
			return fmt.Errorf("%s: truncate at index %d (offset %d): %w", s.group, idx, pos.off, err)
		}
	}
	for i := range s.st.side {
		if i >= idx {
			delete(s.st.side, i)
			s.dirty = true
		}
	}
	s.ents.truncate(int(idx - s.hot))
	s.recent.truncateFrom(idx)
	s.dedup.TruncateFrom(pos.off)
	return nil
}

// SetHardState records the HardState of a Ready. A change of term or vote
// must be durable before messages go out, so it marks the state for the
// next Sync; the commit index alone is written lazily (a restarted replica
// relearns it from its leader).
func (s *LogStore) SetHardState(hs *pb.HardState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs.GetTerm() != s.st.hard.GetTerm() || hs.GetVote() != s.st.hard.GetVote() ||
		hs.GetCommit() >= s.savedCommit+commitPersistEvery {
		s.dirty = true
	}
	s.st.hard = proto.Clone(hs).(*pb.HardState)
}

// SetConfState records the group's configuration after the change at
// index was applied.
func (s *LogStore) SetConfState(cs *pb.ConfState, index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.conf = proto.Clone(cs).(*pb.ConfState)
	s.st.confIndex = index
	if s.confs == nil {
		s.confs = make(map[uint64]*pb.ConfState)
	}
	s.confs[index] = s.st.conf
	s.dirty = true
}

// confAt returns the configuration as of index (at or past the
// compaction point), or nil when it is not known: the current one when
// no change was applied after index; else the one set by the last change
// at or below index that this process applied (SetConfState); else the
// compaction point's, when no change lies between it and index.
// Lock: mu held.
func (s *LogStore) confAt(index uint64) *pb.ConfState {
	if s.st.confIndex <= index {
		return s.st.conf
	}
	var best uint64
	for i := range s.confs {
		if i <= index && i > best {
			best = i
		}
	}
	if best > 0 {
		return s.confs[best]
	}
	for i, e := range s.st.side {
		if t := e.GetType(); i > s.st.compactIndex && i <= index && (t == pb.EntryType_EntryConfChange || t == pb.EntryType_EntryConfChangeV2) {
			return nil // a change this process did not see applied
		}
	}
	return s.st.compactConf
}

// Applied is the index a replica opening this log has applied (raft's
// Config.Applied): the persisted commit, except that a configuration
// change committed but not reflected in the persisted ConfState (the
// process died between persisting the commit and the next state write)
// must be applied again, so the index stops before it. The entries after
// it are handed to the owner again (OnCommit), which must accept entries
// it has already seen.
func (s *LogStore) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	applied := s.st.hard.GetCommit()
	for idx, e := range s.st.side {
		t := e.GetType()
		if idx > s.st.confIndex && idx <= applied && (t == pb.EntryType_EntryConfChange || t == pb.EntryType_EntryConfChangeV2) {
			applied = idx - 1
		}
	}
	return applied
}

// Sync makes everything appended durable: the data log first, then the
// state if it changed (Flush, then sync, on the caller's goroutine). Not
// while a replica runs over the store: its syncer orders the state
// writes, which this one could overtake.
func (s *LogStore) Sync() error {
	d, err := s.Flush()
	if err != nil {
		return err
	}
	return s.sync(d)
}

// durable is one fsync of a group's storage (LogStore.Flush): the data
// log up to a point, then the state as it was at that point (nil when it
// had not changed).
type durable struct {
	log   partlog.SyncPoint
	logOK bool // false: the data log had nothing new to fsync
	state []byte
}

// Flush writes what was appended to the data log (readers see it) and
// returns the fsync that makes it durable, which another goroutine runs
// (sync) while the replica goes on appending. The state, when it changed,
// is encoded now and stored after that fsync: a crash between the two
// leaves a gap that OpenLogStore cuts, never a state ahead of the data.
// Replica goroutine (the log's writer).
func (s *LogStore) Flush() (durable, error) {
	p, ok, err := s.log.Flush()
	if err != nil {
		return durable{}, err
	}
	d := durable{log: p, logOK: ok}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.st.catchUp; c > 0 && s.lastIndex() >= c {
		s.logger.Info("this replica holds the entries it had lost again: it votes again", "group", s.group, "index", c)
		s.st.catchUp = 0
		s.dirty = true
	}
	if s.dirty {
		if d.state, err = s.st.encode(); err != nil {
			s.release(d)
			return durable{}, err
		}
		s.dirty = false
		s.savedCommit = s.st.hard.GetCommit()
	}
	s.freeze() // everything appended is in the log now
	return d, nil
}

// sync runs d: the data log's fsync, then the state. Any goroutine; the
// durables of one store in the order Flush returned them.
func (s *LogStore) sync(d durable) error {
	if d.logOK {
		if err := d.log.Sync(); err != nil {
			return err
		}
		s.log.MarkSynced(d.log)
	}
	if d.state != nil {
		if err := s.meta.PutRaftState(s.group, d.state); err != nil {
			return fmt.Errorf("%s: save raft state: %w", s.group, err)
		}
	}
	return nil
}

// release gives up d without syncing it.
func (s *LogStore) release(d durable) {
	if d.logOK {
		d.log.Release()
	}
}

// saveState writes the state blob. Lock: mu held (or s not yet shared).
func (s *LogStore) saveState() error {
	enc, err := s.st.encode()
	if err != nil {
		return err
	}
	if err := s.meta.PutRaftState(s.group, enc); err != nil {
		return fmt.Errorf("%s: save raft state: %w", s.group, err)
	}
	s.dirty = false
	s.savedCommit = s.st.hard.GetCommit()
	return nil
}

// commitPersistEvery bounds how far the persisted commit index may lag:
// it is written with the state at least every this many entries. A
// replica that restarts hands the entries after it to its owner again
// (Applied), so this bounds what a start re-applies, and reads back,
// whatever the size of the log.
const commitPersistEvery = 1024

// OffsetAfter returns the partition offset after the records of every
// entry up to index: the high watermark once index is committed.
func (s *LogStore) OffsetAfter(index uint64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case index < s.first:
		return s.st.compactOffset
	case index > s.lastIndex():
		return s.nextOffset()
	}
	end, err := s.start(index + 1)
	if err != nil {
		// An index this old is asked for by statistics only: the log's
		// start is a safe answer (it understates).
		s.logger.Error("offset after an entry not found", "group", s.group, "index", index, "err", err)
		return s.st.compactOffset
	}
	return end
}

// InitialState implements raft.Storage.
func (s *LogStore) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.st.hard).(*pb.HardState), proto.Clone(s.st.conf).(*pb.ConfState), nil
}

// Term implements raft.Storage.
func (s *LogStore) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i == s.first-1:
		return s.st.compactTerm, nil
	case i < s.first:
		return 0, raft.ErrCompacted
	case i > s.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return s.term(i), nil
}

// LastIndex implements raft.Storage.
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, nil
}

// Snapshot implements raft.Storage: the owner's state at the compaction
// point (see Compact), with the partition offset the log continues at.
// Before any compaction it is empty (index 0).
func (s *LogStore) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The configuration as of the compaction point: the receiver replays
	// the changes after it. The current one would have them applied twice
	// (a node removed since came back in a joining replica's voters).
	conf := s.st.compactConf
	if conf == nil {
		conf = s.confAt(s.st.compactIndex)
	}
	if conf == nil {
		conf = s.st.conf // not known (an older state): as before
	}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(s.st.compactIndex), Term: proto.Uint64(s.st.compactTerm),
		ConfState: proto.Clone(conf).(*pb.ConfState),
	}}
	if s.st.compactIndex > 0 {
		snap.Data = binary.AppendVarint(nil, s.st.compactOffset)
		snap.Data = append(snap.Data, s.snap...)
	}
	return snap, nil
}

// SnapshotState returns the owner's state at the compaction point and the
// partition offset after it (nil, 0 before any compaction).
func (s *LogStore) SnapshotState() ([]byte, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, s.st.compactOffset
}

// Compact folds the entries up to index into the owner's state, state
// (what the owner's state machine holds once every entry up to index is
// applied): the log window starts after index, record-less entries up to
// it are dropped, and the partition log's whole segments below it are
// deleted. Raft sends a follower that needs older entries this snapshot.
// Writer only (the Ready loop).
//
// REQUIRES: first-1 <= index <= the applied index.
func (s *LogStore) Compact(index uint64, state []byte) error {
	s.mu.Lock()
	if index < s.first || index > s.lastIndex() {
		s.mu.Unlock()
		return nil // nothing new to fold, or not stored yet
	}
	term := s.term(index)
	end, err := s.start(index + 1)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if c := s.confAt(index); c != nil {
		s.st.compactConf = proto.Clone(c).(*pb.ConfState)
	} else {
		s.st.compactConf = nil
	}
	for i := range s.confs {
		if i < index {
			delete(s.confs, i) // confAt(index) no longer needs them
		}
	}
	s.st.compactIndex, s.st.compactTerm, s.st.compactOffset = index, term, end
	if index >= s.hot {
		s.ents.dropFront(int(index + 1 - s.hot))
		s.hot, s.coldEnd, s.coldTerms = index+1, end, nil
	} else if index+1 == s.hot {
		s.coldTerms = nil
	} else {
		// Keep the run that index+1 belongs to.
		r := sort.Search(len(s.coldTerms), func(r int) bool { return s.coldTerms[r].index > index+1 })
		s.coldTerms = slices.Delete(s.coldTerms, 0, r-1)
	}
	s.first = index + 1
	for i := range s.st.side {
		if i <= index {
			delete(s.st.side, i)
		}
	}
	s.recent.dropThrough(index)
	s.snap = state
	err = s.saveStateAndSnapshot()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := s.log.DeleteBefore(end); err != nil {
		return fmt.Errorf("%s: delete the log below offset %d: %w", s.group, end, err)
	}
	return nil
}

// CompactBefore compacts the log up to the last entry whose records all
// lie below offset and whose index is at most applied (only applied
// entries are folded), with state as the owner's state there. It returns
// the compaction point reached (unchanged when no entry qualifies).
// Writer only.
func (s *LogStore) CompactBefore(offset int64, applied uint64, state []byte) (uint64, error) {
	s.mu.Lock()
	idx := s.st.compactIndex
	// Both the entries' ends and their indexes grow along the window:
	// the first entry past either bound ends the run that qualifies.
	if n := sort.Search(s.ents.len(), func(i int) bool {
		return s.ents.at(i).next > offset || s.hot+uint64(i) > applied
	}); n > 0 {
		idx = s.hot + uint64(n) - 1
	} else if s.hot > s.first && offset > s.st.compactOffset {
		// Among the cold entries: those below the batch holding offset
		// end at or below it, the one of that batch after it.
		last := s.hot - 1
		if offset < s.coldEnd {
			h, err := s.log.HeaderAt(offset)
			if err != nil {
				s.mu.Unlock()
				return idx, fmt.Errorf("%s: compact below offset %d: %w", s.group, offset, err)
			}
			last = h.RaftIndex - 1
		}
		if last = min(last, applied); last >= s.first {
			idx = last
		}
	}
	compacted := idx == s.st.compactIndex
	s.mu.Unlock()
	if compacted {
		return idx, nil
	}
	return idx, s.Compact(idx, state)
}

// ApplySnapshot replaces the log by a snapshot received from the leader:
// the compaction point becomes the snapshot's, the partition log starts
// over at the snapshot's offset, and the owner's state at that point is
// returned (with that offset) for the owner to restore. Writer only.
func (s *LogStore) ApplySnapshot(snap *pb.Snapshot) (state []byte, offset int64, err error) {
	md := snap.GetMetadata()
	offset, n := binary.Varint(snap.GetData())
	if n <= 0 {
		return nil, 0, fmt.Errorf("%s: snapshot at index %d without an offset", s.group, md.GetIndex())
	}
	state = snap.GetData()[n:]
	s.mu.Lock()
	s.st.compactIndex, s.st.compactTerm, s.st.compactOffset = md.GetIndex(), md.GetTerm(), offset
	s.st.conf = proto.Clone(md.GetConfState()).(*pb.ConfState)
	// The compaction point's configuration without the learner the
	// sender named only so that raft installs the snapshot (addReceiver):
	// this replica passes it on with the snapshots it sends.
	s.st.compactConf = proto.Clone(md.GetConfState()).(*pb.ConfState)
	s.st.compactConf.Learners = nil
	s.st.confIndex = md.GetIndex()
	clear(s.confs)
	if s.st.hard.GetCommit() < md.GetIndex() {
		s.st.hard.Commit = proto.Uint64(md.GetIndex())
	}
	s.ents, s.first, s.hot, s.coldEnd, s.coldTerms = posIndex{}, md.GetIndex()+1, md.GetIndex()+1, offset, nil
	clear(s.st.side)
	s.recent = entryCache{}
	s.dedup.TruncateFrom(0)
	s.snap = state
	err = s.saveStateAndSnapshot()
	s.mu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	if err := s.log.Reset(offset); err != nil {
		return nil, 0, fmt.Errorf("%s: reset the log to the snapshot at offset %d: %w", s.group, offset, err)
	}
	return state, offset, nil
}

// saveStateAndSnapshot writes the state blob and the snapshot together.
// Lock: mu held.
func (s *LogStore) saveStateAndSnapshot() error {
	enc, err := s.st.encode()
	if err != nil {
		return err
	}
	if err := s.meta.PutRaftStateAndSnapshot(s.group, enc, s.snap); err != nil {
		return fmt.Errorf("%s: save raft state and snapshot: %w", s.group, err)
	}
	s.dirty = false
	s.savedCommit = s.st.hard.GetCommit()
	return nil
}

// Entries implements raft.Storage: entries [lo, hi), at most maxSize
// bytes of data but at least one entry. Entries carrying batches are read
// back from the partition log (anonymous: their proposal ids are not kept).
// From a cold entry on, only cold entries are returned (fewer than asked,
// as when maxSize is reached): raft asks again for the rest.
func (s *LogStore) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	if lo < s.first {
		s.mu.Unlock()
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 {
		s.mu.Unlock()
		return nil, raft.ErrUnavailable
	}
	if ents, ok := s.recent.get(lo, hi, maxSize); ok {
		s.mu.Unlock()
		return ents, nil
	}
	if lo < s.hot {
		defer s.mu.Unlock() // compactions wait: this reads what they delete
		return s.coldEntries(lo, min(hi, s.hot), maxSize)
	}
	poss := s.ents.appendRange(nil, int(lo-s.hot), int(hi-s.hot))
	side := make(map[uint64]*pb.Entry)
	for i, p := range poss {
		if p.side {
			side[lo+uint64(i)] = proto.Clone(s.st.side[lo+uint64(i)]).(*pb.Entry)
		}
	}
	s.mu.Unlock()
	var out []*pb.Entry
	var size uint64
	for i, p := range poss {
		idx := lo + uint64(i)
		var e *pb.Entry
		if p.side {
			e = side[idx]
		} else {
			data, err := s.readData(p)
			if err != nil {
				return out, err
			}
			e = &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(p.term), Type: pb.EntryType_EntryNormal.Enum(), Data: data}
		}
		size += uint64(len(e.GetData()))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// coldEntries returns cold entries [lo, hi) as Entries does, reading the
// log once from lo's first batch on and grouping the batches by their
// Raft index. Lock: mu held.
func (s *LogStore) coldEntries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	off, err := s.start(lo)
	if err != nil {
		return nil, err
	}
	var out []*pb.Entry
	var size uint64
	var raw []byte // batches read and not yet taken, from offset off on
	for i := lo; i < hi; i++ {
		e := &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(s.term(i)), Type: pb.EntryType_EntryNormal.Enum()}
		if side, ok := s.st.side[i]; ok {
			e = proto.Clone(side).(*pb.Entry)
		} else {
			e.Data = EncodeEntry(nil, Proposal{})
			for {
				if len(raw) == 0 && off < s.coldEnd {
					if raw, err = s.log.Read(off, 1<<20, s.coldEnd); err != nil {
						return out, fmt.Errorf("%s: read entry %d at offset %d: %w", s.group, i, off, err)
					}
				}
				if len(raw) == 0 {
					break
				}
				h, err := record.ParseHeader(raw)
				if err != nil {
					return out, fmt.Errorf("%s: read entry %d at offset %d: %w", s.group, i, off, err)
				}
				if h.RaftIndex != i {
					break
				}
				e.Data = append(e.Data, raw[:h.Size()]...)
				raw, off = raw[h.Size():], h.NextOffset()
			}
			if len(e.Data) == envelopeSize {
				return out, fmt.Errorf("%s: entry %d not in the log at offset %d", s.group, i, off)
			}
		}
		size += uint64(len(e.GetData()))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// readData rebuilds the data of an entry carrying batches from the log,
// reading its batches once, straight into the entry's buffer.
func (s *LogStore) readData(p entryPos) ([]byte, error) {
	data := EncodeEntry(make([]byte, 0, envelopeSize+int(p.bytes)), Proposal{})
	for off := p.off; off < p.next; {
		n := len(data)
		var err error
		data, err = s.log.ReadAppend(data, off, max(envelopeSize+int(p.bytes)-n, 1), p.next)
		if err != nil {
			return nil, fmt.Errorf("%s: read entry at offset %d: %w", s.group, off, err)
		}
		if len(data) == n {
			return nil, fmt.Errorf("%s: entry records [%d, %d) not in the log", s.group, p.off, p.next)
		}
		for raw := data[n:]; len(raw) > 0; {
			h, err := record.ParseHeader(raw)
			if err != nil {
				return nil, err
			}
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	return data, nil
}

// EpochEnd returns, for a Raft term e, the largest term at or below e
// that the retained log holds and the offset after that term's last
// entry (Kafka's OffsetForLeaderEpoch): for e at or above the last
// entry's term, that term and the log's end. ok is false when every
// retained entry is of a later term (the answer was compacted away).
func (s *LogStore) EpochEnd(e uint64) (term uint64, end int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Terms never decrease along the log: find the first entry of a
	// term above e, among the cold entries' runs, then the others.
	var i uint64
	if r := sort.Search(len(s.coldTerms), func(r int) bool { return s.coldTerms[r].term > e }); r < len(s.coldTerms) {
		i = s.coldTerms[r].index
	} else {
		i = s.hot + uint64(sort.Search(s.ents.len(), func(i int) bool { return s.ents.term(i) > e }))
	}
	switch {
	case i > s.first:
		end, err := s.start(i)
		if err != nil {
			s.logger.Error("end of a leader epoch not found", "group", s.group, "epoch", e, "err", err)
			return 0, 0, false
		}
		return s.term(i - 1), end, true
	case s.st.compactTerm <= e && s.st.compactTerm > 0:
		return s.st.compactTerm, s.st.compactOffset, true
	}
	return 0, 0, false
}
