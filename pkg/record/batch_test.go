package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"testing"
)

// testRecords makes n records with payloads of payloadLen bytes; every
// third has a key, every fifth two headers.
func testRecords(n, payloadLen int, ts int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.Timestamp = ts + int64(i)*1000
		r.MessageID[0], r.MessageID[15] = byte(i), byte(i>>8)
		r.Payload = bytes.Repeat([]byte{byte('a' + i%26)}, payloadLen)
		if i%3 == 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		if i%5 == 0 {
			r.Headers = []Header{{Key: "h1", Value: []byte("v1")}, {Key: "trace", Value: nil}}
		}
	}
	return recs
}

// recordsEqual reports whether two records hold the same values, treating
// nil and empty payloads alike (the format does not tell them apart).
func recordsEqual(a, b Record) bool {
	if a.Offset != b.Offset || a.MessageID != b.MessageID || a.Timestamp != b.Timestamp ||
		!bytes.Equal(a.Payload, b.Payload) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key) ||
		len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		ha, hb := a.Headers[i], b.Headers[i]
		if ha.Key != hb.Key || (ha.Value == nil) != (hb.Value == nil) || !bytes.Equal(ha.Value, hb.Value) {
			return false
		}
	}
	return true
}

func TestBatchRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
		base int64
	}{
		{"one empty record", []Record{{}}, 0},
		{"one full record", testRecords(1, 100, 1e18), 7},
		{"many records", testRecords(100, 10, 5), 1 << 40},
		{"empty key and value", []Record{{Key: []byte{}, Headers: []Header{{Key: "", Value: []byte{}}}}}, 3},
		{"timestamps going back", []Record{{Timestamp: 100}, {Timestamp: 50}, {Timestamp: 200}, {Timestamp: math.MinInt64}}, 0},
		{"extreme timestamps", []Record{{Timestamp: math.MaxInt64}, {Timestamp: math.MinInt64}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("prefix")
			b := AppendBatch(prefix, tt.base, tt.recs)
			if !bytes.Equal(b[:len(prefix)], prefix) {
				t.Fatal("prefix clobbered")
			}
			b = b[len(prefix):]
			if len(b) != BatchSize(tt.recs) {
				t.Fatalf("encoded %d bytes, BatchSize says %d", len(b), BatchSize(tt.recs))
			}
			h, err := ValidateBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Size() != len(b) || h.BaseOffset != tt.base || h.RecordCount != uint32(len(tt.recs)) ||
				h.NextOffset() != tt.base+int64(len(tt.recs)) || h.FirstTimestamp != tt.recs[0].Timestamp {
				t.Fatalf("header %+v", h)
			}
			got, err := DecodeRecords(nil, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.recs) {
				t.Fatalf("decoded %d records, want %d", len(got), len(tt.recs))
			}
			for i := range got {
				want := tt.recs[i]
				want.Offset = tt.base + int64(i)
				if !recordsEqual(got[i], want) {
					t.Fatalf("record %d: got %+v, want %+v", i, got[i], want)
				}
			}
		})
	}
}

func TestParseBatchErrors(t *testing.T) {
	good := AppendBatch(nil, 5, testRecords(3, 20, 1))
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	fixCRC := func(b []byte) { le.PutUint32(b[offCRC:], crc32.Checksum(b[offMagic:], castagnoli)) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShortBatch},
		{"three bytes", good[:3], ErrShortBatch},
		{"header prefix", good[:30], ErrShortBatch},
		{"records prefix", good[:len(good)-1], ErrShortBatch},
		{"length too small", mutate(func(b []byte) { le.PutUint32(b, 10) }), ErrCorrupt},
		{"length too large", mutate(func(b []byte) { le.PutUint32(b, MaxBatchBytes) }), ErrCorrupt},
		{"bad magic in a prefix", mutate(func(b []byte) { b[offMagic] = 2 })[:10], ErrCorrupt},
		{"compression", mutate(func(b []byte) { b[offAttributes] = 1; fixCRC(b) }), ErrCorrupt},
		{"control, not transactional", mutate(func(b []byte) { b[offAttributes] = 0x80; fixCRC(b) }), ErrCorrupt},
		{"unknown flag", mutate(func(b []byte) { b[offFlags] = 2; fixCRC(b) }), ErrCorrupt},
		{"unknown flag, high byte", mutate(func(b []byte) { b[offFlags+1] = 1; fixCRC(b) }), ErrCorrupt},
		{"delta ids in a batch of one", func() []byte {
			b := AppendBatch(nil, 5, testRecords(1, 20, 1))
			b[offFlags] = 1
			fixCRC(b)
			return b
		}(), ErrCorrupt},
		{"zero records", mutate(func(b []byte) { le.PutUint32(b[offRecordCount:], 0); fixCRC(b) }), ErrCorrupt},
		{"too many records", mutate(func(b []byte) {
			le.PutUint32(b[offRecordCount:], 1000)
			le.PutUint32(b[offLastOffsetDelta:], 999)
			fixCRC(b)
		}), ErrCorrupt},
		{"last offset delta", mutate(func(b []byte) { le.PutUint32(b[offLastOffsetDelta:], 5); fixCRC(b) }), ErrCorrupt},
		{"negative base", mutate(func(b []byte) { le.PutUint64(b[offBaseOffset:], math.MaxUint64); fixCRC(b) }), ErrCorrupt},
		{"crc", mutate(func(b []byte) { b[len(b)-1] ^= 1 }), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBatch(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseBatch: %v, want %v", err, tt.want)
			}
			if _, err := ValidateBatch(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("ValidateBatch: %v, want %v", err, tt.want)
			}
		})
	}
}

