package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Batch format. All integers are little-endian.
//
//	offset size field
//	0      4    length          bytes after this field (crc + header rest + records)
//	4      4    crc32c          CRC-32C (Castagnoli) over bytes [8, 4+length)
//	8      1    magic           = Magic
//	9      1    attributes      bits 0-2 compression (only 0 = none is accepted);
//	                            bits 3-5 origin codec: the compression a Kafka
//	                            producer used (0 none, 1 gzip, 2 snappy, 3 lz4,
//	                            4 zstd; records are stored uncompressed), which
//	                            Kafka fetches use again; bit 6 transactional
//	                            (the batch belongs to a Kafka transaction);
//	                            bit 7 control (a Kafka transaction marker)
//	10     2    flags           bit 0 (FlagDeltaIDs): message ids after the
//	                            first record's are delta-encoded (below);
//	                            the other bits are 0
//	12     4    recordCount     >= 1
//	16     8    baseOffset      offset of the first record
//	24     8    raftTerm        term of the Raft entry that carried the batch (0 on a single node)
//	32     8    raftIndex       index of that entry (0 on a single node)
//	40     8    firstTimestamp  the first record's timestamp, unix nanoseconds
//	48     8    maxTimestamp    the newest record timestamp in the batch
//	56     4    lastOffsetDelta = recordCount-1 (offsets in a batch are dense)
//	60          records
//
// Each record:
//
//	uvarint bodyLen         bytes of the record after this varint
//	uvarint offsetDelta     the record's index in the batch
//	varint  timestampDelta  Timestamp - firstTimestamp (0 for the first record)
//	16 bytes                MessageID (with FlagDeltaIDs, records after the
//	                        first carry two zig-zag varints instead: the id's
//	                        big-endian high and low 64-bit halves minus the
//	                        previous record's, wrapping)
//	varint  keyLen          -1 for a nil key; then the key bytes
//	uvarint headerCount     then per header: uvarint keyLen, key, varint valueLen (-1 nil), value
//	the rest of the body    payload
//
// Message ids. Ids made close together (UUIDv7s from one process, the
// ids the broker gives converted Kafka records) differ little from one
// record to the next, so an encoder delta-encodes them, and sets
// FlagDeltaIDs, exactly when the batch has at least two records and no
// record's delta takes more than the 16 bytes of a whole id: about 3
// bytes a record instead of 16. An encoder may instead always write
// whole ids (a batch without the flag is valid whatever its ids); with
// the flag, a delta longer than 16 bytes, or a batch of one record, is
// corrupt.
//
// The encoding is canonical: ValidateBatch accepts only what AppendBatch
// produces (minimal varints, exact lengths, exact header fields), the
// choice of whole ids above aside, so a validated batch re-encodes to
// the same bytes.
const (
	// BatchHeaderSize is the size of the fixed batch header, length field included.
	BatchHeaderSize = 60
	// Magic is the format version this package reads and writes.
	Magic = 1
	// MaxBatchBytes bounds a whole batch (length field included). Larger
	// batches are rejected as corrupt: producers must split them.
	MaxBatchBytes = 16 << 20
	// MaxRecordHeaders bounds the headers of one record, so that decoding a
	// batch allocates at most a small multiple of its size.
	MaxRecordHeaders = 1024
)

// Field positions in the batch header.
const (
	offLength          = 0
	offCRC             = 4
	offMagic           = 8
	offAttributes      = 9
	offFlags           = 10
	offRecordCount     = 12
	offBaseOffset      = 16
	offRaftTerm        = 24
	offRaftIndex       = 32
	offFirstTimestamp  = 40
	offMaxTimestamp    = 48
	offLastOffsetDelta = 56

	// minLength is the smallest valid value of the length field.
	minLength = BatchHeaderSize - 4
	// minRecordSize is the smallest encoded record: five one-byte varints
	// and the 16-byte message id; minDeltaRecordSize the smallest with a
	// delta-encoded id (two more one-byte varints instead).
	minRecordSize      = 5 + 16
	minDeltaRecordSize = 5 + 2
)

