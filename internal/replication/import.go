package replication

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Directories of an import in progress, beside the partition's own.
const (
	importSuffix = ".import" // the new log being written
	legacySuffix = ".legacy" // the old log, once the new one took its place
)

// importBatchesPerEntry is how many of the old log's batches go into one
// Raft entry of the imported log.
const importBatchesPerEntry = 64

// ImportLegacyLog turns the data log in dir, written by a single node
// before its partitions were Raft groups (batches without a Raft index),
// into the log of a group whose only voter is node and which has
// committed every record: same bytes, same offsets, with the Raft fields
// set. Open then opens it like any other group's log.
//
// The new log is written beside the old one and takes its place only once
// it and the group's Raft state are durable, so a crash at any point
// leaves either the old log (the import starts over) or the new one (the
// import is finished): calling ImportLegacyLog again after a crash is
// always right, and after a finished import it does nothing.
func ImportLegacyLog(group, dir string, lo LogOptions, ms *meta.Store, node uint64) error {
	_, err := ms.RaftState(group)
	switch {
	case err == nil:
		return finishImport(dir)
	case !errors.Is(err, meta.ErrNotFound):
		return err
	}
	if err := os.RemoveAll(dir + importSuffix); err != nil { // a copy cut short
		return err
	}
	opts := partlog.Options{SegmentBytes: lo.SegmentBytes, RetentionAge: lo.RetentionAge, RetentionBytes: lo.RetentionBytes}
	src, err := partlog.Open(dir, opts)
	if err != nil {
		return fmt.Errorf("import %s: %w", group, err)
	}
	defer src.Close()
	dst, err := partlog.Open(dir+importSuffix, opts)
	if err != nil {
		return fmt.Errorf("import %s: %w", group, err)
	}
	defer dst.Close()
	if err := copyAsEntries(group, src, dst, ms, node); err != nil {
		return fmt.Errorf("import %s: %w", group, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("import %s: %w", group, err)
	}
	return finishImport(dir)
}

// copyAsEntries appends src's batches to dst as the entries of a group of
// one voter (node), from index 2 on: index 1, the bootstrap's
// configuration, is the compaction point, with src's start offset. Then
// it stores the group's Raft state: every entry committed.
func copyAsEntries(group string, src, dst *partlog.Log, ms *meta.Store, node uint64) error {
	start, end := src.StartOffset(), src.NextOffset()
	if start > 0 {
		if err := dst.Reset(start); err != nil {
			return err
		}
	}
	st := newRaftState()
	st.compactIndex, st.compactTerm, st.compactOffset = 1, 1, start
	st.conf = &pb.ConfState{Voters: []uint64{node}}
	st.confIndex = 1
	s := &LogStore{group: group, log: dst, meta: ms, st: st, first: 2, hot: 2, coldEnd: start}
	for off := start; off < end; {
		raw, err := src.Read(off, 4<<20, end)
		if err != nil {
			return err
		}
		var ents []*pb.Entry
		for len(raw) > 0 {
			data := EncodeEntry(nil, Proposal{})
			for n := 0; n < importBatchesPerEntry && len(raw) > 0; n++ {
				h, err := record.ParseBatch(raw)
				if err != nil {
					return fmt.Errorf("batch at offset %d: %w", off, err)
				}
				if h.BaseOffset != off {
					return fmt.Errorf("the batch after offset %d starts at %d", off, h.BaseOffset)
				}
				data = append(data, raw[:h.Size()]...)
				raw, off = raw[h.Size():], h.NextOffset()
			}
			idx := s.lastIndex() + 1 + uint64(len(ents))
			ents = append(ents, &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(1), Type: pb.EntryType_EntryNormal.Enum(), Data: data})
		}
		if _, err := s.Append(ents); err != nil {
			return err
		}
		s.recent = entryCache{} // nobody reads them here
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	st.hard = &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(s.lastIndex())}
	s.snap = nil
	return s.saveStateAndSnapshot()
}

// finishImport puts an imported log in place of the old one, wherever a
// crash left the renames: dir.import (complete, since the Raft state is
// stored) replaces dir, and the old log is removed.
func finishImport(dir string) error {
	if _, err := os.Stat(dir + importSuffix); err == nil {
		if _, err := os.Stat(dir); err == nil {
			if err := os.Rename(dir, dir+legacySuffix); err != nil {
				return err
			}
		}
		if err := os.Rename(dir+importSuffix, dir); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir + legacySuffix)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
