// Package meta keeps a node's small, non-log state in an embedded Pebble
// store: its node id, and the Raft state and snapshots of its groups
// (topics and committed offsets live in the metadata group's log).
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

// Keys of the format a single node wrote before it was a cluster of one:
// topic definitions as JSON, and committed offsets. They are read once, to
// migrate them into the metadata group (see the broker), then deleted.
const (
	topicPrefix  = "topic/"
	offsetPrefix = "offset/"
)

// LegacyTopics returns the topic definitions of the old single-node
// format, by name (nil when there are none). The values are copies owned
// by the caller.
func (s *Store) LegacyTopics() (map[string][]byte, error) {
	var out map[string][]byte
	err := s.scan(topicPrefix, func(k, v []byte) error {
		if out == nil {
			out = make(map[string][]byte)
		}
		out[string(k[len(topicPrefix):])] = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// LegacyOffset is a committed offset of the old single-node format: the
// next offset group will consume on a partition.
type LegacyOffset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// LegacyOffsets returns the committed offsets of the old single-node
// format, ordered by group, topic and partition.
func (s *Store) LegacyOffsets() ([]LegacyOffset, error) {
	var out []LegacyOffset
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

// DeleteLegacy removes every key of the old single-node format, once they
// are migrated.
func (s *Store) DeleteLegacy() error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, prefix := range []string{topicPrefix, offsetPrefix} {
		if err := b.DeleteRange([]byte(prefix), prefixEnd(prefix), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

const nodeIDKey = "node/id"

// NodeID returns the node id this data directory belongs to, or
// ErrNotFound before one was stored.
func (s *Store) NodeID() (uint64, error) {
	v, err := s.get(nodeIDKey)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("meta: node id of %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// PutNodeID durably records the node id this data directory belongs to.
func (s *Store) PutNodeID(id uint64) error {
	return s.db.Set([]byte(nodeIDKey), binary.BigEndian.AppendUint64(nil, id), pebble.Sync)
}

func (s *Store) scan(prefix string, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte(prefix),
		UpperBound: prefixEnd(prefix),
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

// prefixEnd is the first key after every key that starts with prefix
// (which ends in a byte below 0xff).
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	end[len(end)-1]++
	return end
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

func parseOffset(k, v []byte) (LegacyOffset, error) {
	rest := k[len(offsetPrefix):]
	var parts [2][]byte
	for i := range parts {
		j := indexByte(rest, 0)
		if j < 0 {
			return LegacyOffset{}, fmt.Errorf("meta: malformed offset key %q", k)
		}
		parts[i], rest = rest[:j], rest[j+1:]
	}
	if len(rest) != 4 || len(v) != 8 {
		return LegacyOffset{}, fmt.Errorf("meta: malformed offset entry %q", k)
	}
	return LegacyOffset{
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

// RaftGroups lists the groups that have a stored Raft state.
func (s *Store) RaftGroups() ([]string, error) {
	var out []string
	err := s.scan(raftPrefix, func(k, _ []byte) error {
		out = append(out, string(k[len(raftPrefix):]))
		return nil
	})
	return out, err
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
