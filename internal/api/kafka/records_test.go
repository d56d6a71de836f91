package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/pkg/record"
)

// randomBytes returns makers of random bytes: bytesOf(n) gives n of
// them, maybe(max) nil, empty or fewer than max.
func randomBytes(rng *rand.Rand) (bytesOf func(n int) []byte, maybe func(max int) []byte) {
	bytesOf = func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	maybe = func(max int) []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		default:
			return bytesOf(rng.IntN(max))
		}
	}
	return bytesOf, maybe
}

// randomStoredBatch is a stored batch of random records: nil, empty and
// long keys, headers with nil and empty values and keys long enough that
// their length takes more bytes as a zig-zag varint, payloads of any
// size, timestamps out of order; sometimes transactional or marked with
// the codec its Kafka producer used.
func randomStoredBatch(rng *rand.Rand) []byte {
	bytesOf, maybe := randomBytes(rng)
	recs := make([]record.Record, 1+rng.IntN(40))
	base := int64(1_700_000_000_000_000_000) + rng.Int64N(1e15)
	for i := range recs {
		r := &recs[i]
		r.MessageID = record.NewMessageID()
		r.Timestamp = base + rng.Int64N(5e9) - 2e9 // ns, some before the first
		r.Key = maybe(300)
		r.Payload = maybe(2000)
		for range rng.IntN(4) {
			r.Headers = append(r.Headers, record.Header{Key: string(bytesOf(rng.IntN(140))), Value: maybe(200)})
		}
	}
	b := record.AppendBatch(nil, 0, recs)
	record.SetBaseOffset(b, rng.Int64N(1e9))
	record.SetRaftPosition(b, rng.Uint64N(1e6), rng.Uint64N(1e9))
	if rng.IntN(3) == 0 {
		record.SetTxnAttributes(b, record.AttrTransactional)
	}
	if rng.IntN(4) == 0 {
		record.SetOriginCodec(b, uint8(1+rng.IntN(record.MaxOriginCodec)))
	}
	return b
}

// A fetch's one-pass conversion gives the bytes the conversion of the
// decoded records gives, for every kind of record.
func TestStoredBatchAsKafkaMatchesDecodedConversion(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		b := randomStoredBatch(rng)
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := record.DecodeRecords(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		want := appendKafkaBatch([]byte("prefix"), h, recs)
		got := appendStoredBatch([]byte("prefix"), b)
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d (%d records, attributes %#x): %d bytes, want %d", i, len(recs), h.Attributes, len(got), len(want))
		}
	}
}

// A batch that does not decode adds nothing, and what was before stays.
func TestStoredBatchAsKafkaSkipsDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	b := randomStoredBatch(rng)
	for _, bad := range [][]byte{nil, b[:record.BatchHeaderSize-1], b[:len(b)-1]} {
		if got := appendStoredBatch([]byte("x"), bad); string(got) != "x" {
			t.Errorf("%d bytes of a batch: appended %d bytes", len(bad), len(got)-1)
		}
	}
	h, _ := record.ParseHeader(b)
	damaged := bytes.Clone(b)
	damaged[record.BatchHeaderSize] = 0xff // the first record's length: a varint running off the end
	for j := record.BatchHeaderSize + 1; j < record.BatchHeaderSize+10 && j < len(damaged); j++ {
		damaged[j] = 0xff
	}
	if got := appendStoredBatch([]byte("x"), damaged); string(got) != "x" {
		t.Errorf("a damaged batch of %d records: appended %d bytes", h.RecordCount, len(got)-1)
	}
}

