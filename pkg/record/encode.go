package record

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"slices"
)

// AppendBatch encodes recs as one batch with the given base offset,
// appends it to dst and returns the extended slice. firstTimestamp is
// recs[0].Timestamp, maxTimestamp the largest record timestamp; the Raft
// term and index are 0 (see SetRaftPosition). Record.Offset is ignored.
// Ids are delta-encoded whenever the format allows (see FlagDeltaIDs).
// It allocates only to grow dst, once, to at most the batch's size with
// whole ids.
//
// REQUIRES: len(recs) >= 1 (it panics otherwise), each record has at most
// MaxRecordHeaders headers and BatchSize(recs) <= MaxBatchBytes; a batch
// breaking these is still written but ValidateBatch will reject it.
func AppendBatch(dst []byte, baseOffset int64, recs []Record) []byte {
	if len(recs) == 0 {
		panic("record: AppendBatch with no records")
	}
	// Grown to the size with whole ids: a bound of the batch's size that
	// takes no delta's length.
	dst = slices.Grow(dst, batchSize(recs, recs[0].Timestamp, false))
	return appendBatch(dst, baseOffset, recs, deltaIDs(recs))
}

// appendBatch is AppendBatch with whole ids unless delta (which requires
// deltaIDs(recs)). dst should have room for the batch: it grows only as
// append grows it.
func appendBatch(dst []byte, baseOffset int64, recs []Record, delta bool) []byte {
	if len(recs) == 0 {
		panic("record: AppendBatch with no records")
	}
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	dst = slices.Grow(dst, BatchHeaderSize) // a no-op when grown as REQUIRES says
	start := len(dst)
	dst = dst[:start+BatchHeaderSize]
	for i := range recs {
		r := &recs[i]
		id := wholeID(&r.MessageID)
		if delta && i > 0 {
			id = deltaID(&recs[i-1].MessageID, &r.MessageID)
		}
		dst = appendHead(dst, recordBodySize(i, r, first, id.size()), i, r.Timestamp-first, id, r.Key, len(r.Headers))
		for j := range r.Headers {
			dst = AppendHeader(dst, r.Headers[j].Key, r.Headers[j].Value)
		}
		dst = append(dst, r.Payload...)
		maxTS = max(maxTS, r.Timestamp)
	}
	var flags uint16
	if delta {
		flags = FlagDeltaIDs
	}
	finishBatch(dst[start:], len(recs), baseOffset, first, maxTS, flags)
	return dst
}

// BatchSize returns the size in bytes of the batch AppendBatch would
// encode from recs. REQUIRES: len(recs) >= 1.
func BatchSize(recs []Record) int { return batchSize(recs, recs[0].Timestamp, deltaIDs(recs)) }

// batchSize is the size of the batch of recs, ids delta-encoded or whole.
func batchSize(recs []Record, first int64, delta bool) int {
	n := BatchHeaderSize
	for i := range recs {
		idLen := len(MessageID{})
		if delta && i > 0 {
			idLen = idDeltaLen(&recs[i-1].MessageID, &recs[i].MessageID)
		}
		body := recordBodySize(i, &recs[i], first, idLen)
		n += uvarintLen(uint64(body)) + body
	}
	return n
}

// encodedID is a record's message id as a batch stores it: whole, or as
// the deltas from the record before.
type encodedID struct {
	whole  *MessageID // nil when delta-encoded
	hi, lo int64
}

func wholeID(id *MessageID) encodedID { return encodedID{whole: id} }

func deltaID(prev, id *MessageID) encodedID {
	hi, lo := idDelta(prev, id)
	return encodedID{hi: hi, lo: lo}
}

func (e encodedID) size() int {
	if e.whole != nil {
		return len(MessageID{})
	}
	return varintLen(e.hi) + varintLen(e.lo)
}

// BatchWriter writes one batch a record at a time from the parts of each
// record, for code that converts records from another encoding without
// building a Record for each (Hermes' Kafka listener turns a produced
// Kafka batch into a Hermes batch this way). The batch it writes is the
// one AppendBatch would write from the same records.
//
//	w := record.NewBatchWriter(dst, size)
//	for each record {
//		headers = record.AppendHeader(headers[:0], key, value) // per header
//		w.Append(ts, id, key, headerCount, headers, payload)
//	}
//	dst = w.Finish(baseOffset)
type BatchWriter struct {
	b            []byte
	start, count int
	first, maxTS int64
	// prev is the last record's id. The writer delta-encodes ids from
	// the second record on until one is too far from the one before
	// (wide): it then rewrites the records with whole ids.
	prev MessageID
	wide bool
}

// NewBatchWriter starts a batch at the end of dst. size is what the
// batch will take, or a bound of it, so that dst grows once; a size too
// small costs only more growing.
func NewBatchWriter(dst []byte, size int) BatchWriter {
	dst = slices.Grow(dst, max(size, BatchHeaderSize))
	start := len(dst)
	return BatchWriter{b: dst[:start+BatchHeaderSize], start: start}
}

// AppendHeader appends one header, encoded as Append takes headers: the
// key's length, the key, the value's length (-1 for a nil value) and the
// value.
func AppendHeader[K string | []byte](dst []byte, key K, value []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	return appendBytesField(dst, value)
}

