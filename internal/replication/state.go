package replication

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// raftState is what a partition's Raft group keeps outside its data log:
// the HardState and ConfState, the compaction point (the last entry folded
// into the partition's files, with the offset after its records), and the
// entries that carry no records (a new leader's empty entry, configuration
// changes) from the compaction point on.
type raftState struct {
	hard *pb.HardState
	conf *pb.ConfState
	// compactIndex and compactTerm name the last compacted entry; the log
	// index window starts at compactIndex+1. compactOffset is the partition
	// offset after that entry's records.
	compactIndex  uint64
	compactTerm   uint64
	compactOffset int64
	// confIndex is the index of the last configuration change conf
	// reflects. The HardState's commit may be ahead of it: a commit is
	// persisted before the entries it covers are applied, so a crash can
	// leave a committed change unapplied here (see LogStore.Applied).
	confIndex uint64
	// catchUp is the index this replica must hold again before it votes
	// or stands for election (0: none): it lost entries it had
	// acknowledged, and a vote of it could elect a leader without them.
	catchUp uint64
	// compactConf is the configuration as of compactIndex, which a
	// snapshot at the compaction point must carry (the entries after it,
	// configuration changes included, are replayed on top); nil when not
	// known (states written before it was kept): then the snapshot
	// carries conf, as it did.
	compactConf *pb.ConfState
	side        map[uint64]*pb.Entry
}

func newRaftState() *raftState {
	return &raftState{hard: &pb.HardState{}, conf: &pb.ConfState{}, side: make(map[uint64]*pb.Entry)}
}

// stateVersion 2 added confIndex; version 1 states are read with
// confIndex at their commit, which is what version 1 assumed. Version 3
// added catchUp (0 in older states), version 4 compactConf (a flag, then
// the message after the ConfState).
const stateVersion = 4

var errBadState = errors.New("replication: malformed raft state")

// encode lays the state out as: version, compactIndex, compactTerm,
// compactOffset, confIndex, catchUp, whether compactConf follows, the
// number of side entries (uvarints/varint), then length-prefixed
// protobufs: the HardState, the ConfState, compactConf if set, and each
// side entry.
func (s *raftState) encode() ([]byte, error) {
	b := binary.AppendUvarint(nil, stateVersion)
	b = binary.AppendUvarint(b, s.compactIndex)
	b = binary.AppendUvarint(b, s.compactTerm)
	b = binary.AppendVarint(b, s.compactOffset)
	b = binary.AppendUvarint(b, s.confIndex)
	b = binary.AppendUvarint(b, s.catchUp)
	msgs := []proto.Message{s.hard, s.conf}
	if s.compactConf != nil {
		b = binary.AppendUvarint(b, 1)
		msgs = append(msgs, s.compactConf)
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	for _, e := range s.sortedSide() {
		msgs = append(msgs, e)
	}
	b = binary.AppendUvarint(b, uint64(len(s.side)))
	for _, m := range msgs {
		enc, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return b, nil
}

func decodeState(b []byte) (*raftState, error) {
	s := newRaftState()
	r := stateReader{b: b}
	v := r.uvarint()
	if v < 1 || v > stateVersion {
		return nil, fmt.Errorf("%w: version %d", errBadState, v)
	}
	s.compactIndex, s.compactTerm, s.compactOffset = r.uvarint(), r.uvarint(), r.varint()
	if v >= 2 {
		s.confIndex = r.uvarint()
	}
	if v >= 3 {
		s.catchUp = r.uvarint()
	}
	hasCompactConf := v >= 4 && r.uvarint() == 1
	n := r.uvarint()
	r.message(s.hard)
	r.message(s.conf)
	if hasCompactConf {
		s.compactConf = &pb.ConfState{}
		r.message(s.compactConf)
	}
	if v == 1 {
		s.confIndex = s.hard.GetCommit()
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		e := &pb.Entry{}
		r.message(e)
		s.side[e.GetIndex()] = e
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errBadState, len(r.b))
	}
	return s, r.err
}

func (s *raftState) sortedSide() []*pb.Entry {
	out := make([]*pb.Entry, 0, len(s.side))
	for _, e := range s.side {
		out = append(out, e)
	}
	for i := 1; i < len(out); i++ { // few entries: insertion sort
		for j := i; j > 0 && out[j].GetIndex() < out[j-1].GetIndex(); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad uvarint", errBadState)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad varint", errBadState)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) message(m proto.Message) {
	n := r.uvarint()
	if r.err != nil {
		return
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: message of %d bytes, %d left", errBadState, n, len(r.b))
		return
	}
	if err := proto.Unmarshal(r.b[:n], m); err != nil {
		r.err = fmt.Errorf("%w: %v", errBadState, err)
		return
	}
	r.b = r.b[n:]
}
