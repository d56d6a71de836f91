package partlog

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-mq/hermes/pkg/record"
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
	files := rolledEndAtData(t, f)

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

// rolledEndAtData checks that every segment but the active one ends at
// its data, and returns the segment files.
func rolledEndAtData(t *testing.T, f *fixture) []string {
	t.Helper()
	_, files := fileBytes(t, f.dir)
	f.l.mu.RLock()
	defer f.l.mu.RUnlock()
	for i, seg := range f.l.segs[:len(f.l.segs)-1] {
		if got := fileSize(t, files[i]); got != seg.size {
			t.Errorf("rolled segment %s: file %d bytes, data %d", filepath.Base(files[i]), got, seg.size)
		}
	}
	return files
}

// settle waits until l's filler has written what the writer's position
// asks of it (it works on its own goroutine).
func settle(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := l.fill
		f.mu.Lock()
		// A burst ends a step and a half ahead (or at the segment's end);
		// between two of its chunks busy is briefly false.
		step := l.opts.PreallocateBytes
		done := f.seg == nil || f.off || !f.pause.IsZero() || !f.busy && (f.done-f.want >= step+step/2 || f.done >= l.opts.SegmentBytes)
		f.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the filler did not catch up in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// With PreallocateWrite the space ahead of the appends is written zeros
// (no hole: blocks allocated and written, unlike fallocate's), the data
// reads back whole across rolls, a crash copy recovers without a warning,
// and rolled, closed and cut segments end at their data.
func TestPreallocationWritten(t *testing.T) {
	const step = 16 << 10
	var logs bytes.Buffer
	f := newFixture(t, Options{SegmentBytes: 64 << 10, PreallocateBytes: step, PreallocateWrite: true, Logger: recordingLogger(&logs)})
	f.appendMany(20, 100)
	settle(t, f.l)
	active := lastSegment(t, f.dir)
	data := f.l.Size()
	size := fileSize(t, active)
	if size < data+step+step/2 || size > data+2*step+step/2 {
		t.Fatalf("active segment's file is %d bytes for %d of data, want zeros written up to a step ahead", size, data)
	}
	fh, err := os.Open(active)
	if err != nil {
		t.Fatal(err)
	}
	hole, err := unix.Seek(int(fh.Fd()), data, unix.SEEK_HOLE)
	fh.Close()
	if err != nil || hole != size {
		t.Fatalf("first hole after the data at %d (%v), want none before the end %d: the zeros are not written", hole, err, size)
	}

	crashed := copyDir(t, f.dir)
	c := &fixture{t: t, dir: crashed, opts: f.opts, want: slices.Clone(f.want)}
	c.reopen()
	c.check()
	c.appendMany(5, 100)
	c.reopen()
	c.check()
	if size, _ := fileBytes(t, crashed); size != c.l.Size() {
		t.Fatalf("after a close the files hold %d bytes for %d of data", size, c.l.Size())
	}

	paused := func() bool {
		f.l.fill.mu.Lock()
		defer f.l.fill.mu.Unlock()
		return !f.l.fill.pause.IsZero()
	}
	if paused() {
		t.Fatal("the filler rests while it keeps ahead of small appends")
	}

	// Appends of every size, many larger than a step, with rolls: the
	// writer overtakes the zeros, sometimes until the filler rests
	// (fallocate meanwhile); nothing is lost either way.
	for i := range 300 {
		f.appendMany(1+i%7, 50+(i*997)%9000)
	}
	f.check()
	if f.l.Segments() < 3 {
		t.Fatalf("%d segments, want rolls", f.l.Segments())
	}

	rolledEndAtData(t, f)

	cut := f.l.NextOffset() - 3
	for cut > 0 && f.l.Truncate(cut) != nil {
		cut--
	}
	f.want = f.want[:cut]
	f.check()
	f.appendMany(30, 700)
	f.reopen()
	f.check()
	if size, _ := fileBytes(t, f.dir); size != f.l.Size() {
		t.Fatalf("after a close the files hold %d bytes for %d of data", size, f.l.Size())
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("warnings: %s", logs.String())
	}
}

// A writer whose every append is larger than the zeros ahead of it (a
// disk-bound partition) makes the filler rest, and the log goes on with
// fallocate; a Reset while the filler works leaves it nothing to write
// into.
func TestPreallocationWrittenRests(t *testing.T) {
	const step = 16 << 10
	f := newFixture(t, Options{SegmentBytes: 8 << 20, PreallocateBytes: step, PreallocateWrite: true})
	for range maxOvertaken + 4 {
		// Each past the zeros: a burst stops once 1.5 steps ahead, with
		// at most one more chunk (a step) beyond.
		f.appendMany(1, 4*step)
	}
	f.l.fill.mu.Lock()
	paused := !f.l.fill.pause.IsZero()
	f.l.fill.mu.Unlock()
	if !paused {
		t.Fatal("a writer overtaking the zeros at every append did not make the filler rest")
	}
	f.appendMany(20, 100)
	f.check()
	f.reopen()
	f.check()

	f.appendMany(50, 700)
	if err := f.l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	f.want = nil
	for i := range 1000 {
		f.want = append(f.want, record.Record{Offset: int64(i)})
	}
	f.appendMany(30, 700)
	if got := f.l.NextOffset(); got != 1030 {
		t.Fatalf("after a reset to 1000 and 30 records: next offset %d", got)
	}
	f.reopen()
	if got := readAll(t, f.l, 1000, 1000); len(got) != 30 {
		t.Fatalf("after a reset: read %d records, want 30", len(got))
	}
}

// When writing zeros fails (here the filler's descriptor of the active
// segment is swapped for a read-only one, so its pwrite fails in the
// kernel), the filler turns itself off with a warning, the log goes on
// preallocating with fallocate, and nothing appended before or after is
// lost; a reopened log writes zeros again.
func TestPreallocationWrittenFails(t *testing.T) {
	const step = 16 << 10
	logs := &lockedBuffer{}
	f := newFixture(t, Options{SegmentBytes: 64 << 10, PreallocateBytes: step, PreallocateWrite: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	f.appendMany(20, 100)
	settle(t, f.l)
	fill := f.l.fill
	fill.mu.Lock()
	for fill.busy {
		fill.idle.Wait()
	}
	if fill.file == nil || fill.seg == nil {
		fill.mu.Unlock()
		t.Fatal("the filler has no segment open after writing zeros")
	}
	ro, err := os.Open(fill.seg.path(logSuffix))
	if err != nil {
		fill.mu.Unlock()
		t.Fatal(err)
	}
	fill.file.Close()
	fill.file = ro
	fill.mu.Unlock()

	// Enough to pass the zeros written so far: the filler writes more,
	// and fails (it logs once it has turned itself off).
	const warning = "writing zeros ahead of the appends failed; preallocating with fallocate"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), warning) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning of the failed write in 10 s:\n%s", logs.String())
		}
		f.appendMany(5, 1000)
		time.Sleep(time.Millisecond)
	}
	fill.mu.Lock()
	off := fill.off
	fill.mu.Unlock()
	if !off {
		t.Fatal("the filler is still on after its write failed")
	}
	for i := range 100 {
		f.appendMany(1+i%5, 100+(i*997)%3000)
	}
	if f.l.Segments() < 3 {
		t.Fatalf("%d segments, want rolls after the failure", f.l.Segments())
	}
	f.check()
	f.reopen()
	f.check()
	f.appendMany(20, 100)
	settle(t, f.l)
	fill = f.l.fill
	var end int64
	fill.mu.Lock()
	off, end = fill.off, fill.want
	fill.mu.Unlock()
	if off {
		t.Fatal("a reopened log's filler is off")
	}
	active := lastSegment(t, f.dir)
	fh, err := os.Open(active)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	size := fileSize(t, active)
	if hole, err := unix.Seek(int(fh.Fd()), end, unix.SEEK_HOLE); err != nil || hole != size || size <= end {
		t.Fatalf("after reopening: data up to %d, first hole at %d (%v) in a file of %d bytes: no zeros written", end, hole, err, size)
	}
	f.check()
}

// lockedBuffer is a log destination safe to read while the filler's
// goroutine writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
