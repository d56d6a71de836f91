package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func FuzzValidateBatch(f *testing.F) {
	seeds := [][]byte{
		AppendBatch(nil, 0, []Record{{}}),
		AppendBatch(nil, 3, testRecords(3, 5, 100)),
		AppendBatch(nil, 1<<33, []Record{{Key: []byte{}, Headers: []Header{{Key: "k"}}, Timestamp: -5}, {Timestamp: 9}}),
	}
	for _, s := range seeds {
		f.Add(s)
		f.Add(s[:len(s)-1])
		m := bytes.Clone(s)
		m[BatchHeaderSize+2] ^= 0x40
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidateProperty(t, b)
		// Random bytes almost never carry a right CRC: check them again
		// with it fixed so the fuzzer reaches the record decoder.
		if len(b) >= BatchHeaderSize {
			if size := 4 + int(le.Uint32(b)); size >= BatchHeaderSize && size <= len(b) {
				fixed := bytes.Clone(b)
				le.PutUint32(fixed[offCRC:], crc32.Checksum(fixed[offMagic:size], castagnoli))
				checkValidateProperty(t, fixed)
			}
		}
	})
}

// checkValidateProperty: ValidateBatch never panics and fails only with
// ErrCorrupt or ErrShortBatch; what it accepts decodes, and re-encodes to
// the same bytes when the Raft fields (term, entries following, index)
// are 0 (its attribute bits set again, as the Kafka adapter sets them
// after encoding, and its ids whole when they are whole: an encoder may
// always write them so).
func checkValidateProperty(t *testing.T, b []byte) {
	checkRawReader(t, b)
	h, err := ValidateBatch(b)
	one, oneH, oneErr := DecodeValidBatch(nil, b)
	if (oneErr == nil) != (err == nil) {
		t.Fatalf("ValidateBatch says %v, DecodeValidBatch %v", err, oneErr)
	}
	_, st, inspectErr := Inspect(b)
	_, _, oneSt, oneInspectErr := DecodeInspect(nil, b)
	if (inspectErr == nil) != (err == nil) || (oneInspectErr == nil) != (err == nil) || err == nil && st != oneSt {
		t.Fatalf("ValidateBatch says %v; Inspect %v and %+v; DecodeInspect %v and %+v", err, inspectErr, st, oneInspectErr, oneSt)
	}
	if err == nil {
		two, _ := DecodeRecords(nil, b)
		if oneH != h || len(one) != len(two) {
			t.Fatalf("DecodeValidBatch: header %+v and %d records, ValidateBatch and DecodeRecords: %+v and %d", oneH, len(one), h, len(two))
		}
		for i := range one {
			if !recordsEqual(one[i], two[i]) {
				t.Fatalf("record %d: DecodeValidBatch %+v, DecodeRecords %+v", i, one[i], two[i])
			}
		}
	}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrShortBatch) {
			t.Fatalf("error %v is neither ErrCorrupt nor ErrShortBatch", err)
		}
		DecodeRecords(nil, b) // must not panic either
		return
	}
	recs, err := DecodeRecords(nil, b)
	if err != nil {
		t.Fatalf("ValidateBatch accepted what DecodeRecords rejects: %v", err)
	}
	if len(recs) != int(h.RecordCount) {
		t.Fatalf("decoded %d records, header says %d", len(recs), h.RecordCount)
	}
	if h.RaftTerm != 0 || h.EntryFollowing != 0 || h.RaftIndex != 0 {
		return
	}
	if h.DeltaIDs() && !deltaIDs(recs) {
		t.Fatalf("ValidateBatch accepted delta-encoded ids where AppendBatch writes whole ones")
	}
	re := appendBatch(nil, h.BaseOffset, recs, h.DeltaIDs())
	if h.Attributes != 0 { // the Kafka adapter's bits: set on a batch after encoding
		SetOriginCodec(re, h.OriginCodec())
		SetTxnAttributes(re, h.Attributes)
	}
	if !bytes.Equal(re, b[:h.Size()]) {
		t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, b[:h.Size()])
	}
}

