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
// It allocates only to grow dst, once, to the batch's exact size.
//
// REQUIRES: len(recs) >= 1 (it panics otherwise), each record has at most
// MaxRecordHeaders headers and BatchSize(recs) <= MaxBatchBytes; a batch
// breaking these is still written but ValidateBatch will reject it.
func AppendBatch(dst []byte, baseOffset int64, recs []Record) []byte {
	if len(recs) == 0 {
		panic("record: AppendBatch with no records")
	}
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	for i := range recs {
		maxTS = max(maxTS, recs[i].Timestamp)
	}
	dst = slices.Grow(dst, batchSize(recs, first))
	start := len(dst)
	dst = dst[:start+BatchHeaderSize]
	for i := range recs {
		dst = appendRecord(dst, i, &recs[i], first)
	}
	h := dst[start:]
	le.PutUint32(h[offLength:], uint32(len(h)-4))
	h[offMagic] = Magic
	h[offAttributes] = 0
	le.PutUint16(h[offReserved:], 0)
	le.PutUint32(h[offRecordCount:], uint32(len(recs)))
	le.PutUint64(h[offBaseOffset:], uint64(baseOffset))
	le.PutUint64(h[offRaftTerm:], 0)
	le.PutUint64(h[offRaftIndex:], 0)
	le.PutUint64(h[offFirstTimestamp:], uint64(first))
	le.PutUint64(h[offMaxTimestamp:], uint64(maxTS))
	le.PutUint32(h[offLastOffsetDelta:], uint32(len(recs)-1))
	le.PutUint32(h[offCRC:], crc32.Checksum(h[offMagic:], castagnoli))
	return dst
}

// BatchSize returns the size in bytes of the batch AppendBatch would
// encode from recs. REQUIRES: len(recs) >= 1.
func BatchSize(recs []Record) int { return batchSize(recs, recs[0].Timestamp) }

func batchSize(recs []Record, first int64) int {
	n := BatchHeaderSize
	for i := range recs {
		body := recordBodySize(i, &recs[i], first)
		n += uvarintLen(uint64(body)) + body
	}
	return n
}

// appendRecord appends record r, the i-th of its batch.
func appendRecord(dst []byte, i int, r *Record, first int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(recordBodySize(i, r, first)))
	dst = binary.AppendUvarint(dst, uint64(i))
	dst = binary.AppendVarint(dst, r.Timestamp-first)
	dst = append(dst, r.MessageID[:]...)
	dst = appendBytesField(dst, r.Key)
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for j := range r.Headers {
		h := &r.Headers[j]
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytesField(dst, h.Value)
	}
	return append(dst, r.Payload...)
}

// recordBodySize is the size of what appendRecord writes after bodyLen.
func recordBodySize(i int, r *Record, first int64) int {
	n := uvarintLen(uint64(i)) + varintLen(r.Timestamp-first) + len(r.MessageID) +
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