// FlagDeltaIDs in a batch's flags says that the message ids of its
// records after the first are delta-encoded (see the format above).
const FlagDeltaIDs uint16 = 1

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// BatchHeader is the decoded fixed header of a batch.
type BatchHeader struct {
	Length          uint32 // bytes after the length field
	CRC             uint32
	Attributes      uint8
	RecordCount     uint32
	BaseOffset      int64
	RaftTerm        uint64 // the low 48 bits of the term field
	RaftIndex       uint64
	FirstTimestamp  int64
	MaxTimestamp    int64
	LastOffsetDelta uint32
	Flags           uint16 // FlagDeltaIDs or 0
	// EntryFollowing is how many batches follow this one in its Raft
	// entry (the top 16 bits of the term field; 0 in the entry's last
	// batch and in batches written before it was kept). Recovery uses it
	// to tell an entry cut short from a whole one.
	EntryFollowing uint16
}

// Size is the whole batch's size in bytes, length field included.
func (h BatchHeader) Size() int { return 4 + int(h.Length) }

// NextOffset is the offset after the batch's last record.
func (h BatchHeader) NextOffset() int64 { return h.BaseOffset + int64(h.RecordCount) }

// ParseBatch parses and checks the header of the batch at the start of b:
// the length is in range, magic, attributes and reserved bits are right,
// recordCount >= 1 and can fit, lastOffsetDelta == recordCount-1, the
// offsets do not overflow, and the CRC matches. It does not decode records
// (see ValidateBatch). Bytes of b after the batch are ignored.
//
// Errors: ErrShortBatch (unwrapped) when b is a prefix of a batch whose
// header looks valid so far: the caller should read more; the returned
// header is filled when the first BatchHeaderSize bytes were there. An
// error wrapping ErrCorrupt names the bad field.
func ParseBatch(b []byte) (BatchHeader, error) {
	h, err := parseHeader(b)
	if err != nil {
		return h, err
	}
	if len(b) < h.Size() {
		return h, ErrShortBatch
	}
	if got := crc32.Checksum(b[offMagic:h.Size()], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc32c is %#08x, header says %#08x", ErrCorrupt, got, h.CRC)
	}
	return h, nil
}

// parseHeader is ParseBatch without the CRC and without requiring the
// records to be present: it needs only the first BatchHeaderSize bytes.
func parseHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < 4 {
		return h, ErrShortBatch
	}
	h.Length = le.Uint32(b[offLength:])
	if h.Length < minLength || h.Length > MaxBatchBytes-4 {
		return h, fmt.Errorf("%w: length %d not in [%d, %d]", ErrCorrupt, h.Length, minLength, MaxBatchBytes-4)
	}
	if err := checkFixedBytes(b); err != nil {
		return h, err
	}
	if len(b) < BatchHeaderSize {
		return h, ErrShortBatch
	}
	h.CRC = le.Uint32(b[offCRC:])
	h.Attributes = b[offAttributes]
	h.RecordCount = le.Uint32(b[offRecordCount:])
	h.BaseOffset = int64(le.Uint64(b[offBaseOffset:]))
	term := le.Uint64(b[offRaftTerm:])
	h.RaftTerm, h.EntryFollowing = term&raftTermMask, uint16(term>>48)
	h.RaftIndex = le.Uint64(b[offRaftIndex:])
	h.FirstTimestamp = int64(le.Uint64(b[offFirstTimestamp:]))
	h.MaxTimestamp = int64(le.Uint64(b[offMaxTimestamp:]))
	h.LastOffsetDelta = le.Uint32(b[offLastOffsetDelta:])
	h.Flags = le.Uint16(b[offFlags:])
	return h, checkCounts(h)
}

