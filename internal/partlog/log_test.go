package partlog

import (
	"errors"
	"fmt"
	"github.com/hermes-mq/hermes/pkg/record"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixture is a Log under test with a model of what it should hold.
type fixture struct {
	t    *testing.T
	dir  string
	opts Options
	l    *Log
	want []Record // every record appended, Offset filled, from offset 0
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	f := &fixture{t: t, dir: filepath.Join(t.TempDir(), "p0"), opts: opts}
	f.reopen()
	t.Cleanup(func() {
		if f.l != nil {
			f.l.Close()
		}
	})
	return f
}

// reopen closes the log if open and opens it again.
func (f *fixture) reopen() {
	f.t.Helper()
	if f.l != nil {
		if err := f.l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			f.t.Fatal(err)
		}
	}
	l, err := Open(f.dir, f.opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.l = l
}

// appendBatch appends a batch of n records with payloads of size bytes.
// Timestamps grow with the offset but go back within each batch.
func (f *fixture) appendBatch(n, size int) int64 {
	f.t.Helper()
	next := int64(len(f.want))
	recs := testRecords(n, size, 0)
	for i := range recs {
		recs[i].Timestamp = tsOf(next + int64(i))
		recs[i].Payload = []byte(fmt.Sprintf("%0*d", size, next+int64(i)))
	}
	base, err := f.l.Append(record.AppendBatch(nil, 999, recs))
	if err != nil {
		f.t.Fatal(err)
	}
	if base != next {
		f.t.Fatalf("Append gave base %d, want %d", base, next)
	}
	for i := range recs {
		recs[i].Offset = base + int64(i)
	}
	f.want = append(f.want, recs...)
	return base
}

// tsOf is the timestamp of the record at offset o: rising by 10 per
// record, but the second record of each pair of offsets goes back by 5.
func tsOf(o int64) int64 { return 1_000_000 + o*10 - (o%2)*15 }

// appendMany appends batches of 1..4 records until n records were added,
// then syncs.
func (f *fixture) appendMany(n, size int) {
	f.t.Helper()
	for i := 0; n > 0; i++ {
		k := min(n, 1+i%4)
		f.appendBatch(k, size)
		n -= k
	}
	if err := f.l.Sync(); err != nil {
		f.t.Fatal(err)
	}
}

// readAll reads every record from offset from to the end, skipping
// records below from in the first batch.
func readAll(t *testing.T, l *Log, from int64, maxBytes int) []Record {
	t.Helper()
	var out []Record
	for off := from; ; {
		b, err := l.Read(off, maxBytes, l.NextOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if b == nil {
			return out
		}
		for len(b) > 0 {
			h, err := record.ValidateBatch(b)
			if err != nil {
				t.Fatalf("Read(%d) returned a bad batch: %v", off, err)
			}
			recs, err := record.DecodeRecords(nil, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset >= off {
					out = append(out, r)
				}
			}
			off = h.NextOffset()
			b = b[h.Size():]
		}
	}
}

// check reads the whole log and compares it with the model.
func (f *fixture) check() {
	f.t.Helper()
	start := f.l.StartOffset()
	got := readAll(f.t, f.l, start, 1000)
	want := f.want[start:]
	if len(got) != len(want) {
		f.t.Fatalf("read %d records from %d, want %d", len(got), start, len(want))
	}
	for i := range got {
		if !recordsEqual(got[i], want[i]) {
			f.t.Fatalf("record %d: got %+v, want %+v", want[i].Offset, got[i], want[i])
		}
	}
	if f.l.NextOffset() != int64(len(f.want)) {
		f.t.Fatalf("NextOffset %d, want %d", f.l.NextOffset(), len(f.want))
	}
}

func TestAppendReadAcrossRolls(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 2048, IndexIntervalBytes: 300})
	f.appendMany(300, 40)
	if n := f.l.Segments(); n < 10 {
		t.Fatalf("%d segments, want many rolls", n)
	}
	f.check()
	// Every offset, as the first record the caller keeps.
	for o := int64(0); o < f.l.NextOffset(); o++ {
		got := readAll(t, f.l, o, 0)
		if len(got) == 0 || got[0].Offset != o {
			t.Fatalf("read from %d starts at %v", o, got)
		}
	}
	// The files hold the data, and the active segment's preallocated
	// space until the log is closed.
	size, files := fileBytes(t, f.dir)
	if size < f.l.Size() || size > f.l.Size()+f.opts.SegmentBytes || len(files) != f.l.Segments() {
		t.Fatalf("files hold %d bytes in %d segments, Size() %d, Segments() %d", size, len(files), f.l.Size(), f.l.Segments())
	}
	logical, segs := f.l.Size(), f.l.Segments()
	f.l.Close()
	if size, files := fileBytes(t, f.dir); size != logical || len(files) != segs {
		t.Fatalf("closed: files hold %d bytes in %d segments, Size() was %d, Segments() %d", size, len(files), logical, segs)
	}
}