// rebuild encodes a batch from a header and raw record bytes, computing
// length and CRC: for building records ValidateBatch must reject.
func rebuild(first, maxTS int64, count int, records []byte) []byte {
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(records))
	b = append(b, records...)
	le.PutUint32(b, uint32(len(b)-4))
	b[offMagic] = Magic
	le.PutUint32(b[offRecordCount:], uint32(count))
	le.PutUint64(b[offFirstTimestamp:], uint64(first))
	le.PutUint64(b[offMaxTimestamp:], uint64(maxTS))
	le.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
	le.PutUint32(b[offCRC:], crc32.Checksum(b[offMagic:], castagnoli))
	return b
}

// rawRec encodes one record from raw fields, each given as bytes.
func rawRec(fields ...[]byte) []byte {
	body := bytes.Join(fields, nil)
	return append(binary.AppendUvarint(nil, uint64(len(body))), body...)
}

func TestValidateBatchRecordErrors(t *testing.T) {
	uv := func(x uint64) []byte { return binary.AppendUvarint(nil, x) }
	v := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	id := make([]byte, 16)
	ok := rawRec(uv(0), v(0), id, v(-1), uv(0), []byte("payload"))
	tests := []struct {
		name    string
		b       []byte
		wantErr bool
	}{
		{"valid", rebuild(0, 0, 1, ok), false},
		{"trailing bytes", rebuild(0, 0, 1, append(bytes.Clone(ok), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), true},
		{"missing record", rebuild(0, 0, 2, append(bytes.Clone(ok), make([]byte, 21)...)), true},
		{"offset delta", rebuild(0, 0, 1, rawRec(uv(1), v(0), id, v(-1), uv(0))), true},
		{"non-minimal varint", rebuild(0, 0, 1, rawRec([]byte{0x80, 0x00}, v(0), id, v(-1), uv(0))), true},
		{"first timestamp delta", rebuild(0, 5, 1, rawRec(uv(0), v(5), id, v(-1), uv(0))), true},
		{"max timestamp", rebuild(0, 9, 1, ok), true},
		{"key too long", rebuild(0, 0, 1, rawRec(uv(0), v(0), id, v(3), uv(0))), true},
		{"key length -2", rebuild(0, 0, 1, rawRec(uv(0), v(0), id, v(-2), uv(0))), true},
		{"short id", rebuild(0, 0, 1, rawRec(uv(0), v(0), id[:10])), true},
		{"header count", rebuild(0, 0, 1, rawRec(uv(0), v(0), id, v(-1), uv(3), []byte{0, 1})), true},
		{"header value length", rebuild(0, 0, 1, rawRec(uv(0), v(0), id, v(-1), uv(1), uv(0), v(-3))), true},
		{"body length overflows", rebuild(0, 0, 1, append(uv(1<<40), ok...)), true},
		{"varint overflow", rebuild(0, 0, 1, append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ok...)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateBatch(tt.b)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ValidateBatch: %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

func TestSetBaseOffsetAndRaftPosition(t *testing.T) {
	b := AppendBatch(nil, 0, testRecords(4, 8, 10))
	SetBaseOffset(b, 1234)
	SetRaftPosition(b, 7, 99)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 1234 || h.RaftTerm != 7 || h.RaftIndex != 99 {
		t.Fatalf("header %+v", h)
	}
	recs, err := DecodeRecords(nil, b)
	if err != nil || recs[3].Offset != 1237 {
		t.Fatalf("records %v, %v", recs, err)
	}
}

func TestAppendBatchAllocations(t *testing.T) {
	recs := testRecords(100, 100, 1)
	dst := make([]byte, 0, 2*BatchSize(recs))
	if n := testing.AllocsPerRun(100, func() { dst = AppendBatch(dst[:0], 1, recs) }); n != 0 {
		t.Fatalf("AppendBatch allocated %v times per run", n)
	}
}

func TestDecodeRecordsSharesHeaders(t *testing.T) {
	b := AppendBatch(nil, 0, testRecords(20, 1, 1))
	var got []Record
	n := testing.AllocsPerRun(20, func() {
		var err error
		if got, err = DecodeRecords(got[:0], b); err != nil {
			t.Fatal(err)
		}
	})
	// One []Header and one string of keys for the batch; got is reused.
	if n > 2 {
		t.Fatalf("DecodeRecords allocated %v times per batch, want <= 2", n)
	}
	if h := got[0].Headers; len(h) != 2 || cap(h) != 2 {
		t.Fatalf("headers %v with capacity %d, want 2 capped", h, cap(h))
	}
}

func TestForEachRecordStops(t *testing.T) {
	b := AppendBatch(nil, 10, testRecords(5, 1, 1))
	var seen []int64
	err := ForEachRecord(b, func(r Record) bool {
		seen = append(seen, r.Offset)
		return r.Offset < 12
	})
	if err != nil || len(seen) != 3 || seen[2] != 12 {
		t.Fatalf("seen %v, err %v", seen, err)
	}
}

func TestOriginCodec(t *testing.T) {
	b := AppendBatch(nil, 0, []Record{{MessageID: MessageID{1}, Timestamp: 1, Payload: []byte("p")}})
	SetOriginCodec(b, 3)
	h, err := ValidateBatch(b)
	if err != nil || h.OriginCodec() != 3 {
		t.Fatalf("codec %d, err %v", h.OriginCodec(), err)
	}
	b[offAttributes] = 5 << 3
	if _, err := ParseBatch(b); err == nil {
		t.Fatal("origin codec 5 accepted")
	}
}

func TestTxnAttributes(t *testing.T) {
	b := AppendBatch(nil, 0, []Record{{MessageID: MessageID{1}, Timestamp: 1, Payload: []byte("p")}})
	SetOriginCodec(b, 2)
	SetTxnAttributes(b, AttrTransactional|AttrControl)
	h, err := ValidateBatch(b)
	if err != nil || !h.Transactional() || !h.Control() || h.OriginCodec() != 2 {
		t.Fatalf("attributes %#x, err %v", h.Attributes, err)
	}
	SetTxnAttributes(b, AttrTransactional)
	if h, err = ValidateBatch(b); err != nil || !h.Transactional() || h.Control() {
		t.Fatalf("attributes %#x, err %v", h.Attributes, err)
	}
	SetTxnAttributes(b, AttrControl) // a marker must be transactional
	if _, err := ValidateBatch(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a non-transactional control batch: %v", err)
	}
}

// The term field carries the Raft term in its low 48 bits and, in its
// top 16, how many batches follow in the same entry (saturating).
func TestSetPositionEntryFollowing(t *testing.T) {
	for _, following := range []int{0, 1, 7, 70000} {
		b := AppendBatch(nil, 0, []Record{{Timestamp: 1, Payload: []byte("x")}})
		SetPosition(b, 42, 1<<40+3, 9, following)
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		want := uint16(min(following, 0xFFFF))
		if h.RaftTerm != 1<<40+3 || h.RaftIndex != 9 || h.BaseOffset != 42 || h.EntryFollowing != want {
			t.Fatalf("following %d: %+v", following, h)
		}
	}
}

// writeHeaders is writeBatch's buffer of a record's headers.
var writeHeaders []byte

// writeBatch writes recs with a BatchWriter after prefix.
func writeBatch(prefix []byte, size int, base int64, recs []Record) []byte {
	w := NewBatchWriter(prefix, size)
	headers := writeHeaders
	defer func() { writeHeaders = headers }()
	for i := range recs {
		r := &recs[i]
		headers = headers[:0]
		for _, h := range r.Headers {
			headers = AppendHeader(headers, h.Key, h.Value)
		}
		w.Append(r.Timestamp, r.MessageID, r.Key, len(r.Headers), headers, r.Payload)
	}
	return w.Finish(base)
}

// A BatchWriter writes the batch AppendBatch writes from the same records,
// whatever size it is told: timestamps before the first, nil and empty
// keys, headers with nil values, one record or many.
func TestBatchWriterWritesWhatAppendBatchWrites(t *testing.T) {
	odd := []Record{
		{Timestamp: 50, Key: []byte{}, Payload: []byte("x")},
		{Timestamp: -1 << 62, MessageID: MessageID{9}, Headers: []Header{{Key: "", Value: []byte{}}, {Key: "k", Value: nil}}},
		{Timestamp: 1 << 62, Key: bytes.Repeat([]byte("k"), 200)},
	}
	// Ids close together, then one too far from the one before to be
	// delta-encoded: the writer rewrites the records before it whole.
	wide := testRecords(40, 30, 9)
	for i := range wide {
		wide[i].MessageID = MessageID{7}.add(0, uint64(i))
	}
	wide[30].MessageID = wide[29].MessageID.add(1<<63, 1<<42)
	for _, recs := range [][]Record{testRecords(1, 10, 5), testRecords(100, 100, 1), odd, wide, wide[:30]} {
		want := AppendBatch([]byte("prefix"), 77, recs)
		for _, size := range []int{0, BatchSize(recs), 2 * BatchSize(recs)} {
			if got := writeBatch([]byte("prefix"), size, 77, recs); !bytes.Equal(got, want) {
				t.Fatalf("%d records, size %d: %d bytes, want %d", len(recs), size, len(got), len(want))
			}
		}
	}
	if _, err := ValidateBatch(writeBatch(nil, 0, 0, odd)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a batch of no records was finished")
		}
	}()
	w := NewBatchWriter(nil, 0)
	w.Finish(0)
}

func TestBatchWriterAllocations(t *testing.T) {
	recs := testRecords(100, 100, 1)
	size := BatchSize(recs)
	dst := make([]byte, 0, size)
	writeBatch(nil, 0, 0, recs) // its headers buffer has grown
	if n := testing.AllocsPerRun(100, func() { dst = writeBatch(dst[:0], size, 1, recs) }); n != 0 {
		t.Fatalf("a BatchWriter allocated %v times per run", n)
	}
}

// Ids made close together are delta-encoded; a batch may still carry
// them whole (an encoder that never delta-encodes is valid), and a
// delta-encoded batch whose delta is longer than a whole id is corrupt.
func TestDeltaIDs(t *testing.T) {
	recs := make([]Record, 50)
	for i := range recs {
		recs[i] = Record{MessageID: NewMessageID(), Timestamp: int64(i) * 100_000, Payload: make([]byte, 100)}
	}
	b := AppendBatch(nil, 3, recs)
	whole := appendBatch(nil, 3, recs, false)
	h, err := ValidateBatch(b)
	if err != nil || !h.DeltaIDs() {
		t.Fatalf("header %+v, %v: want delta-encoded ids", h, err)
	}
	if saved := (len(whole) - len(b)) / (len(recs) - 1); saved < 12 {
		t.Fatalf("delta-encoded ids save %d bytes a record, want at least 12", saved)
	}
	for _, enc := range [][]byte{b, whole} {
		got, _, err := DecodeValidBatch(nil, enc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			want := recs[i]
			want.Offset = 3 + int64(i)
			if !recordsEqual(got[i], want) {
				t.Fatalf("record %d: %+v, want %+v", i, got[i], want)
			}
		}
	}

	// Flag a batch of ids 17 bytes apart as delta-encoded: record 1's
	// delta is then longer than its id.
	far := []Record{{MessageID: MessageID{1}}, {MessageID: MessageID{1}.add(1<<63, 1<<42)}}
	bad := appendBatch(nil, 0, far, true)
	le.PutUint32(bad[offCRC:], crc32.Checksum(bad[offMagic:], castagnoli))
	if _, err := ValidateBatch(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a 17-byte id delta: %v, want ErrCorrupt", err)
	}
	if ok := AppendBatch(nil, 0, far); BatchHeaderSize+2*(1+4+16) != len(ok) {
		t.Fatalf("ids 17 bytes apart: a batch of %d bytes, want whole ids", len(ok))
	}
}

func TestIDDeltaWraps(t *testing.T) {
	a := MessageID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	b := MessageID{15: 1}
	hi, lo := idDelta(&a, &b)
	if hi != 1 || lo != 2 || a.add(uint64(hi), uint64(lo)) != b || idDeltaLen(&a, &b) != 2 {
		t.Fatalf("delta from %x to %x: %d, %d", a, b, hi, lo)
	}
}

// idDeltaFits agrees with idDeltaLen around its shortcut's bounds.
func TestIDDeltaFits(t *testing.T) {
	base := MessageID{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}
	for _, hi := range []int64{0, 1, -1, 1<<55 - 1, -1 << 55, 1 << 55, -1<<55 - 1, 1 << 62, math.MinInt64, math.MaxInt64} {
		for _, lo := range []int64{0, -1, 1 << 41, 1 << 42, -1<<42 - 1, 1<<55 - 1, 1 << 55, math.MinInt64} {
			id := base.add(uint64(hi), uint64(lo))
			if got, want := idDeltaFits(&base, &id), idDeltaLen(&base, &id) <= 16; got != want {
				t.Errorf("deltas %d, %d: fits %v, length %d", hi, lo, got, idDeltaLen(&base, &id))
			}
		}
	}
}
