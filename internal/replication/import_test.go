package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/meta"
	"github.com/hermes-mq/hermes/internal/partlog"
	"github.com/hermes-mq/hermes/pkg/record"
)

// legacyLog writes a log as a single node did before its partitions were
// Raft groups: batches appended with partlog.Append (no Raft fields), in
// small segments, the first `dropped` records removed by retention.
func legacyLog(t *testing.T, dir string, batches, perBatch int, dropped int64) []string {
	t.Helper()
	log, err := partlog.Open(dir, partlog.Options{SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for b := range batches {
		recs := make([]record.Record, perBatch)
		for i := range recs {
			p := fmt.Sprintf("b%d-r%d-%s", b, i, string(make([]byte, 4000)))
			recs[i] = record.Record{Timestamp: time.Now().UnixNano(), Payload: []byte(p)}
			payloads = append(payloads, p)
		}
		if _, err := log.Append(record.AppendBatch(nil, 0, recs)); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}
	if dropped > 0 {
		if _, err := log.DeleteBefore(dropped); err != nil {
			t.Fatal(err)
		}
	}
	start := log.StartOffset()
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return payloads[start:]
}

func TestImportLegacyLogKeepsOffsetsAndBytes(t *testing.T) {
	root := t.TempDir()
	ms, err := meta.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	dir := filepath.Join(root, "topics", "t", "0")
	want := legacyLog(t, dir, 200, 3, 300) // 600 records of 4 KB: several segments, some retained away
	// A copy cut short by a crash is thrown away and made again.
	if err := os.MkdirAll(dir+importSuffix, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir+importSuffix, "junk"), []byte("x"), 0o644)
	if err := ImportLegacyLog("t/0", dir, LogOptions{SegmentBytes: 1 << 20}, ms, 7); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir + importSuffix, dir + legacySuffix} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s is left behind (%v)", d, err)
		}
	}
	// Importing again changes nothing.
	if err := ImportLegacyLog("t/0", dir, LogOptions{SegmentBytes: 1 << 20}, ms, 7); err != nil {
		t.Fatal(err)
	}

	r, err := Open(Config{Group: "t/0", NodeID: 7}, dir, LogOptions{SegmentBytes: 1 << 20}, ms, &memNet{nodes: map[uint64]*Replica{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	start := int64(600 - len(want))
	if got := r.Log().StartOffset(); got != start {
		t.Fatalf("start offset %d, want %d", got, start)
	}
	if hw := r.Committed(); hw != 600 {
		t.Fatalf("committed up to %d, want 600", hw)
	}
	var got []string
	for off := start; off < 600; {
		raw, err := r.Log().Read(off, 1<<20, 600)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := decodeAll(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.Offset >= off {
				got = append(got, string(rec.Payload))
			}
		}
		off = recs[len(recs)-1].Offset + 1
	}
	if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("read back %d records (first %.8q), want %d (first %.8q)", len(got), got[0], len(want), want[0])
	}
	// The group of one leads at once and appends after the imported records.
	first := proposeWait(t, r, "after import")
	if first != 600 {
		t.Fatalf("the next record got offset %d, want 600", first)
	}
}

func decodeAll(raw []byte) ([]record.Record, error) {
	var out []record.Record
	for len(raw) > 0 {
		h, err := record.ParseBatch(raw)
		if err != nil {
			return nil, err
		}
		if h.RaftIndex < 2 || h.RaftTerm != 1 {
			return nil, fmt.Errorf("batch at %d: raft index %d, term %d", h.BaseOffset, h.RaftIndex, h.RaftTerm)
		}
		if out, err = record.DecodeRecords(out, raw[:h.Size()]); err != nil {
			return nil, err
		}
		raw = raw[h.Size():]
	}
	return out, nil
}

// proposeWait proposes one record and waits for its commit.
func proposeWait(t *testing.T, r *Replica, payload string) int64 {
	t.Helper()
	type res struct {
		first int64
		err   error
	}
	ch := make(chan res, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	batch := record.AppendBatch(nil, 0, []record.Record{{Timestamp: 1, Payload: []byte(payload)}})
	r.Propose([][]byte{batch}, AckCommitted, func(first int64, err error) { ch <- res{first, err} })
	select {
	case got := <-ch:
		if got.err != nil {
			t.Fatal(got.err)
		}
		return got.first
	case <-ctx.Done():
		t.Fatal("no answer to the proposal")
	}
	return 0
}

func TestImportLegacyLogFinishesAfterACrash(t *testing.T) {
	root := t.TempDir()
	ms, err := meta.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	dir := filepath.Join(root, "p")
	legacyLog(t, dir, 10, 2, 0)
	if err := ImportLegacyLog("p", dir, LogOptions{}, ms, 1); err != nil {
		t.Fatal(err)
	}
	// As if the crash came after the state was stored and the old log was
	// moved aside, before the new one took its place.
	if err := os.Rename(dir, dir+importSuffix); err != nil {
		t.Fatal(err)
	}
	legacyLog(t, dir+legacySuffix, 1, 1, 0)
	if err := ImportLegacyLog("p", dir, LogOptions{}, ms, 1); err != nil {
		t.Fatal(err)
	}
	r, err := Open(Config{Group: "p", NodeID: 1}, dir, LogOptions{}, ms, &memNet{nodes: map[uint64]*Replica{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if hw := r.Committed(); hw != 20 {
		t.Fatalf("committed up to %d, want 20", hw)
	}
	if _, err := os.Stat(dir + legacySuffix); !os.IsNotExist(err) {
		t.Fatalf("the old log is left behind: %v", err)
	}
}

// A full proposal queue makes Propose wait, then fail with ErrBusy; a
// proposal always fits an empty queue, however large.
func TestProposeWaitsForRoomThenFailsBusy(t *testing.T) {
	root := t.TempDir()
	ms, err := meta.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	r, err := Open(Config{Group: "q", NodeID: 1, Peers: []uint64{1}, MaxQueueBytes: 10, ProposeWait: 50 * time.Millisecond},
		filepath.Join(root, "q"), LogOptions{}, ms, &memNet{nodes: map[uint64]*Replica{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	proposeWait(t, r, "the group leads")
	release := make(chan struct{})
	if err := r.call(context.Background(), func() { <-release }); err != nil { // the loop is busy
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	batch := record.AppendBatch(nil, 0, []record.Record{{Timestamp: 1, Payload: make([]byte, 100)}})
	r.Propose([][]byte{batch}, AckCommitted, func(_ int64, err error) { errs <- err }) // fits the empty queue
	start := time.Now()
	r.Propose([][]byte{batch}, AckCommitted, func(_ int64, err error) { errs <- err }) // waits, then fails
	if err := <-errs; !errors.Is(err, ErrBusy) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("second proposal: %v after %v; want ErrBusy after the wait", err, time.Since(start))
	}
	close(release)
	if err := <-errs; err != nil {
		t.Fatalf("first proposal: %v", err)
	}
}