// DeltaIDs reports whether the ids of the batch's records after the first
// are delta-encoded.
func (h BatchHeader) DeltaIDs() bool { return h.Flags&FlagDeltaIDs != 0 }

// checkFixedBytes checks magic, attributes and flags, as far as b goes.
func checkFixedBytes(b []byte) error {
	if len(b) > offMagic && b[offMagic] != Magic {
		return fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, b[offMagic], Magic)
	}
	if len(b) > offAttributes && b[offAttributes] != 0 {
		a := b[offAttributes]
		if c := a & 0x07; c != 0 {
			return fmt.Errorf("%w: compression %d not supported", ErrCorrupt, c)
		}
		if o := a >> 3 & 0x07; o > MaxOriginCodec {
			return fmt.Errorf("%w: origin codec %d unknown", ErrCorrupt, o)
		}
		if a&AttrControl != 0 && a&AttrTransactional == 0 {
			return fmt.Errorf("%w: a control batch that is not transactional (attributes %#02x)", ErrCorrupt, a)
		}
	}
	if len(b) >= offFlags+2 && le.Uint16(b[offFlags:])&^FlagDeltaIDs != 0 {
		return fmt.Errorf("%w: flags are %#04x, only %#04x is defined", ErrCorrupt, le.Uint16(b[offFlags:]), FlagDeltaIDs)
	}
	return nil
}

// checkCounts checks the record count and offset fields of h.
func checkCounts(h BatchHeader) error {
	switch {
	case h.RecordCount == 0:
		return fmt.Errorf("%w: record count is 0", ErrCorrupt)
	case h.DeltaIDs() && h.RecordCount < 2:
		return fmt.Errorf("%w: delta-encoded ids in a batch of one record", ErrCorrupt)
	case !h.DeltaIDs() && uint64(h.RecordCount)*minRecordSize > uint64(h.Length-minLength),
		h.DeltaIDs() && minRecordSize+uint64(h.RecordCount-1)*minDeltaRecordSize > uint64(h.Length-minLength):
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, h.RecordCount, h.Length-minLength)
	case h.LastOffsetDelta != h.RecordCount-1:
		return fmt.Errorf("%w: last offset delta %d with %d records", ErrCorrupt, h.LastOffsetDelta, h.RecordCount)
	case h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.RecordCount):
		return fmt.Errorf("%w: base offset %d out of range", ErrCorrupt, h.BaseOffset)
	}
	return nil
}

// SetBaseOffset rewrites the base offset of the batch at the start of b
// and updates its CRC, in place (in
// time independent of the batch's size: see patchCRC).
//
// REQUIRES: b starts with a whole batch (ParseBatch accepts it). It panics
// if b is too short for the length its header gives.
func SetBaseOffset(b []byte, base int64) {
	size := wholeBatch(b)
	old := headerBytes(b)
	le.PutUint64(b[offBaseOffset:], uint64(base))
	patchCRC(b, size, &old)
}

// SetRaftPosition rewrites the Raft term and index of the batch at the
// start of b and updates its CRC, in place.
//
// REQUIRES: as SetBaseOffset.
func SetRaftPosition(b []byte, term, index uint64) {
	size := wholeBatch(b)
	old := headerBytes(b)
	le.PutUint64(b[offRaftTerm:], term)
	le.PutUint64(b[offRaftIndex:], index)
	patchCRC(b, size, &old)
}

// wholeBatch returns the size of the batch at the start of b, panicking if
// b does not hold it: callers promise a validated batch.
func wholeBatch(b []byte) int {
	if len(b) < BatchHeaderSize {
		panic(fmt.Sprintf("record: %d bytes cannot hold a batch header", len(b)))
	}
	size := 4 + int(le.Uint32(b[offLength:]))
	if size < BatchHeaderSize || size > len(b) {
		panic(fmt.Sprintf("record: batch of %d bytes in a %d-byte buffer", size, len(b)))
	}
	return size
}