// BenchmarkFetchConversion: a fetch's conversion of stored batches of
// 100-byte records to Kafka batches, per record.
func BenchmarkFetchConversion(b *testing.B) {
	recs := make([]record.Record, 400)
	for i := range recs {
		recs[i] = record.Record{MessageID: record.NewMessageID(), Timestamp: int64(1_700_000_000_000_000_000 + i*1000), Payload: bytes.Repeat([]byte{'p'}, 100)}
	}
	stored := record.AppendBatch(nil, 0, recs)
	h, _ := record.ParseHeader(stored)
	var dst []byte
	b.Run("decoded", func(b *testing.B) {
		var rs []record.Record
		for b.Loop() {
			rs, _ = record.DecodeRecords(rs[:0], stored)
			dst = appendKafkaBatch(dst[:0], h, rs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			dst = appendStoredBatch(dst[:0], stored)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
}

// producedRaw is a produced Kafka batch (uncompressed) holding the
// records whose encodings are recs, with its length and CRC set.
func producedRaw(rb kmsg.RecordBatch, recs ...[]byte) []byte {
	rb.Magic, rb.NumRecords, rb.LastOffsetDelta = 2, int32(len(recs)), int32(len(recs)-1)
	rb.Records = bytes.Join(recs, nil)
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32c(raw[crcStart:]))
	return raw
}

// kafkaRecordBytes is r encoded as a Kafka record, its length set.
func kafkaRecordBytes(r kmsg.Record) []byte {
	r.Length = int32(recordBodyLen(&r))
	return r.AppendTo(nil)
}

// randomProduced is a produced batch of random records: nil, empty and
// long keys and values, headers with nil and empty values and keys long
// enough that their length takes more bytes as a zig-zag varint,
// timestamps before and after the first; idempotent or not.
func randomProduced(rng *rand.Rand) []byte {
	bytesOf, maybe := randomBytes(rng)
	tsDelta := func() int64 {
		if rng.IntN(10) == 0 { // as long as a nanosecond varint gets
			return rng.Int64N(1<<62) - 1<<61
		}
		return rng.Int64N(5000) - 2000
	}
	recs := make([][]byte, 1+rng.IntN(40))
	for i := range recs {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: tsDelta(), Key: maybe(300), Value: maybe(2000)}
		for range rng.IntN(4) {
			r.Headers = append(r.Headers, kmsg.Header{Key: string(bytesOf(rng.IntN(140))), Value: maybe(200)})
		}
		recs[i] = kafkaRecordBytes(r)
	}
	rb := kmsg.RecordBatch{ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, FirstTimestamp: 1_700_000_000_000 + rng.Int64N(1e9)}
	if rng.IntN(2) == 0 {
		rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = rng.Int64N(1<<40), int16(rng.IntN(100)), rng.Int32N(1<<30)
	}
	return producedRaw(rb, recs...)
}

// decodedConversion is a produced batch converted through decoded
// records, with the given message ids: what the one-pass conversion must
// equal.
func decodedConversion(t *testing.T, raw []byte, ids []record.MessageID) []byte {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	recs := make([]record.Record, rb.NumRecords)
	data := rb.Records
	for i := range recs {
		var kr kmsg.Record
		l, n := kbin.Varint(data)
		if err := kr.ReadFrom(data[:n+int(l)]); err != nil {
			t.Fatal(err)
		}
		data = data[n+int(l):]
		recs[i] = record.Record{MessageID: ids[i], Timestamp: (rb.FirstTimestamp + kr.TimestampDelta64) * 1e6, Key: kr.Key, Payload: kr.Value}
		for _, h := range kr.Headers {
			recs[i].Headers = append(recs[i].Headers, record.Header{Key: h.Key, Value: h.Value})
		}
	}
	return record.AppendBatch(nil, 0, recs)
}

// A produced batch's one-pass conversion gives the bytes the conversion
// of its decoded records gives, its size is known before it is written,
// and its message ids are the producer's sequences or one UUIDv7
// counting up.
func TestProducedBatchMatchesDecodedConversion(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 13))
	for i := range 3000 {
		raw := randomProduced(rng)
		b, err := parseProduced(raw)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		got := b.hermes
		if bound := record.BatchHeaderSize + len(raw) - batchHeaderLen + maxGrowth*int(b.NumRecords); len(got) > bound {
			t.Fatalf("batch %d: %d bytes, more than the %d allowed for", i, len(got), bound)
		}
		recs, _, err := record.DecodeValidBatch(nil, got)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		ids := make([]record.MessageID, len(recs))
		for j, r := range recs {
			ids[j] = r.MessageID
			want := producerMessageID(b.ProducerID, b.ProducerEpoch, b.FirstSequence+int32(j))
			if !b.idempotent() {
				want = recs[0].MessageID
				binary.BigEndian.PutUint32(want[12:], binary.BigEndian.Uint32(want[12:])+uint32(j))
			}
			if r.MessageID != want {
				t.Fatalf("batch %d record %d: id %x, want %x", i, j, r.MessageID, want)
			}
		}
		if !b.idempotent() && recs[0].MessageID[6]>>4 != 7 {
			t.Fatalf("batch %d: first id %x is not a UUIDv7", i, recs[0].MessageID)
		}
		if want := decodedConversion(t, raw, ids); !bytes.Equal(got, want) {
			t.Fatalf("batch %d (%d records): %d bytes, want %d", i, len(recs), len(got), len(want))
		}
	}
}

