package record

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"testing"
)

// vectorsFile holds batches encoded by this package with the records they
// hold. The Python and TypeScript SDKs read the same file and must encode
// every case to exactly these bytes and decode the bytes to these records,
// so that the three implementations of the format cannot drift apart.
const vectorsFile = "testdata/batch_vectors.json"

var updateVectors = flag.Bool("update-vectors", false, "rewrite "+vectorsFile+" from the cases in vectors_test.go")

// The JSON form of a vector. Byte strings are hex; a nil key or header
// value is JSON null, an empty one "". Timestamps and base offsets are
// decimal strings because they do not all fit a JSON number exactly.
type (
	vectorFile struct {
		Comment string   `json:"comment"`
		Vectors []vector `json:"vectors"`
	}
	vector struct {
		Name       string         `json:"name"`
		BaseOffset string         `json:"base_offset"`
		Records    []vectorRecord `json:"records"`
		Batch      string         `json:"batch"`
	}
	vectorRecord struct {
		MessageID string         `json:"message_id"`
		Timestamp string         `json:"timestamp"`
		Key       *string        `json:"key"`
		Headers   []vectorHeader `json:"headers"`
		Payload   string         `json:"payload"`
	}
	vectorHeader struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	}
)

func vectorCases() []vector {
	id := func(b ...byte) MessageID {
		var m MessageID
		copy(m[:], b)
		return m
	}
	utf8 := []byte("héllo, wörld ✓")
	big := bytes.Repeat([]byte{0xA5, 0x00, 0xFF}, 700) // a 2,100-byte payload: two-byte varints
	cases := []struct {
		name string
		base int64
		recs []Record
	}{
		{"one empty record", 0, []Record{{}}},
		{"one keyed record", 42, []Record{{MessageID: id(0x01, 0x93, 0x6b, 0x2c, 0x4a, 0x10, 0x70, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 0x01),
			Timestamp: 1_764_000_000_123_456_789, Key: []byte("order-17"), Payload: []byte(`{"qty":3}`)}}},
		{"nil key, empty key, headers", 7, []Record{
			{MessageID: id(1), Timestamp: 1000, Key: nil, Payload: []byte("a")},
			{MessageID: id(2), Timestamp: 1001, Key: []byte{}, Payload: []byte{}},
			{MessageID: id(3), Timestamp: 1002, Key: []byte("k"), Headers: []Header{
				{Key: "trace", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
				{Key: "nil", Value: nil}, {Key: "empty", Value: []byte{}}, {Key: "trace", Value: []byte("dup")}}, Payload: utf8},
		}},
		{"timestamps going back and extremes", 1 << 40, []Record{
			{MessageID: id(9), Timestamp: 100}, {MessageID: id(8), Timestamp: 50},
			{MessageID: id(7), Timestamp: math.MaxInt64}, {MessageID: id(6), Timestamp: math.MinInt64},
		}},
		{"large payload", math.MaxInt64 - 10, []Record{{MessageID: id(0xff, 0xee), Timestamp: -1, Key: big[:300], Payload: big}}},
	}
	many := make([]Record, 130) // offset deltas past one varint byte
	for i := range many {
		many[i] = Record{MessageID: id(byte(i), byte(i>>8), 0x42), Timestamp: 1_700_000_000_000_000_000 + int64(i)*997, Payload: bytes.Repeat([]byte{byte('a' + i%26)}, i%40)}
		if i%3 == 0 {
			many[i].Key = []byte{byte(i)}
		}
	}
	cases = append(cases, struct {
		name string
		base int64
		recs []Record
	}{"130 records", 123_456, many})

	// Ids as one process makes them (UUIDv7: milliseconds, version, 12
	// bits of sub-millisecond time, variant, a random start plus a
	// counter), 100 µs apart: delta-encoded in 2 to 4 bytes each.
	v7 := func(ns int64, seq uint64) MessageID {
		var m MessageID
		ms, sub := uint64(ns/1e6), uint64(ns%1e6)*4096/1e6
		binary.BigEndian.PutUint64(m[0:8], ms<<16|0x7000|sub&0x0fff)
		binary.BigEndian.PutUint64(m[8:16], 0x8000000000000000|(0x1234_5678_9abc_def0+seq)&0x3fffffffffffffff)
		return m
	}
	var uuids []Record
	for i := range 24 {
		ns := int64(1_764_000_000_000_950_000) + int64(i)*100_000
		uuids = append(uuids, Record{MessageID: v7(ns, uint64(i)), Timestamp: ns, Payload: []byte{byte(i)}})
	}
	// A delta of exactly 16 bytes (10 for the high half, 6 for the low)
	// is still delta-encoded; one of 17 or more makes every id whole.
	far := func(loDelta uint64) []Record {
		a := id(0x01, 0x93, 0, 0, 0, 0, 0x70, 0, 0x80, 0, 0, 0, 0, 0, 0, 0x05)
		return []Record{{MessageID: a, Payload: []byte("a")}, {MessageID: a.add(1<<63, loDelta), Payload: []byte("b")}, {MessageID: a.add(1<<63, loDelta+1), Payload: []byte("c")}}
	}
	for _, c := range []struct {
		name string
		recs []Record
	}{
		{"UUIDv7 ids 100 µs apart", uuids},
		{"an id delta of 16 bytes", far(1 << 35)},
		{"an id delta of 17 bytes: whole ids", far(1 << 42)},
	} {
		cases = append(cases, struct {
			name string
			base int64
			recs []Record
		}{c.name, 99, c.recs})
	}

	out := make([]vector, len(cases))
	for i, c := range cases {
		v := vector{Name: c.name, BaseOffset: itoa(c.base), Batch: hex.EncodeToString(AppendBatch(nil, c.base, c.recs))}
		for _, r := range c.recs {
			vr := vectorRecord{MessageID: hex.EncodeToString(r.MessageID[:]), Timestamp: itoa(r.Timestamp), Key: hexOrNil(r.Key), Payload: hex.EncodeToString(r.Payload), Headers: []vectorHeader{}}
			for _, h := range r.Headers {
				vr.Headers = append(vr.Headers, vectorHeader{Key: h.Key, Value: hexOrNil(h.Value)})
			}
			v.Records = append(v.Records, vr)
		}
		out[i] = v
	}
	return out
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func hexOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	s := hex.EncodeToString(b)
	return &s
}

// TestSharedVectors checks the committed vectors against this package:
// each case encodes to its bytes, and the bytes validate and decode to
// its records. Run with -update-vectors after changing the cases.
func TestSharedVectors(t *testing.T) {
	want := vectorCases()
	if *updateVectors {
		b, err := json.MarshalIndent(vectorFile{
			Comment: "Hermes packed batches (docs/PROTOCOL.md) with the records they hold; written by pkg/record's TestSharedVectors, read by the Go, Python and TypeScript tests. Byte strings are hex, null is a nil key or header value, timestamps (Unix nanoseconds) and base offsets are decimal strings, as they do not all fit a JSON number exactly.",
			Vectors: want,
		}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var got vectorFile
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Vectors) != len(want) {
		t.Fatalf("%s has %d vectors, the cases %d: run go test ./pkg/record -run TestSharedVectors -update-vectors", vectorsFile, len(got.Vectors), len(want))
	}
	for i, v := range got.Vectors {
		w := want[i]
		if v.Batch != w.Batch || v.BaseOffset != w.BaseOffset {
			t.Errorf("vector %q: committed bytes differ from what AppendBatch encodes now", v.Name)
			continue
		}
		b, _ := hex.DecodeString(v.Batch)
		h, err := ValidateBatch(b)
		if err != nil {
			t.Errorf("vector %q: %v", v.Name, err)
			continue
		}
		if itoa(h.BaseOffset) != v.BaseOffset || int(h.RecordCount) != len(v.Records) {
			t.Errorf("vector %q: header %+v", v.Name, h)
		}
		recs, err := DecodeRecords(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range recs {
			vr := v.Records[j]
			if hex.EncodeToString(r.MessageID[:]) != vr.MessageID || itoa(r.Timestamp) != vr.Timestamp ||
				hex.EncodeToString(r.Payload) != vr.Payload || !sameHexOrNil(r.Key, vr.Key) || len(r.Headers) != len(vr.Headers) ||
				itoa(r.Offset) != itoa(h.BaseOffset+int64(j)) {
				t.Errorf("vector %q record %d decodes to %+v", v.Name, j, r)
				continue
			}
			for k, hd := range r.Headers {
				if hd.Key != vr.Headers[k].Key || !sameHexOrNil(hd.Value, vr.Headers[k].Value) {
					t.Errorf("vector %q record %d header %d decodes to %+v", v.Name, j, k, hd)
				}
			}
		}
	}
}

func sameHexOrNil(b []byte, s *string) bool {
	if s == nil || b == nil {
		return s == nil && b == nil
	}
	return hex.EncodeToString(b) == *s
}