// FuzzRoundTrip builds records from fuzzer bytes: each record takes a
// timestamp, a key mode and header count from the input and splits the
// rest into key, header and payload bytes.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int64(0), uint8(1), []byte("hello world"))
	f.Add(int64(-1<<62), uint8(7), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	f.Add(int64(1<<62), uint8(255), bytes.Repeat([]byte{0xAB}, 300))
	f.Fuzz(func(t *testing.T, base int64, n uint8, data []byte) {
		if base < 0 {
			base = -(base + 1)
		}
		base >>= 1 // leave room for the offsets
		recs := fuzzRecords(int(n%16)+1, data)
		b := AppendBatch(nil, base, recs)
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("ValidateBatch(AppendBatch(...)): %v", err)
		}
		if h.Size() != len(b) || BatchSize(recs) != len(b) {
			t.Fatalf("size %d, BatchSize %d, encoded %d", h.Size(), BatchSize(recs), len(b))
		}
		if h.DeltaIDs() != deltaIDs(recs) {
			t.Fatalf("delta-encoded ids %v, want %v", h.DeltaIDs(), deltaIDs(recs))
		}
		if w := writeBatch(nil, 0, base, recs); !bytes.Equal(w, b) {
			t.Fatalf("BatchWriter wrote\n%x\nAppendBatch\n%x", w, b)
		}
		got, err := DecodeRecords(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			want := recs[i]
			want.Offset = base + int64(i)
			if !recordsEqual(got[i], want) {
				t.Fatalf("record %d: got %+v, want %+v", i, got[i], want)
			}
		}
	})
}

// fuzzRecords makes n records out of data, deterministically.
func fuzzRecords(n int, data []byte) []Record {
	take := func(k int) []byte {
		k = min(k, len(data))
		b := data[:k:k]
		data = data[k:]
		return b
	}
	byteAt := func() int {
		if b := take(1); len(b) == 1 {
			return int(b[0])
		}
		return 0
	}
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		if ts := take(8); len(ts) == 8 {
			r.Timestamp = int64(binary.LittleEndian.Uint64(ts))
		}
		copy(r.MessageID[:], take(16))
		if id := r.MessageID; i > 0 && id[0]&0x80 != 0 {
			// An id near the one before, as ids made close together are:
			// its delta takes from 2 to 20 bytes.
			r.MessageID = recs[i-1].MessageID.add(uint64(int64(int8(id[1])))<<(id[2]%64), uint64(int64(int8(id[3])))<<(id[4]%64))
		}
		mode := byteAt()
		if mode&1 != 0 {
			r.Key = take(mode >> 3)
		}
		for j := 0; j < (mode>>1)&3; j++ {
			h := Header{Key: string(take(byteAt() % 8))}
			if byteAt()&1 != 0 {
				h.Value = take(byteAt() % 16)
			}
			r.Headers = append(r.Headers, h)
		}
		r.Payload = take(byteAt())
	}
	return recs
}

// checkRawReader: a RawReader reads what DecodeRecords decodes, record
// for record, and fails where it fails (neither checks the CRC).
func checkRawReader(t *testing.T, b []byte) {
	recs, decErr := DecodeRecords(nil, b)
	rr, err := NewRawReader(b)
	if err != nil {
		if decErr == nil {
			t.Fatalf("NewRawReader: %v; DecodeRecords: no error", err)
		}
		return
	}
	var r RawRecord
	i := 0
	for ; rr.Next(&r); i++ {
		if i >= len(recs) {
			if decErr == nil {
				t.Fatalf("RawReader read record %d of %d", i, len(recs))
			}
			continue
		}
		d := recs[i]
		if rr.Header().FirstTimestamp+r.TimestampDelta != d.Timestamp || r.MessageID != d.MessageID ||
			!bytes.Equal(r.Key, d.Key) || (r.Key == nil) != (d.Key == nil) || !bytes.Equal(r.Payload, d.Payload) ||
			r.HeaderCount != len(d.Headers) {
			t.Fatalf("record %d: raw %+v, decoded %+v", i, r, d)
		}
		key := cursor{b: r.KeyEncoded}
		if k := key.lenBytes("key"); key.err != nil || key.left() != 0 || !bytes.Equal(k, d.Key) {
			t.Fatalf("record %d: KeyEncoded %x is not the key %x", i, r.KeyEncoded, d.Key)
		}
	}
	if (rr.Err() == nil) != (decErr == nil) {
		t.Fatalf("RawReader: %v; DecodeRecords: %v", rr.Err(), decErr)
	}
	if decErr == nil && i != len(recs) {
		t.Fatalf("RawReader read %d records, DecodeRecords %d", i, len(recs))
	}
}