// A produced record Kafka's broker would refuse is refused with its code.
func TestProducedRecordsChecked(t *testing.T) {
	good := kafkaRecordBytes(kmsg.Record{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}})
	// body is a record whose fields are given encoded, its length in front.
	body := func(fields ...[]byte) []byte {
		b := bytes.Join(fields, nil)
		return append(kbin.AppendVarint(nil, int32(len(b))), b...)
	}
	v := func(x int32) []byte { return kbin.AppendVarint(nil, x) }
	attrs, ts := []byte{0}, v(0)
	noID := kmsg.RecordBatch{ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}
	for name, tc := range map[string]struct {
		raw  []byte
		code int16
	}{
		"offset delta not the index": {producedRaw(noID, good, kafkaRecordBytes(kmsg.Record{OffsetDelta: 5})), kerr.InvalidRecord.Code},
		"bytes left in a record":     {producedRaw(noID, body(attrs, ts, v(0), v(-1), v(1), []byte("v"), v(0), []byte("extra"))), kerr.CorruptMessage.Code},
		"negative header count":      {producedRaw(noID, body(attrs, ts, v(0), v(-1), v(-1), v(-1))), kerr.InvalidRecord.Code},
		"too many headers":           {producedRaw(noID, body(attrs, ts, v(0), v(-1), v(-1), v(record.MaxRecordHeaders+1))), kerr.InvalidRecord.Code},
		"negative header key length": {producedRaw(noID, body(attrs, ts, v(0), v(-1), v(-1), v(1), v(-1), v(-1))), kerr.CorruptMessage.Code},
		"value past the record":      {producedRaw(noID, body(attrs, ts, v(0), v(-1), v(9), []byte("v"), v(0))), kerr.CorruptMessage.Code},
		"record past the batch":      {producedRaw(noID, good[:len(good)-1]), kerr.CorruptMessage.Code},
		"bytes after the records":    {producedRaw(noID, good, []byte{0}), kerr.CorruptMessage.Code},
		"empty record":               {producedRaw(noID, []byte{0}), kerr.CorruptMessage.Code},
	} {
		if name == "bytes after the records" {
			binary.BigEndian.PutUint32(tc.raw[57:], 1) // one record claimed
			binary.BigEndian.PutUint32(tc.raw[23:], 0) // last offset delta 0
			binary.BigEndian.PutUint32(tc.raw[17:], crc32c(tc.raw[crcStart:]))
		}
		_, err := parseProduced(tc.raw)
		var be *errBatch
		if !errors.As(err, &be) || be.code != tc.code {
			t.Errorf("%s: %v, want code %d", name, err, tc.code)
		}
	}
	if _, err := parseProduced(producedRaw(noID, good)); err != nil {
		t.Fatalf("a good record: %v", err)
	}
}

// BenchmarkProduceConversion: a produce's conversion of a Kafka batch of
// 100-byte records to a Hermes batch, per record.
func BenchmarkProduceConversion(b *testing.B) {
	recs := make([][]byte, 460)
	for i := range recs {
		recs[i] = kafkaRecordBytes(kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i / 50), Value: bytes.Repeat([]byte{'p'}, 100)})
	}
	raw := producedRaw(kmsg.RecordBatch{ProducerID: 1000, FirstSequence: 1, FirstTimestamp: 1_700_000_000_000}, recs...)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		p, err := parseProduced(raw)
		if err != nil {
			b.Fatal(err)
		}
		dst = p.hermes
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	b.ReportMetric(float64(len(dst))/float64(cap(dst)), "used/allocated")
}

// FuzzProducedBatch: whatever records a produced batch holds, the
// conversion refuses them or writes a valid Hermes batch equal to the
// conversion of the records as franz-go decodes them.
func FuzzProducedBatch(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		var rb kmsg.RecordBatch
		rb.ReadFrom(randomProduced(rng))
		f.Add(rb.Records, uint8(rb.NumRecords), rb.ProducerID >= 0)
	}
	f.Add(kafkaRecordBytes(kmsg.Record{Value: []byte("v")}), uint8(1), false)
	f.Fuzz(func(t *testing.T, recs []byte, n uint8, idempotent bool) {
		rb := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, FirstTimestamp: 1_700_000_000_000,
			NumRecords: int32(n), LastOffsetDelta: int32(n) - 1, Records: recs}
		if idempotent {
			rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = 42, 3, 1000
		}
		raw := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
		binary.BigEndian.PutUint32(raw[17:], crc32c(raw[crcStart:]))
		b, err := parseProduced(raw)
		if err != nil {
			var be *errBatch
			if !errors.As(err, &be) {
				t.Fatalf("refused without a Kafka code: %v", err)
			}
			return
		}
		got, _, err := record.DecodeValidBatch(nil, b.hermes)
		if err != nil {
			t.Fatalf("the Hermes batch does not validate: %v", err)
		}
		ids := make([]record.MessageID, len(got))
		for i := range got {
			ids[i] = got[i].MessageID
		}
		if want := decodedConversion(t, raw, ids); !bytes.Equal(b.hermes, want) {
			t.Fatalf("%d bytes, want %d", len(b.hermes), len(want))
		}
	})
}
