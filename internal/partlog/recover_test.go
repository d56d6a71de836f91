package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/hermes-mq/hermes/pkg/record"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lastSegment returns the path of the newest .log file in dir.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	return files[len(files)-1] // names sort by base offset
}

// batchStarts returns the positions of the batches in a segment file.
func batchStarts(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for pos := 0; pos < len(b); {
		h, err := record.ParseBatch(b[pos:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, pos, err)
		}
		starts = append(starts, int64(pos))
		pos += h.Size()
	}
	return starts
}

// recordingLogger keeps the messages of the records logged to it.
func recordingLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

func TestRecoverDamagedTail(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string, lastBatch int64) // damages the last batch
	}{
		{"torn mid-batch", func(t *testing.T, path string, last int64) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, last+(st.Size()-last)/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"torn mid-header", func(t *testing.T, path string, last int64) {
			if err := os.Truncate(path, last+7); err != nil {
				t.Fatal(err)
			}
		}},
		{"flipped byte", func(t *testing.T, path string, last int64) {
			flipByte(t, path, last+BatchHeaderSize+3)
		}},
		{"garbage appended", func(t *testing.T, path string, last int64) {
			appendFile(t, path, bytes.Repeat([]byte{0xEE}, 100))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			f := newFixture(t, Options{SegmentBytes: 2048, Logger: recordingLogger(&logs)})
			f.appendMany(60, 30)
			f.l.Close()
			path := lastSegment(t, f.dir)
			orig := mustRead(t, path)
			starts := batchStarts(t, path)
			last := starts[len(starts)-1]
			wantSize := int64(len(orig)) // garbage after the last batch is cut
			if !strings.Contains(tt.name, "appended") {
				h, _ := record.ParseBatch(orig[last:])
				f.want = f.want[:len(f.want)-int(h.RecordCount)] // the last batch is lost
				wantSize = last
			}
			tt.damage(t, path, last)
			f.l = nil
			f.reopen()
			f.check()
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), filepath.Base(path)) {
				t.Fatalf("no warning naming the segment: %s", logs.String())
			}
			if st, _ := os.Stat(path); st.Size() != wantSize {
				t.Fatalf("file cut to %d bytes, want %d", st.Size(), wantSize)
			}
			f.appendMany(10, 30) // the next append gets the right offset (checked by appendBatch)
			f.reopen()
			f.check()
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	b := mustRead(t, path)
	b[pos] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(data); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverIndexes(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"index deleted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, segmentFile(0, indexSuffix)))
		}},
		{"time index deleted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, segmentFile(0, timeIndexSuffix)))
		}},
		{"index garbage", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, segmentFile(0, indexSuffix)), bytes.Repeat([]byte{0x5A}, 24), 0o644)
		}},
		{"index torn", func(t *testing.T, dir string) {
			p := filepath.Join(dir, segmentFile(0, indexSuffix))
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-3)
		}},
		{"index entry points mid-batch", func(t *testing.T, dir string) {
			p := filepath.Join(dir, segmentFile(0, indexSuffix))
			b := mustRead(t, p)
			le.PutUint32(b[len(b)-4:], le.Uint32(b[len(b)-4:])+1)
			os.WriteFile(p, b, 0o644)
		}},
		{"last segment index garbage", func(t *testing.T, dir string) {
			p := strings.TrimSuffix(lastSegment(t, dir), logSuffix) + indexSuffix
			os.WriteFile(p, []byte("garbage"), 0o644)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{SegmentBytes: 4096, IndexIntervalBytes: 256})
			f.appendMany(150, 30)
			f.l.Close()
			idx := mustRead(t, filepath.Join(f.dir, segmentFile(0, indexSuffix)))
			tidx := mustRead(t, filepath.Join(f.dir, segmentFile(0, timeIndexSuffix)))
			tt.damage(t, f.dir)
			f.l = nil
			f.reopen()
			f.check()
			if got := mustRead(t, filepath.Join(f.dir, segmentFile(0, indexSuffix))); !bytes.Equal(got, idx) {
				t.Fatalf("index not rebuilt: %x, want %x", got, idx)
			}
			if got := mustRead(t, filepath.Join(f.dir, segmentFile(0, timeIndexSuffix))); !bytes.Equal(got, tidx) {
				t.Fatalf("time index not rebuilt")
			}
		})
	}
}

// A segment that is not the last whose batches no longer follow on (a
// header damaged, bytes missing) stops the start.
func TestOlderSegmentCorruptIsAnError(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"cut short", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			os.Truncate(path, st.Size()-10)
		}},
		{"whole batch missing", func(t *testing.T, path string) {
			starts := batchStarts(t, path)
			os.Truncate(path, starts[len(starts)-1])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{SegmentBytes: 2048})
			f.appendMany(100, 30)
			f.l.Close()
			path := filepath.Join(f.dir, segmentFile(0, logSuffix))
			tt.damage(t, path)
			segs, _ := filepath.Glob(filepath.Join(f.dir, "*"+logSuffix))
			_, err := Open(f.dir, Options{Logger: quietLogger()})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v, want ErrCorrupt naming %s", err, path)
			}
			if after, _ := filepath.Glob(filepath.Join(f.dir, "*"+logSuffix)); len(after) != len(segs) {
				t.Fatalf("segments deleted: %d -> %d", len(segs), len(after))
			}
		})
	}
}

func TestOrphanIndexFilesRemoved(t *testing.T) {
	f := newFixture(t, Options{})
	f.appendMany(3, 3)
	f.l.Close()
	orphan := filepath.Join(f.dir, segmentFile(500, indexSuffix))
	os.WriteFile(orphan, []byte("x"), 0o644)
	f.l = nil
	f.reopen()
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan index kept: %v", err)
	}
	f.check()
}

