// Package meta keeps a node's small, non-log state in an embedded Pebble
// store: topic definitions and consumer-group committed offsets.
//
// Every write is synced before it returns: a caller that reports success to
// a client may rely on the value surviving a crash.
package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// ErrNotFound is returned when a key has no value.
var ErrNotFound = errors.New("meta: not found")

const (
	topicPrefix  = "topic/"
	offsetPrefix = "offset/"
)

// Store is safe for concurrent use.
type Store struct {
	db *pebble.DB
}

// Open opens (or creates) the store in dir/meta.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	opts := &pebble.Options{Logger: pebbleLogger{logger}}
	db, err := pebble.Open(filepath.Join(dir, "meta"), opts)
	if err != nil {
		return nil, fmt.Errorf("meta: open: %w", err)
	}
	return &Store{db: db}, nil
}

// Close flushes and closes the store.
func (s *Store) Close() error { return s.db.Close() }

// PutTopic stores a topic's definition (an encoded blob owned by the caller).
func (s *Store) PutTopic(name string, def []byte) error {
	return s.db.Set([]byte(topicPrefix+name), def, pebble.Sync)
}

// DeleteTopic removes a topic's definition and every group offset of it.
func (s *Store) DeleteTopic(name string) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Delete([]byte(topicPrefix+name), nil); err != nil {
		return err
	}
	offsets, err := s.AllOffsets()
	if err != nil {
		return err
	}
	for _, o := range offsets {
		if o.Topic == name {
			if err := b.Delete(offsetKey(o.Group, o.Topic, o.Partition), nil); err != nil {
				return err
			}
		}
	}
	return b.Commit(pebble.Sync)
}

// Topics returns every stored topic definition by name. The values are
// copies owned by the caller.
func (s *Store) Topics() (map[string][]byte, error) {
	out := make(map[string][]byte)
	err := s.scan(topicPrefix, func(k, v []byte) error {
		out[string(k[len(topicPrefix):])] = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// Offset is a committed offset of one group on one partition: the next
// offset the group will consume there.
type Offset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// CommitOffsets stores the offsets atomically and durably.
func (s *Store) CommitOffsets(offsets []Offset) error {
	b := s.db.NewBatch()
	defer b.Close()
	var v [8]byte
	for _, o := range offsets {
		binary.BigEndian.PutUint64(v[:], uint64(o.Offset))
		if err := b.Set(offsetKey(o.Group, o.Topic, o.Partition), v[:], nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// CommittedOffset returns the group's committed offset of a partition, or
// ErrNotFound.
func (s *Store) CommittedOffset(group, topic string, partition int32) (int64, error) {
	v, closer, err := s.db.Get(offsetKey(group, topic, partition))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("meta: offset value of %d bytes for group %q topic %q partition %d", len(v), group, topic, partition)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// AllOffsets returns every committed offset, ordered by group, topic and
// partition.
func (s *Store) AllOffsets() ([]Offset, error) {
	var out []Offset
	err := s.scan(offsetPrefix, func(k, v []byte) error {
		o, err := parseOffset(k, v)
		if err != nil {
			return err
		}
		out = append(out, o)
		return nil
	})
	return out, err
}

func (s *Store) scan(prefix string, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte(prefix),
		UpperBound: []byte(prefix[:len(prefix)-1] + string(rune(prefix[len(prefix)-1]+1))),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// offsetKey is offset/<group>\x00<topic>\x00<partition big-endian>. Names
// never contain NUL (they are validated), so keys sort by group, topic and
// partition.
func offsetKey(group, topic string, partition int32) []byte {
	k := make([]byte, 0, len(offsetPrefix)+len(group)+len(topic)+6)
	k = append(k, offsetPrefix...)
	k = append(k, group...)
	k = append(k, 0)
	k = append(k, topic...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

func parseOffset(k, v []byte) (Offset, error) {
	rest := k[len(offsetPrefix):]
	var parts [2][]byte
	for i := range parts {
		j := indexByte(rest, 0)
		if j < 0 {
			return Offset{}, fmt.Errorf("meta: malformed offset key %q", k)
		}
		parts[i], rest = rest[:j], rest[j+1:]
	}
	if len(rest) != 4 || len(v) != 8 {
		return Offset{}, fmt.Errorf("meta: malformed offset entry %q", k)
	}
	return Offset{
		Group:     string(parts[0]),
		Topic:     string(parts[1]),
		Partition: int32(binary.BigEndian.Uint32(rest)),
		Offset:    int64(binary.BigEndian.Uint64(v)),
	}, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// pebbleLogger routes Pebble's own logging to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.logger().Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.logger().Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
func (p pebbleLogger) logger() *slog.Logger {
	if p.l == nil {
		return slog.Default()
	}
	return p.l
}

const raftPrefix = "raft/"

// PutRaftState durably stores the Raft state blob of one group (a
// partition's HardState, ConfState, compaction point and record-less
// entries; encoded by the replication package).
func (s *Store) PutRaftState(group string, state []byte) error {
	return s.db.Set([]byte(raftPrefix+group), state, pebble.Sync)
}

// RaftState returns the stored Raft state of a group, or ErrNotFound. The
// value is a copy owned by the caller.
func (s *Store) RaftState(group string) ([]byte, error) {
	return s.get(raftPrefix + group)
}

// get returns a copy of the value at key, or ErrNotFound.
func (s *Store) get(key string) ([]byte, error) {
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

const raftSnapPrefix = "raftsnap/"

// PutRaftStateAndSnapshot durably stores, atomically, a group's Raft state
// blob and the snapshot taken at its compaction point.
func (s *Store) PutRaftStateAndSnapshot(group string, state, snapshot []byte) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set([]byte(raftPrefix+group), state, nil); err != nil {
		return err
	}
	if err := b.Set([]byte(raftSnapPrefix+group), snapshot, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// RaftSnapshot returns a group's stored snapshot, or ErrNotFound. The
// value is a copy owned by the caller.
func (s *Store) RaftSnapshot(group string) ([]byte, error) {
	return s.get(raftSnapPrefix + group)
}

// DeleteRaftState forgets a group's Raft state and snapshot (its
// partition was deleted).
func (s *Store) DeleteRaftState(group string) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Delete([]byte(raftPrefix+group), nil); err != nil {
		return err
	}
	if err := b.Delete([]byte(raftSnapPrefix+group), nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}
