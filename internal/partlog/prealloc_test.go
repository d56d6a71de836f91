package partlog

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyDir copies the files of a log's directory as they are on disk now:
// what a machine that crashed at this point would find (everything
// written is there: Sync was called).
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "crashed")
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// The active segment's file is extended ahead of the appends; rolled and
// closed segments end at their data; after a crash the zeros after the
// last batch are taken for what they are, without a warning and without
// losing a record, and the next append lands right after the data.
func TestPreallocation(t *testing.T) {
	const step = 16 << 10
	var logs bytes.Buffer
	f := newFixture(t, Options{SegmentBytes: 64 << 10, PreallocateBytes: step, Logger: recordingLogger(&logs)})
	f.appendMany(20, 100)
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	active := lastSegment(t, f.dir)
	if got := fileSize(t, active); got != step || f.l.Size() >= step {
		t.Fatalf("active segment's file is %d bytes for %d of data, want the %d-byte step", got, f.l.Size(), step)
	}

	// A crash now: the copy's last segment ends in zeros.
	crashed := copyDir(t, f.dir)
	c := &fixture{t: t, dir: crashed, opts: f.opts, want: slices.Clone(f.want)}
	c.reopen()
	c.check()
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("preallocated space reported as damage: %s", logs.String())
	}
	c.appendMany(5, 100) // appendBatch checks each base offset
	c.reopen()
	c.check()
	if size, _ := fileBytes(t, crashed); size != c.l.Size() {
		t.Fatalf("after a close the files hold %d bytes for %d of data", size, c.l.Size())
	}

	// Rolls: every segment but the active one ends at its data.
	f.appendMany(2000, 100)
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.l.Segments() < 3 {
		t.Fatalf("%d segments, want rolls", f.l.Segments())
	}
	_, files := fileBytes(t, f.dir)
	f.l.mu.RLock()
	for i, seg := range f.l.segs[:len(f.l.segs)-1] {
		if got := fileSize(t, files[i]); got != seg.size {
			t.Errorf("rolled segment %s: file %d bytes, data %d", filepath.Base(files[i]), got, seg.size)
		}
	}
	f.l.mu.RUnlock()

	// A crash between a roll's creating the next segment and cutting the
	// last one's preallocation (which the roll orders the other way) is
	// still recovered: an older segment ending in zeros is cut quietly.
	f.l.Close()
	appendFile(t, files[0], make([]byte, step))
	f.l = nil
	f.reopen()
	f.check()
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("older segment with a zero tail reported as damage: %s", logs.String())
	}
	f.l.mu.RLock()
	want := f.l.segs[0].size
	f.l.mu.RUnlock()
	if got := fileSize(t, files[0]); got != want {
		t.Fatalf("older segment with a zero tail: file %d bytes, data %d", got, want)
	}

	// Truncate cuts the preallocation with the data.
	cut := f.l.NextOffset() - 3
	for cut > 0 && f.l.Truncate(cut) != nil {
		cut--
	}
	f.want = f.want[:cut]
	f.check()
	_, files = fileBytes(t, f.dir)
	f.l.mu.RLock()
	want = f.l.active.size
	f.l.mu.RUnlock()
	if got := fileSize(t, files[len(files)-1]); got != want {
		t.Fatalf("after Truncate the active file is %d bytes, data %d", got, want)
	}
}

// A negative PreallocateBytes leaves the file at its data, as before.
func TestPreallocationOff(t *testing.T) {
	f := newFixture(t, Options{PreallocateBytes: -1})
	f.appendMany(20, 100)
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, lastSegment(t, f.dir)); got != f.l.Size() {
		t.Fatalf("file %d bytes for %d of data", got, f.l.Size())
	}
}