// ParseHeader decodes the fixed header at the start of b and checks its
// length field, without checking the CRC or that the whole batch is in b.
// ErrShortBatch when b is shorter than the header.
func ParseHeader(b []byte) (BatchHeader, error) { return parseHeader(b) }

// WholeBatches returns the length of the run of whole batches at the start
// of b, judged by their headers alone (no CRC): where a segment file's
// data ends, before the zeros of preallocated space or a torn write.
func WholeBatches(b []byte) int {
	pos := 0
	for pos < len(b) {
		h, err := parseHeader(b[pos:])
		if err != nil || h.Size() <= 0 || pos+h.Size() > len(b) {
			break
		}
		pos += h.Size()
	}
	return pos
}

// RebaseHeader rewrites hdr, a copy of the header of the batch whose
// records are `records`, to the base offset base, with the CRC the whole
// batch then has. It lets a writer rebase a large batch without copying it.
func RebaseHeader(hdr *[BatchHeaderSize]byte, records []byte, base int64) {
	le.PutUint64(hdr[offBaseOffset:], uint64(base))
	crc := crc32.Update(crc32.Checksum(hdr[offMagic:], castagnoli), castagnoli, records)
	le.PutUint32(hdr[offCRC:], crc)
}

// MaxOriginCodec is the largest origin codec (zstd).
const MaxOriginCodec = 4

// OriginCodec is the compression codec the batch's producer used over
// the Kafka protocol (0: none, or not a Kafka producer).
func (h BatchHeader) OriginCodec() uint8 { return h.Attributes >> 3 & 0x07 }

// SetOriginCodec records the codec a Kafka producer compressed the batch
// at the start of b with, and updates its CRC.
//
// REQUIRES: as SetBaseOffset; codec <= MaxOriginCodec.
func SetOriginCodec(b []byte, codec uint8) {
	size := wholeBatch(b)
	old := headerBytes(b)
	b[offAttributes] = b[offAttributes]&^0x38 | codec<<3
	patchCRC(b, size, &old)
}

// Kafka transaction attributes: records of a transactional producer carry
// AttrTransactional; a transaction marker (commit or abort, written by the
// transaction coordinator) is a batch of one record with both bits. Only
// the broker's Kafka adapter writes them; Hermes' own readers never see
// control batches.
const (
	AttrTransactional uint8 = 0x40
	AttrControl       uint8 = 0x80
)

// Transactional reports whether the batch belongs to a Kafka transaction.
func (h BatchHeader) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports whether the batch is a Kafka transaction marker.
func (h BatchHeader) Control() bool { return h.Attributes&AttrControl != 0 }

// SetTxnAttributes sets the attribute bits attrs (AttrTransactional,
// AttrControl) of the batch at the start of b and updates its CRC.
//
// REQUIRES: as SetBaseOffset.
func SetTxnAttributes(b []byte, attrs uint8) {
	size := wholeBatch(b)
	old := headerBytes(b)
	b[offAttributes] = b[offAttributes]&^(AttrTransactional|AttrControl) | attrs&(AttrTransactional|AttrControl)
	patchCRC(b, size, &old)
}

// raftTermMask keeps the Raft term of the term field; its top 16 bits
// count the batches that follow in the same Raft entry.
const raftTermMask = 1<<48 - 1

// SetPosition rewrites the base offset, the Raft term and index of the
// batch at the start of b, and how many batches follow it in its Raft
// entry (saturating at 65,535), and updates its CRC, in place.
//
// REQUIRES: as SetBaseOffset; term < 2^48.
func SetPosition(b []byte, base int64, term, index uint64, following int) {
	size := wholeBatch(b)
	old := headerBytes(b)
	le.PutUint64(b[offBaseOffset:], uint64(base))
	le.PutUint64(b[offRaftTerm:], term&raftTermMask|uint64(min(following, 0xFFFF))<<48)
	le.PutUint64(b[offRaftIndex:], index)
	patchCRC(b, size, &old)
}