// fileBytes returns the total size of the segment files in dir, and
// their paths in order.
func fileBytes(t *testing.T, dir string) (int64, []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, p := range files {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	return size, files
}

func TestReopenKeepsEverything(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1500, IndexIntervalBytes: 200})
	f.appendMany(100, 30)
	segs, size := f.l.Segments(), f.l.Size()
	idx, _ := os.ReadFile(filepath.Join(f.dir, segmentFile(0, indexSuffix)))
	f.reopen()
	if f.l.Segments() != segs || f.l.Size() != size || f.l.SyncedOffset() != 100 {
		t.Fatalf("after reopen: %d segments, %d bytes, synced %d", f.l.Segments(), f.l.Size(), f.l.SyncedOffset())
	}
	if idx2, _ := os.ReadFile(filepath.Join(f.dir, segmentFile(0, indexSuffix))); string(idx) != string(idx2) || len(idx) == 0 {
		t.Fatalf("index of the first segment changed on reopen (%d -> %d bytes)", len(idx), len(idx2))
	}
	f.check()
	f.appendMany(50, 30)
	f.reopen()
	f.check()
}

func TestReadLimitAndMaxBytes(t *testing.T) {
	f := newFixture(t, Options{})
	for i := 0; i < 10; i++ {
		f.appendBatch(3, 50) // batches [0,3) [3,6) ... [27,30)
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	b, _ := f.l.Read(0, 0, 30)
	one := len(b)
	tests := []struct {
		name          string
		offset, limit int64
		maxBytes      int
		wantFirst     int64 // base of the first batch; -1 for nil
		wantBatches   int
	}{
		{"maxBytes 0 gives one batch", 4, 30, 0, 3, 1},
		{"maxBytes smaller than a batch", 4, 30, one - 1, 3, 1},
		{"maxBytes of two batches", 4, 30, 2*one + 1, 3, 2},
		{"maxBytes large", 0, 30, 1 << 20, 0, 10},
		{"limit stops before its batch", 0, 9, 1 << 20, 0, 3},
		{"limit inside a batch keeps it", 0, 10, 1 << 20, 0, 4},
		{"offset at limit", 9, 9, 1 << 20, -1, 0},
		{"offset past limit", 12, 9, 1 << 20, -1, 0},
		{"offset at the end", 30, 100, 1 << 20, -1, 0},
		{"middle of a batch", 29, 30, 1 << 20, 27, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := f.l.Read(tt.offset, tt.maxBytes, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantFirst < 0 {
				if b != nil {
					t.Fatalf("got %d bytes, want nil", len(b))
				}
				return
			}
			var bases []int64
			for len(b) > 0 {
				h, err := record.ParseBatch(b)
				if err != nil {
					t.Fatal(err)
				}
				bases = append(bases, h.BaseOffset)
				b = b[h.Size():]
			}
			if len(bases) != tt.wantBatches || bases[0] != tt.wantFirst {
				t.Fatalf("batches at %v, want %d starting at %d", bases, tt.wantBatches, tt.wantFirst)
			}
		})
	}
}

func TestReadSeesOnlyWrittenBytes(t *testing.T) {
	f := newFixture(t, Options{})
	f.appendBatch(2, 10)
	if b, err := f.l.Read(0, 100, 100); b != nil || err != nil {
		t.Fatalf("read of a buffered batch: %d bytes, %v", len(b), err)
	}
	if f.l.SyncedOffset() != 0 || f.l.NextOffset() != 2 {
		t.Fatalf("synced %d next %d", f.l.SyncedOffset(), f.l.NextOffset())
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.l.SyncedOffset() != 2 {
		t.Fatalf("synced %d after Sync", f.l.SyncedOffset())
	}
	f.check()
}

func TestLargeBatches(t *testing.T) {
	// Batches larger than the write buffer and than a segment.
	f := newFixture(t, Options{SegmentBytes: 4096, WriteBufferBytes: 1024, IndexIntervalBytes: 512})
	f.appendBatch(1, 10)
	f.appendBatch(3, 3000) // > segment: alone in a new one
	f.appendBatch(2, 600)  // > buffer
	f.appendBatch(1, 10)
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.l.Segments() != 3 {
		t.Fatalf("%d segments, want 3", f.l.Segments())
	}
	f.check()
	f.reopen()
	f.check()
}

func TestOffsetForTime(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1024, IndexIntervalBytes: 200})
	f.appendMany(120, 20)
	// The answer by brute force over the model.
	first := func(ts int64) int64 {
		for _, r := range f.want {
			if r.Timestamp >= ts {
				return r.Offset
			}
		}
		return int64(len(f.want))
	}
	for _, ts := range []int64{0, tsOf(0), tsOf(1), tsOf(2), tsOf(37), tsOf(37) + 1, tsOf(64) - 3, tsOf(119), tsOf(119) + 1, 1 << 62} {
		got, err := f.l.OffsetForTime(ts)
		if err != nil {
			t.Fatal(err)
		}
		if want := first(ts); got != want {
			t.Errorf("OffsetForTime(%d) = %d, want %d", ts, got, want)
		}
	}
}