// Append appends the next record: timestamp ts (unix nanoseconds), id,
// key (nil for none), headerCount headers encoded in headers (see
// AppendHeader) and the payload. At most MaxRecordHeaders headers, as
// for AppendBatch. The first record's timestamp is the batch's first.
func (w *BatchWriter) Append(ts int64, id MessageID, key []byte, headerCount int, headers, payload []byte) {
	e := wholeID(&id)
	switch {
	case w.count == 0:
		w.first, w.maxTS = ts, ts
	case w.wide:
	default:
		if e = deltaID(&w.prev, &id); e.size() > len(MessageID{}) {
			w.widen()
			e = wholeID(&id)
		}
	}
	i, d := w.count, ts-w.first
	body := recordHeadSize(i, d, e.size(), key, headerCount) + len(headers) + len(payload)
	b := appendHead(w.b, body, i, d, e, key, headerCount)
	w.prev = id
	b = append(b, headers...)
	w.b = append(b, payload...)
	w.count++
	w.maxTS = max(w.maxTS, ts)
}

// appendHead appends the fields of the i-th record of a batch before its
// headers; body is the size of the record after its length.
func appendHead(b []byte, body, i int, tsDelta int64, id encodedID, key []byte, headerCount int) []byte {
	b = binary.AppendUvarint(b, uint64(body))
	b = binary.AppendUvarint(b, uint64(i))
	b = binary.AppendVarint(b, tsDelta)
	if id.whole != nil {
		b = append(b, id.whole[:]...)
	} else {
		b = binary.AppendVarint(binary.AppendVarint(b, id.hi), id.lo)
	}
	b = appendBytesField(b, key)
	return binary.AppendUvarint(b, uint64(headerCount))
}

// Finish writes the batch's header with baseOffset and its CRC, and
// returns dst extended with the batch. REQUIRES: at least one record
// appended (it panics otherwise).
func (w *BatchWriter) Finish(baseOffset int64) []byte {
	if w.count == 0 {
		panic("record: a batch with no records")
	}
	var flags uint16
	if w.count >= 2 && !w.wide {
		flags = FlagDeltaIDs
	}
	finishBatch(w.b[w.start:], w.count, baseOffset, w.first, w.maxTS, flags)
	return w.b
}

// widen rewrites the records written so far with whole ids, in a new
// buffer (records grow), and sets w.wide: the next record's id is too far
// from the one before to be delta-encoded, so none is. REQUIRES: the
// records are as Append wrote them.
func (w *BatchWriter) widen() {
	w.wide = true
	recs := w.b[w.start+BatchHeaderSize:]
	b := make([]byte, w.start+BatchHeaderSize, cap(w.b)+15*w.count)
	copy(b, w.b)
	var id MessageID
	for i, r := 0, 0; i < w.count; i++ {
		body, k := binary.Uvarint(recs[r:])
		fields := r + k // offset delta and timestamp delta, then the id
		end := fields + int(body)
		_, a := binary.Uvarint(recs[fields:])
		_, t := binary.Varint(recs[fields+a:])
		at, rest := fields+a+t, fields+a+t+16
		if i == 0 {
			copy(id[:], recs[at:rest])
		} else {
			hi, n1 := binary.Varint(recs[at:])
			lo, n2 := binary.Varint(recs[at+n1:])
			id, rest = id.add(uint64(hi), uint64(lo)), at+n1+n2
			body += uint64(16 - n1 - n2)
		}
		b = binary.AppendUvarint(b, body)
		b = append(b, recs[fields:at]...)
		b = append(b, id[:]...)
		b = append(b, recs[rest:end]...)
		r = end
	}
	w.b = b
}

// finishBatch writes the header of batch h, whose records follow it.
func finishBatch(h []byte, count int, baseOffset, first, maxTS int64, flags uint16) {
	le.PutUint32(h[offLength:], uint32(len(h)-4))
	h[offMagic] = Magic
	h[offAttributes] = 0
	le.PutUint16(h[offFlags:], flags)
	le.PutUint32(h[offRecordCount:], uint32(count))
	le.PutUint64(h[offBaseOffset:], uint64(baseOffset))
	le.PutUint64(h[offRaftTerm:], 0)
	le.PutUint64(h[offRaftIndex:], 0)
	le.PutUint64(h[offFirstTimestamp:], uint64(first))
	le.PutUint64(h[offMaxTimestamp:], uint64(maxTS))
	le.PutUint32(h[offLastOffsetDelta:], uint32(count-1))
	le.PutUint32(h[offCRC:], crc32.Checksum(h[offMagic:], castagnoli))
}

// recordHeadSize is the size of a record's body before its headers, its
// id taking idLen bytes.
func recordHeadSize(i int, tsDelta int64, idLen int, key []byte, headerCount int) int {
	return uvarintLen(uint64(i)) + varintLen(tsDelta) + idLen +
		bytesFieldLen(key) + uvarintLen(uint64(headerCount))
}

// recordBodySize is the size of record r's body, the i-th of its batch,
// its id taking idLen bytes.
func recordBodySize(i int, r *Record, first int64, idLen int) int {
	n := uvarintLen(uint64(i)) + varintLen(r.Timestamp-first) + idLen +
		bytesFieldLen(r.Key) + uvarintLen(uint64(len(r.Headers)))
	for j := range r.Headers {
		h := &r.Headers[j]
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + bytesFieldLen(h.Value)
	}
	return n + len(r.Payload)
}

// appendBytesField appends a varint length (-1 for nil) and the bytes.
func appendBytesField(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func bytesFieldLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

// uvarintLen is the size of x as a minimal uvarint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// varintLen is the size of x as a minimal zig-zag varint.
func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }
