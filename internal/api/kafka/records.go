package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Record batches: Kafka's (magic 2, big-endian, optionally compressed, a
// producer id and sequence for idempotence) and Hermes' (pkg/record) hold
// the same records — key, headers, value, timestamp — so a Kafka batch
// becomes one Hermes batch at the same offsets, and a stored batch
// becomes one Kafka batch when fetched: a fetch from inside a batch
// returns the whole batch, as Kafka does.
//
// What does not carry over: Kafka timestamps are milliseconds (Hermes
// keeps nanoseconds; a Kafka consumer sees them truncated), a null value
// (a tombstone) is stored as an empty payload, and a Hermes record's
// message id has no place in a Kafka record. Hermes gives each Kafka
// record a message id: from the producer id, epoch and sequence for an
// idempotent producer (so a retried batch is recognised by the broker's
// duplicate window), else a new UUIDv7.

// Kafka record batch layout, after the 12 bytes of base offset and length.
const (
	batchHeaderLen  = 61 // bytes before the records
	batchAfterLen   = 49 // Length's value minus the records
	crcStart        = 21 // the CRC covers attributes..end
	attrCompression = 0x07
	attrTimestamp   = 0x08 // LogAppendTime
	attrTxn         = 0x10
	attrControl     = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// maxDecompressed bounds what one batch may decompress to: a Hermes
// batch holds at most record.MaxBatchBytes.
const maxDecompressed = record.MaxBatchBytes

// producedBatch is a produced batch, checked, and its records encoded as
// one Hermes batch.
type producedBatch struct {
	kmsg.RecordBatch
	hermes []byte
}

// errBatch is a produced batch Kafka would refuse, with its code.
type errBatch struct {
	code int16
	msg  string
}

func (e *errBatch) Error() string { return e.msg }

func batchErr(c *kerr.Error, format string, args ...any) error {
	return &errBatch{code: c.Code, msg: fmt.Sprintf(format, args...)}
}

// parseProduced checks the one batch of a produce partition (v3+ carry
// exactly one) and each of its records, as Kafka's broker does, and
// encodes the records as one Hermes batch.
func parseProduced(raw []byte) (*producedBatch, error) {
	if len(raw) < batchHeaderLen {
		return nil, batchErr(kerr.CorruptMessage, "record batch of %d bytes is shorter than its header", len(raw))
	}
	var b producedBatch
	if err := b.ReadFrom(raw); err != nil {
		return nil, batchErr(kerr.CorruptMessage, "record batch: %v", err)
	}
	if b.Magic != 2 {
		return nil, batchErr(kerr.UnsupportedForMessageFormat, "record batch magic %d: only magic 2 is served", b.Magic)
	}
	if int(b.Length)+12 != len(raw) {
		return nil, batchErr(kerr.InvalidRecord, "a produce partition must hold exactly one record batch (%d bytes, batch says %d)", len(raw), int(b.Length)+12)
	}
	if got := crc32.Checksum(raw[crcStart:], castagnoli); int32(got) != b.CRC {
		return nil, batchErr(kerr.CorruptMessage, "record batch CRC mismatch")
	}
	if b.Attributes&attrControl != 0 {
		return nil, batchErr(kerr.InvalidRecord, "clients may not produce control batches")
	}
	if b.NumRecords <= 0 || b.LastOffsetDelta != b.NumRecords-1 {
		return nil, batchErr(kerr.InvalidRecord, "record batch has %d records and last offset delta %d", b.NumRecords, b.LastOffsetDelta)
	}
	if int(b.NumRecords) > maxDecompressed/7 {
		return nil, batchErr(kerr.InvalidRecord, "record batch claims %d records", b.NumRecords)
	}
	data, err := decompress(b.Attributes&attrCompression, b.Records)
	if err != nil {
		return nil, err
	}
	if err := b.convert(data); err != nil {
		return nil, err
	}
	b.Records = nil // the request's buffer, which the listener pools
	return &b, nil
}

// idempotent reports whether the batch carries a producer id and sequence.
func (b *producedBatch) idempotent() bool { return b.ProducerID >= 0 && b.FirstSequence >= 0 }

// maxGrowth bounds how many bytes longer a record is in Hermes' encoding
// than in Kafka's: 16 for the message id and 9 for the timestamp delta
// in nanoseconds, less the record's attributes byte and its value's
// length; every other length is as long or shorter.
const maxGrowth = 16 + 9 - 2

// convert checks the records of the batch (data, uncompressed) as Kafka's
// broker does — each record's length, its offset delta (its index in the
// batch), every length within it, no bytes left over — and encodes them
// in the same pass as b.hermes, each with its message id: from the
// producer id, epoch and sequence of an idempotent producer, else from
// a new UUIDv7 whose random tail counts up record by record.
func (b *producedBatch) convert(data []byte) error {
	var (
		first   record.MessageID
		w       = record.NewBatchWriter(nil, record.BatchHeaderSize+len(data)+maxGrowth*int(b.NumRecords))
		headers []byte
		p       int
	)
	if !b.idempotent() {
		first = record.MessageID(uuid.Must(uuid.NewV7()))
	}
	for i := range int(b.NumRecords) {
		l, q := varintAt(data, p)
		if q > len(data) || l < 1 || l > int64(len(data)-q) {
			return batchErr(kerr.CorruptMessage, "record %d: bad length", i)
		}
		body := data[q : q+int(l)]
		p = q + int(l)
		// After the attributes: none are defined for records.
		tsDelta, q := varlongAt(body, 1)
		od, q := varintAt(body, q)
		if q <= len(body) && od != int64(i) {
			return batchErr(kerr.InvalidRecord, "record %d has offset delta %d", i, od)
		}
		key, q := bytesAt(body, q)
		value, q := bytesAt(body, q)
		nh, q := varintAt(body, q)
		if q <= len(body) && (nh < 0 || nh > record.MaxRecordHeaders) {
			return batchErr(kerr.InvalidRecord, "record %d has %d headers; at most %d are allowed", i, nh, record.MaxRecordHeaders)
		}
		headers = headers[:0]
		for range nh {
			kl, r := varintAt(body, q)
			if kl < 0 {
				return batchErr(kerr.CorruptMessage, "record %d: header key of length %d", i, kl)
			}
			var k, v []byte
			k, r = spanAt(body, r, kl)
			v, q = bytesAt(body, r)
			headers = record.AppendHeader(headers, k, v)
		}
		if q > len(body) {
			return batchErr(kerr.CorruptMessage, "record %d: a field runs past the record's end", i)
		}
		if q != len(body) {
			return batchErr(kerr.CorruptMessage, "record %d: %d bytes after its fields", i, len(body)-q)
		}
		id := first
		if b.idempotent() {
			id = producerMessageID(b.ProducerID, b.ProducerEpoch, b.FirstSequence+int32(i))
		} else {
			binary.BigEndian.PutUint32(id[12:], binary.BigEndian.Uint32(first[12:])+uint32(i))
		}
		w.Append((b.FirstTimestamp+tsDelta)*1e6, id, key, int(nh), headers, value)
	}
	if p != len(data) {
		return batchErr(kerr.CorruptMessage, "%d bytes after the batch's %d records", len(data)-p, b.NumRecords)
	}
	b.hermes = w.Finish(0)
	return nil
}

// Reading Kafka's record fields: varintAt, varlongAt, bytesAt and spanAt
// read at position p of b, as Kafka's broker reads them, and return the
// position after what they read, or len(b)+1 (and zero values) when it
// is malformed or runs past b's end, as they do when given that position.

// varintAt reads a zig-zag varint of 32 bits (at most 5 bytes).
func varintAt(b []byte, p int) (int64, int) {
	if uint(p) < uint(len(b)) && b[p] < 0x80 { // most fields take one byte
		return int64(b[p]>>1) ^ -int64(b[p]&1), p + 1
	}
	if p >= len(b) {
		return 0, len(b) + 1
	}
	v, n := kbin.Varint(b[p:])
	if n <= 0 {
		return 0, len(b) + 1
	}
	return int64(v), p + n
}

// varlongAt reads a zig-zag varint of 64 bits (at most 10 bytes).
func varlongAt(b []byte, p int) (int64, int) {
	if p >= len(b) {
		return 0, len(b) + 1
	}
	v, n := kbin.Varlong(b[p:])
	if n <= 0 {
		return 0, len(b) + 1
	}
	return v, p + n
}

// spanAt returns the n bytes at p.
func spanAt(b []byte, p int, n int64) ([]byte, int) {
	if p > len(b) || n < 0 || n > int64(len(b)-p) {
		return nil, len(b) + 1
	}
	e := p + int(n)
	return b[p:e:e], e
}

// bytesAt reads a length (a varint) and that many bytes; nil for a
// negative length.
func bytesAt(b []byte, p int) ([]byte, int) {
	l, p := varintAt(b, p)
	if l < 0 {
		return nil, p
	}
	return spanAt(b, p, l)
}

// producerMessageID is the message id of the record of an idempotent
// producer with the given sequence: unique per (producer id, epoch,
// sequence), and so per record, since producer ids are never reused.
// It is laid out as a UUIDv8: 48 bits of producer id, the version, the
// variant, the epoch and the sequence.
func producerMessageID(pid int64, epoch int16, seq int32) record.MessageID {
	var id record.MessageID
	binary.BigEndian.PutUint64(id[0:8], uint64(pid)<<16)
	id[6] = 0x80 // version 8
	id[8] = 0x80 // variant 10
	binary.BigEndian.PutUint16(id[10:], uint16(epoch))
	binary.BigEndian.PutUint32(id[12:], uint32(seq))
	return id
}

// decompress returns the records of a batch compressed with codec.
func decompress(codec int16, src []byte) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch codec {
	case 0:
		return src, nil
	case 1:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readBounded(zr)
		}
	case 2:
		out, err = unsnappy(src)
	case 3:
		out, err = readBounded(lz4.NewReader(bytes.NewReader(src)))
	case 4:
		out, err = zstdDecoder().DecodeAll(src, nil)
	default:
		return nil, batchErr(kerr.UnsupportedCompressionType, "compression codec %d is not supported", codec)
	}
	if err != nil {
		return nil, batchErr(kerr.CorruptMessage, "decompress: %v", err)
	}
	return out, nil
}

// readBounded reads r to its end, refusing more than maxDecompressed.
func readBounded(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecompressed {
		return nil, fmt.Errorf("more than %d bytes", maxDecompressed)
	}
	return out, nil
}

// xerialHeader starts snappy data in the framing the Java client writes.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// unsnappy decodes a snappy block, or xerial-framed snappy blocks.
func unsnappy(src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialHeader) {
		return unsnappyBlock(nil, src)
	}
	if len(src) < 16 {
		return nil, errors.New("short xerial snappy header")
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("truncated xerial snappy chunk")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, errors.New("truncated xerial snappy chunk")
		}
		var err error
		if out, err = unsnappyBlock(out, src[:n]); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}

func unsnappyBlock(dst, src []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n+len(dst) > maxDecompressed {
		return nil, fmt.Errorf("more than %d bytes", maxDecompressed)
	}
	block, err := snappy.Decode(nil, src)
	if err != nil {
		return nil, err
	}
	return append(dst, block...), nil
}

var (
	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
)

// zstdDecoder is shared: DecodeAll is safe for concurrent use.
func zstdDecoder() *zstd.Decoder {
	zstdOnce.Do(func() {
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecompressed), zstd.WithDecoderLowmem(true))
	})
	return zstdDec
}

// appendKafkaBatch appends a stored Hermes batch as a Kafka record batch
// at the same offsets, its leader epoch the Raft term of the entry that
// carried it, compressed with the codec its Kafka producer used (none
// for other producers). recs are the batch's records, decoded.
func appendKafkaBatch(dst []byte, h record.BatchHeader, recs []record.Record) []byte {
	first := recs[0].Timestamp / 1e6
	maxTS := first
	var kr kmsg.Record
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	var attrs int16
	if h.Transactional() {
		attrs |= attrTxn
		if h.Control() {
			// A marker: Kafka's control record, without the header
			// that keeps its producer.
			attrs |= attrControl
			pid, epoch = markerProducer(&recs[0])
			recs = []record.Record{{Offset: recs[0].Offset, Timestamp: recs[0].Timestamp, Key: recs[0].Key, Payload: recs[0].Payload}}
		} else {
			pid, epoch, seq = producerOf(recs[0].MessageID)
		}
	}
	// The records go right after the batch header, which is filled in
	// last: one copy of each record, into dst.
	size := batchHeaderLen
	for i := range recs {
		size += 24 + len(recs[i].Key) + len(recs[i].Payload)
		for _, hd := range recs[i].Headers {
			size += 10 + len(hd.Key) + len(hd.Value)
		}
	}
	start := len(dst)
	dst = slices.Grow(dst, size)[:start+batchHeaderLen]
	for i := range recs {
		r := &recs[i]
		ts := r.Timestamp / 1e6
		maxTS = max(maxTS, ts)
		kr = kmsg.Record{TimestampDelta64: ts - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Payload, Headers: kr.Headers[:0]}
		if kr.Value == nil {
			kr.Value = []byte{}
		}
		for _, hd := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: hd.Key, Value: hd.Value})
		}
		kr.Length = int32(recordBodyLen(&kr))
		dst = kr.AppendTo(dst)
	}
	return finishKafkaBatch(dst, start, h, kafkaBatchInfo{attrs: attrs, pid: pid, epoch: epoch, seq: seq,
		count: len(recs), first: first, maxTS: maxTS})
}

// kafkaBatchInfo is what a Kafka batch header says beyond the stored
// batch's own header.
type kafkaBatchInfo struct {
	attrs        int16
	pid          int64
	epoch        int16
	seq          int32
	count        int
	first, maxTS int64 // ms
}

// finishKafkaBatch completes the Kafka batch whose records follow the
// batchHeaderLen bytes reserved at dst[start:]: it compresses them with
// the codec the batch's Kafka producer used, fills the header in and
// computes the CRC.
func finishKafkaBatch(dst []byte, start int, h record.BatchHeader, k kafkaBatchInfo) []byte {
	if codec := h.OriginCodec(); codec != 0 {
		if z, ok := compress(nil, codec, dst[start+batchHeaderLen:]); ok {
			dst, k.attrs = append(dst[:start+batchHeaderLen], z...), k.attrs|int16(codec)
		}
	}
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-12)) // Length
	be.PutUint32(b[12:], uint32(int32(h.RaftTerm)))
	b[16] = 2 // magic
	be.PutUint16(b[21:], uint16(k.attrs))
	be.PutUint32(b[23:], uint32(k.count-1))
	be.PutUint64(b[27:], uint64(k.first))
	be.PutUint64(b[35:], uint64(k.maxTS))
	be.PutUint64(b[43:], uint64(k.pid))
	be.PutUint16(b[51:], uint16(k.epoch))
	be.PutUint32(b[53:], uint32(k.seq))
	be.PutUint32(b[57:], uint32(k.count))
	be.PutUint32(b[17:], crc32c(b[crcStart:]))
	return dst
}

// appendStoredBatch appends the stored batch b as a Kafka record batch,
// as appendKafkaBatch of its decoded records would, reading each record
// once and allocating nothing: keys and header values are encoded as
// Kafka encodes them and are copied as they are. A transaction marker
// goes through appendKafkaBatch. A batch that does not decode is left
// out (the log checked its CRC when it read it).
func appendStoredBatch(dst []byte, b []byte) []byte {
	rr, err := record.NewRawReader(b)
	if err != nil {
		return dst
	}
	h := rr.Header()
	if h.RecordCount <= 0 {
		return dst
	}
	if h.Control() {
		recs, err := record.DecodeRecords(nil, b)
		if err != nil || len(recs) == 0 {
			return dst
		}
		return appendKafkaBatch(dst, h, recs)
	}
	start := len(dst)
	// Kafka's records are the stored ones without their ids (16 bytes, or
	// from 2 delta-encoded) and with an attributes byte and the value's
	// length (at most 5 bytes) more: a few bytes a record over the stored
	// size (a header can take one more, which append grows for).
	dst = slices.Grow(dst, batchHeaderLen+h.Size()+6*int(h.RecordCount))[:start+batchHeaderLen]
	k := kafkaBatchInfo{pid: -1, epoch: -1, seq: -1}
	var r record.RawRecord
	for rr.Next(&r) {
		ts := (h.FirstTimestamp + r.TimestampDelta) / 1e6
		if k.count == 0 {
			k.first, k.maxTS = ts, ts
			if h.Transactional() {
				k.attrs |= attrTxn
				k.pid, k.epoch, k.seq = producerOf(record.MessageID(r.MessageID))
			}
		}
		k.maxTS = max(k.maxTS, ts)
		dst = appendKafkaRecord(dst, ts-k.first, int32(k.count), &r)
		k.count++
	}
	if rr.Err() != nil || k.count == 0 {
		return dst[:start]
	}
	return finishKafkaBatch(dst, start, h, k)
}

// appendKafkaRecord appends r as a Kafka record at offsetDelta, its
// timestamp tsDelta ms after the batch's first.
func appendKafkaRecord(dst []byte, tsDelta int64, offsetDelta int32, r *record.RawRecord) []byte {
	n := 1 + kbin.VarlongLen(tsDelta) + kbin.VarintLen(offsetDelta) + len(r.KeyEncoded) +
		kbin.VarintLen(int32(len(r.Payload))) + len(r.Payload) + kbin.VarintLen(int32(r.HeaderCount))
	if r.HeaderCount > 0 {
		n += kafkaHeadersLen(r.Headers, r.HeaderCount)
	}
	dst = kbin.AppendVarint(dst, int32(n))
	dst = append(dst, 0) // attributes
	dst = kbin.AppendVarlong(dst, tsDelta)
	dst = kbin.AppendVarint(dst, offsetDelta)
	dst = append(dst, r.KeyEncoded...)
	dst = kbin.AppendVarint(dst, int32(len(r.Payload)))
	dst = append(dst, r.Payload...)
	dst = kbin.AppendVarint(dst, int32(r.HeaderCount))
	if r.HeaderCount > 0 {
		dst = appendKafkaHeaders(dst, r.Headers, r.HeaderCount)
	}
	return dst
}

// kafkaHeadersLen is the size of n stored headers (checked by the
// RawReader) in Kafka's encoding: a key's length becomes a zig-zag
// varint; a value is encoded alike.
func kafkaHeadersLen(enc []byte, n int) int {
	size := 0
	for range n {
		kl, w := binary.Uvarint(enc)
		enc = enc[w:]
		size += kbin.VarintLen(int32(kl)) + int(kl)
		enc = enc[kl:]
		v := storedValueLen(enc)
		size += v
		enc = enc[v:]
	}
	return size
}

// appendKafkaHeaders appends n stored headers in Kafka's encoding.
func appendKafkaHeaders(dst, enc []byte, n int) []byte {
	for range n {
		kl, w := binary.Uvarint(enc)
		enc = enc[w:]
		dst = kbin.AppendVarint(dst, int32(kl))
		dst = append(dst, enc[:kl]...)
		enc = enc[kl:]
		v := storedValueLen(enc)
		dst = append(dst, enc[:v]...)
		enc = enc[v:]
	}
	return dst
}

// storedValueLen is the size of the encoded header value at the start of
// enc: its zig-zag varint length (-1 for nil) and its bytes.
func storedValueLen(enc []byte) int {
	u, w := binary.Uvarint(enc)
	if l := int64(u>>1) ^ -int64(u&1); l > 0 {
		return w + int(l)
	}
	return w
}

// recordBodyLen is the size of a Kafka record after its length varint.
func recordBodyLen(r *kmsg.Record) int {
	n := 1 + kbin.VarlongLen(r.TimestampDelta64) + kbin.VarintLen(r.OffsetDelta)
	n += bytesLen(r.Key) + bytesLen(r.Value) + kbin.VarintLen(int32(len(r.Headers)))
	for _, h := range r.Headers {
		n += kbin.VarintLen(int32(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return kbin.VarintLen(-1)
	}
	return kbin.VarintLen(int32(len(b))) + len(b)
}