// TestOlderSegmentCorruptBodyIsServedAround: a bit flipped in the body of
// a batch of an older segment (its headers still follow on) does not stop
// the start: a read of that batch fails naming the file, every other
// batch is served.
func TestOlderSegmentCorruptBodyIsServedAround(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"flipped byte in its last batch", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			flipByte(t, path, st.Size()-2)
		}},
		{"flipped byte with index gone", func(t *testing.T, path string) {
			flipByte(t, path, 70)
			os.Remove(strings.TrimSuffix(path, logSuffix) + indexSuffix)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{SegmentBytes: 2048})
			f.appendMany(100, 30)
			f.l.Close()
			path := filepath.Join(f.dir, segmentFile(0, logSuffix))
			tt.damage(t, path)
			f.reopen()
			bad := 0
			for off := int64(0); off < f.l.NextOffset(); {
				b, err := f.l.Read(off, 1, f.l.NextOffset())
				if errors.Is(err, ErrCorrupt) && strings.Contains(err.Error(), path) {
					bad++
				} else if err != nil {
					t.Fatalf("read at %d: %v", off, err)
				}
				next := off + 1
				if err == nil {
					h, _ := record.ParseHeader(b)
					next = h.NextOffset()
					record.ForEachRecord(b, func(r Record) bool {
						if !recordsEqual(r, f.want[r.Offset]) {
							t.Fatalf("record %d differs", r.Offset)
						}
						return true
					})
				}
				off = next
			}
			if bad == 0 {
				t.Fatal("no read reported the corrupt batch")
			}
		})
	}
}

// TestRepairRewritesADamagedBatch: a batch whose body was damaged on the
// disk is rewritten from a good copy (another replica's), in place: reads
// of it succeed again, across a reopen too; a good batch is left alone;
// a copy that is not valid, or not the same batch, is refused.
func TestRepairRewritesADamagedBatch(t *testing.T) {
	f := newFixture(t, Options{SegmentBytes: 2048})
	f.appendMany(100, 30)
	path := filepath.Join(f.dir, segmentFile(0, logSuffix))
	st, _ := os.Stat(path)
	// The last batch of the first segment, as it was written.
	var good []byte
	for off := int64(0); ; {
		b, err := f.l.Read(off, 1, f.l.NextOffset())
		if err != nil {
			t.Fatal(err)
		}
		h, _ := record.ParseHeader(b)
		if h.NextOffset() >= f.l.segs[1].base {
			good = b
			break
		}
		off = h.NextOffset()
	}
	gh, _ := record.ParseHeader(good)
	f.l.Close()
	flipByte(t, path, st.Size()-2)
	f.reopen()
	if _, err := f.l.Read(gh.BaseOffset, 1, f.l.NextOffset()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of the damaged batch: %v", err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	if _, err := f.l.Repair(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("repair with a damaged copy: %v", err)
	}
	wrong := record.AppendBatch(nil, gh.BaseOffset, []record.Record{{Timestamp: 1, Payload: []byte("not the batch")}})
	if _, err := f.l.Repair(wrong); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("repair with another batch at the same offset: %v", err)
	}
	if ok, err := f.l.Repair(good); err != nil || !ok {
		t.Fatalf("repair: %v, %v", ok, err)
	}
	for range 2 {
		b, err := f.l.Read(gh.BaseOffset, 1, f.l.NextOffset())
		if err != nil || !bytes.Equal(b, good) {
			t.Fatalf("read after the repair: %v", err)
		}
		if ok, err := f.l.Repair(good); err != nil || ok {
			t.Fatalf("repair of a good batch: %v, %v", ok, err)
		}
		f.reopen()
	}
}

// TestRepairRewritesADamagedHeader: a batch whose header was damaged
// under a running log (its length or offset no longer right) is put back
// from a good copy: the batch after it says where it ends.
func TestRepairRewritesADamagedHeader(t *testing.T) {
	for _, at := range []int64{1, 9, 12} {
		t.Run(fmt.Sprint("byte ", at), func(t *testing.T) {
			f := newFixture(t, Options{SegmentBytes: 4096})
			f.appendMany(100, 30)
			// The batches of the first segment and where each starts.
			var batches [][]byte
			var poss []int64
			var pos int64
			for off := int64(0); off < f.l.segs[1].base; {
				b, err := f.l.Read(off, 1, f.l.NextOffset())
				if err != nil {
					t.Fatal(err)
				}
				h, _ := record.ParseHeader(b)
				b = b[:h.Size()]
				batches, poss = append(batches, b), append(poss, pos)
				pos += int64(len(b))
				off = h.NextOffset()
			}
			i := len(batches) / 2
			good := batches[i]
			gh, _ := record.ParseHeader(good)
			flipByte(t, filepath.Join(f.dir, segmentFile(0, logSuffix)), poss[i]+at)
			if _, err := f.l.Read(gh.BaseOffset, 1, f.l.NextOffset()); err == nil {
				t.Fatal("the damaged batch reads")
			}
			if ok, err := f.l.Repair(good); err != nil || !ok {
				t.Fatalf("repair: %v, %v", ok, err)
			}
			for j, b := range batches {
				h, _ := record.ParseHeader(b)
				got, err := f.l.Read(h.BaseOffset, 1, f.l.NextOffset())
				if err != nil || !bytes.Equal(got[:len(b)], b) {
					t.Fatalf("batch %d after the repair: %v", j, err)
				}
			}
		})
	}
}
