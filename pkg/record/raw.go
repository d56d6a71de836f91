package record

// RawReader reads the records of one batch as they are encoded, without
// copying or allocating: for code that writes records in another format
// (Hermes' Kafka listener answers a fetch with Kafka record batches made
// this way). Every field is checked as DecodeRecords checks it; the batch
// CRC is not (ValidateBatch does that).
//
// Typical use:
//
//	rr, err := record.NewRawReader(b)
//	var r record.RawRecord
//	for rr.Next(&r) { ... }
//	if err := rr.Err(); err != nil { ... }
type RawReader struct {
	h BatchHeader
	c cursor
	i int
}

// RawRecord is one record as encoded; its slices alias the batch.
type RawRecord struct {
	// TimestampDelta is the record's timestamp minus the batch's
	// FirstTimestamp, in nanoseconds.
	TimestampDelta int64
	MessageID      MessageID
	// Key is nil for a nil key. KeyEncoded is the key with its length in
	// front (a zig-zag varint, -1 for nil), as Kafka encodes it too.
	Key, KeyEncoded []byte
	// HeaderCount headers, as encoded in Headers: each is a key length
	// (uvarint), the key, a value length (zig-zag varint, -1 for a nil
	// value) and the value. The value's encoding is Kafka's; the key's
	// length is not (Kafka's is a zig-zag varint).
	HeaderCount int
	Headers     []byte
	Payload     []byte
}

// NewRawReader returns a reader of the batch at the start of b. Errors:
// those of ParseHeader, ErrShortBatch when b holds less than the batch.
func NewRawReader(b []byte) (RawReader, error) {
	h, err := parseHeader(b)
	if err != nil {
		return RawReader{}, err
	}
	if len(b) < h.Size() {
		return RawReader{}, ErrShortBatch
	}
	return RawReader{h: h, c: recordsCursor(h, b[BatchHeaderSize:h.Size()])}, nil
}

// Header is the batch's header.
func (r *RawReader) Header() BatchHeader { return r.h }

// Next reads the next record into rec; false after the last record or at
// the first malformed one (Err then says what).
func (r *RawReader) Next(rec *RawRecord) bool {
	if r.i >= int(r.h.RecordCount) || r.c.err != nil {
		return false
	}
	var raw rawRecord
	r.c.record(r.i, &raw)
	if r.c.err != nil {
		return false
	}
	*rec = RawRecord{
		TimestampDelta: raw.tsDelta, MessageID: raw.id, Key: raw.key,
		KeyEncoded:  raw.keyEncoded,
		HeaderCount: raw.nHeaders, Headers: raw.headers, Payload: raw.payload,
	}
	r.i++
	return true
}

// Err is the first problem Next met (wrapping ErrCorrupt), or nil.
func (r *RawReader) Err() error { return r.c.err }
