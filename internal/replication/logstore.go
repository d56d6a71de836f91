// Package replication makes a partition a Raft group: LogStore is the
// group's raft.Storage over the partition's own data log, so a record is
// written once, as the batch it arrived in, on every replica.
package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
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
	// first is the index of ents[0]. Invariant: first == st.compactIndex+1.
	first uint64
	ents  posIndex
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
	s := &LogStore{group: group, log: log, meta: ms, st: st, first: st.compactIndex + 1, savedCommit: st.hard.GetCommit(), logger: slog.Default()}
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
	data, err := s.scan(st.compactOffset)
	if err != nil {
		return nil, err
	}
	if err := s.rebuild(data); err != nil {
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

// scan reads the batch headers from offset on and groups them by Raft
// index.
func (s *LogStore) scan(from int64) (map[uint64]entryPos, error) {
	data := make(map[uint64]entryPos)
	end := s.log.NextOffset()
	for off := from; off < end; {
		raw, err := s.log.Read(off, 4<<20, end)
		if err != nil {
			return nil, fmt.Errorf("scan %s at %d: %w", s.group, off, err)
		}
		for len(raw) > 0 {
			h, err := record.ParseHeader(raw)
			if err != nil {
				return nil, fmt.Errorf("scan %s at %d: %w", s.group, off, err)
			}
			if h.RaftIndex == 0 {
				return nil, fmt.Errorf("%s: the batch at offset %d was not written by replication", s.group, h.BaseOffset)
			}
			pos, ok := data[h.RaftIndex]
			if !ok {
				pos = entryPos{term: h.RaftTerm, off: h.BaseOffset}
			}
			pos.next = h.NextOffset()
			pos.bytes += int32(h.Size())
			pos.cut = h.EntryFollowing > 0
			data[h.RaftIndex] = pos
			raw, off = raw[h.Size():], h.NextOffset()
		}
	}
	return data, nil
}

// rebuild lays out the index window from the compaction point on and cuts
// whatever follows a gap.
func (s *LogStore) rebuild(data map[uint64]entryPos) error {
	next := s.st.compactOffset
	for i := s.first; ; i++ {
		if pos, ok := data[i]; ok && pos.off == next && pos.cut {
			// Only part of the entry's batches is here: it is dropped
			// whole (cut below), and the leader sends it again.
			s.logger.Warn("an entry cut short at the end of the log is dropped; the leader sends it again", "group", s.group,
				"index", i, "offsets", fmt.Sprintf("[%d, %d)", pos.off, pos.next))
		} else if ok && pos.off == next {
			s.ents.push(pos)
			next = pos.next
			continue
		}
		if e, ok := s.st.side[i]; ok {
			s.ents.push(entryPos{term: e.GetTerm(), off: next, next: next, side: true})
			continue
		}
		break
	}
	last := s.lastIndex()
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

func (s *LogStore) lastIndex() uint64 { return s.first + uint64(s.ents.len()) - 1 }

// nextOffset is the partition offset after the last entry's records.
func (s *LogStore) nextOffset() int64 {
	if s.ents.len() == 0 {
		return s.st.compactOffset
	}
	return s.ents.last().next
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
	pos := s.ents.at(int(idx - s.first))
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
	s.ents.truncate(int(idx - s.first))
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
	return s.ents.at(int(index - s.first)).next
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
	return s.ents.at(int(i - s.first)).term, nil
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
	pos := s.ents.at(int(index - s.first))
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
	s.st.compactIndex, s.st.compactTerm, s.st.compactOffset = index, pos.term, pos.next
	s.ents.dropFront(int(index + 1 - s.first))
	s.first = index + 1
	for i := range s.st.side {
		if i <= index {
			delete(s.st.side, i)
		}
	}
	s.recent.dropThrough(index)
	s.snap = state
	err := s.saveStateAndSnapshot()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := s.log.DeleteBefore(pos.next); err != nil {
		return fmt.Errorf("%s: delete the log below offset %d: %w", s.group, pos.next, err)
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
		return s.ents.at(i).next > offset || s.first+uint64(i) > applied
	}); n > 0 {
		idx = s.first + uint64(n) - 1
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
	s.ents, s.first = posIndex{}, md.GetIndex()+1
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
	poss := s.ents.appendRange(nil, int(lo-s.first), int(hi-s.first))
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
	// term above e.
	i := sort.Search(s.ents.len(), func(i int) bool { return s.ents.at(i).term > e })
	switch {
	case i == s.ents.len() && i > 0:
		return s.ents.at(i - 1).term, s.nextOffset(), true
	case i > 0:
		return s.ents.at(i - 1).term, s.ents.at(i - 1).next, true
	case s.st.compactTerm <= e && s.st.compactTerm > 0:
		return s.st.compactTerm, s.st.compactOffset, true
	}
	return 0, 0, false
}
