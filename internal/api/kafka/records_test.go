package kafka

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// randomStoredBatch is a stored batch of random records: nil, empty and
// long keys, headers with nil and empty values and keys long enough that
// their length takes more bytes as a zig-zag varint, payloads of any
// size, timestamps out of order; sometimes transactional or marked with
// the codec its Kafka producer used.
func randomStoredBatch(rng *rand.Rand) []byte {
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	maybe := func(max int) []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		default:
			return bytesOf(rng.IntN(max))
		}
	}
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