func TestSentinelErrors(t *testing.T) {
	f := newFixture(t, Options{})
	f.appendBatch(3, 10)
	f.appendBatch(3, 10)
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	other := record.AppendBatch(nil, 5, testRecords(1, 1, 1))
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"read past the end", second(f.l.Read(7, 10, 100)), ErrOffsetOutOfRange},
		{"read below the start", second(f.l.Read(-1, 10, 100)), ErrOffsetOutOfRange},
		{"append raw at the wrong offset", f.l.AppendRaw(other), ErrOffsetMismatch},
		{"append a partial batch", second(f.l.Append(other[:len(other)-1])), ErrCorrupt},
		{"append two batches at once", second(f.l.Append(append(other, other...))), ErrCorrupt},
		{"truncate inside a batch", f.l.Truncate(4), ErrNotBatchBoundary},
		{"truncate past the end", f.l.Truncate(7), ErrOffsetOutOfRange},
		{"bad options", second(Open(t.TempDir(), Options{SegmentBytes: -1})), ErrInvalidOptions},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	closed := []error{
		f.l.Close(), f.l.Sync(), second(f.l.Append(other)), f.l.AppendRaw(other), f.l.Truncate(0),
		second(f.l.Read(0, 1, 1)), second(f.l.OffsetForTime(0)), second(f.l.EnforceRetention(timeZero)),
	}
	for i, err := range closed {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("call %d after Close: %v, want ErrClosed", i, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestAppendRaw(t *testing.T) {
	f := newFixture(t, Options{})
	b := record.AppendBatch(nil, 0, testRecords(2, 5, 1))
	record.SetRaftPosition(b, 3, 17)
	if err := f.l.AppendRaw(b); err != nil {
		t.Fatal(err)
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := f.l.Read(0, 0, 2)
	if err != nil || string(got) != string(b) {
		t.Fatalf("read %x, %v; want the raw batch %x", got, err, b)
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t, Options{})
	f.appendMany(5, 5)
	if err := f.l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir still there: %v", err)
	}
}

// Open fsyncs the parent of every directory it creates, so that a new
// log's directories survive a power failure.
func TestOpenSyncsNewDirectories(t *testing.T) {
	root := t.TempDir()
	var synced []string
	syncDirHook = func(dir string) { synced = append(synced, dir) }
	t.Cleanup(func() { syncDirHook = nil })
	dir := filepath.Join(root, "topics", "t@1", "0")
	l, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, want := range []string{root, filepath.Join(root, "topics"), filepath.Join(root, "topics", "t@1"), dir} {
		if !slices.Contains(synced, want) {
			t.Errorf("%s was not fsynced (fsynced: %v)", want, synced)
		}
	}
}

// openFilesIn counts this process's open files under dir.
func openFilesIn(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// A log holds one open file per segment, no index file: the active
// segment's index lives in memory and is written when the segment rolls.
func TestOneOpenFilePerSegment(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 1 << 20})
	f.appendMany(100, 100)
	if n := openFilesIn(t, f.dir); n != 1 {
		t.Fatalf("one segment: %d files open, want 1", n)
	}
	for f.l.Segments() < 3 {
		f.appendMany(1000, 1000)
	}
	if n, want := openFilesIn(t, f.dir), f.l.Segments(); n != want {
		t.Fatalf("%d segments: %d files open, want %d", want, n, want)
	}
	f.reopen()
	f.check()
	if n, want := openFilesIn(t, f.dir), f.l.Segments(); n != want {
		t.Fatalf("reopened, %d segments: %d files open, want %d", want, n, want)
	}
}

// TestReadWithALowLimitReadsLittle: a read for few records (a low limit)
// reads about what it returns, to the index's granularity, not maxBytes:
// a subscriber with 1,000 records of credit once read 4 MiB from disk
// for every 1,000 records of 100 bytes it was sent.
func TestReadWithALowLimitReadsLittle(t *testing.T) {
	f := newFixture(t, Options{IndexIntervalBytes: 4096})
	for i := 0; i < 2000; i++ {
		f.appendBatch(1, 100) // one record of 100 bytes per batch
	}
	if err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 1, 777, 1990} {
		b, err := f.l.ReadAppend(nil, from, 4<<20, from+10) // its capacity is what it read
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rest := b; len(rest) > 0; n++ {
			h, err := record.ParseBatch(rest)
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseOffset >= from+10 {
				t.Fatalf("from %d: returned the batch at %d, past the limit", from, h.BaseOffset)
			}
			rest = rest[h.Size():]
		}
		if n != int(min(10, 2000-from)) {
			t.Fatalf("from %d: %d batches, want %d", from, n, min(10, 2000-from))
		}
		// The buffer holds what was read: at most the batches wanted plus
		// two index intervals (the read starts at the batch, ends at the
		// next index entry at or past the limit).
		if c := cap(b); c > 10*200+2*4096 {
			t.Fatalf("from %d: read %d bytes for %d returned", from, c, len(b))
		}
	}
}
