package partlog

import (
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// AppendShared batches, mixed with copied ones and across segment rolls,
// read back exactly, before and after a reopen.
func TestAppendSharedInterleaved(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentBytes: 64 << 10, WriteBufferBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var want []Record
	for i := 0; i < 300; i++ {
		recs := testRecords(1+i%7, 100+i%300, int64(i))
		b := record.AppendBatch(nil, l.NextOffset(), recs)
		if i%3 == 0 {
			if _, err := l.Append(b); err != nil {
				t.Fatal(err)
			}
		} else if err := l.AppendShared(b); err != nil {
			t.Fatal(err)
		}
		for j := range recs {
			recs[j].Offset = int64(len(want) + j)
		}
		want = append(want, recs...)
		if i%50 == 49 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, Options{SegmentBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Segments() < 3 {
		t.Fatalf("only %d segments: the test must cross rolls", l.Segments())
	}
	var got []Record
	for off := int64(0); off < l.NextOffset(); {
		raw, err := l.Read(off, 1<<20, l.NextOffset())
		if err != nil {
			t.Fatal(err)
		}
		for len(raw) > 0 {
			h, err := record.ValidateBatch(raw)
			if err != nil {
				t.Fatalf("at offset %d: %v", off, err)
			}
			got, _ = record.DecodeRecords(got, raw[:h.Size()])
			raw = raw[h.Size():]
			off = h.NextOffset()
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !recordsEqual(got[i], want[i]) {
			t.Fatalf("record %d differs:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
