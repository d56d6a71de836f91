package record

import (
	"fmt"
	"slices"
	"strings"
)

// ValidateBatch checks the whole batch at the start of b: everything
// ParseBatch checks, then every record's framing (minimal varints, lengths
// within bounds, offsetDelta equal to the record's position), exactly
// RecordCount records with no bytes left over, a first record whose
// timestamp is FirstTimestamp and a MaxTimestamp equal to the newest
// record's. Bytes of b after the batch are ignored. It never panics.
//
// A batch it accepts decodes without error (DecodeRecords) and, when its
// Raft fields are 0, is byte for byte what AppendBatch makes of the decoded
// records at the same base offset.
//
// Errors: ErrShortBatch as ParseBatch; otherwise errors wrapping ErrCorrupt
// that name the record and field at fault.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, _, err := Inspect(b)
	return h, err
}

// Stats are facts about a batch's records that a broker checks before it
// accepts the batch, gathered by Inspect in its validation pass.
type Stats struct {
	// MaxRecordBytes is the largest record's key, payload and encoded
	// headers (each header's key and value plus their two length varints).
	MaxRecordBytes int
	// MissingIDs counts records whose message id is all zeros.
	MissingIDs int
	// MissingTimestamps counts records whose timestamp is 0.
	MissingTimestamps int
}

// count adds record r, whose timestamp is ts, to the Stats.
func (st *Stats) count(r *rawRecord, ts int64) {
	st.MaxRecordBytes = max(st.MaxRecordBytes, len(r.key)+len(r.headers)+len(r.payload))
	if ts == 0 {
		st.MissingTimestamps++
	}
	if r.id.IsZero() {
		st.MissingIDs++
	}
}

// Inspect is ValidateBatch that also returns the batch's Stats, in the
// same single pass over the records.
func Inspect(b []byte) (BatchHeader, Stats, error) {
	var st Stats
	h, err := ParseBatch(b)
	if err != nil {
		return h, st, err
	}
	st, _, _, err = walk(h, b[BatchHeaderSize:h.Size()])
	return h, st, err
}

// walk checks every record of the batch with header h (recs: the bytes
// after its header) as ValidateBatch does, gathering the Stats and what
// decode needs to size its allocations, in one pass.
func walk(h BatchHeader, recs []byte) (st Stats, nHeaders, keyBytes int, err error) {
	c := recordsCursor(h, recs)
	var r rawRecord
	maxTS := h.FirstTimestamp
	for i := 0; i < int(h.RecordCount); i++ {
		c.record(i, &r)
		if c.err != nil {
			return st, 0, 0, c.err
		}
		if i == 0 && r.tsDelta != 0 {
			return st, 0, 0, fmt.Errorf("%w: record 0: timestamp delta %d, want 0", ErrCorrupt, r.tsDelta)
		}
		ts := h.FirstTimestamp + r.tsDelta
		maxTS = max(maxTS, ts)
		st.count(&r, ts)
		nHeaders += r.nHeaders
		keyBytes += r.keyBytes
	}
	if c.left() != 0 {
		return st, 0, 0, fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorrupt, c.left(), h.RecordCount)
	}
	if maxTS != h.MaxTimestamp {
		return st, 0, 0, fmt.Errorf("%w: max timestamp %d, records' newest is %d", ErrCorrupt, h.MaxTimestamp, maxTS)
	}
	return st, nHeaders, keyBytes, nil
}

// DecodeValidBatch is ValidateBatch and DecodeRecords in one: it checks
// the batch at the start of b as ValidateBatch does (the CRC included)
// and appends its records to dst, reading the records once (twice when
// some have headers: the second pass puts them all in one allocation).
// Ownership of the records' slices: as DecodeRecords. On an error nothing
// is appended.
func DecodeValidBatch(dst []Record, b []byte) ([]Record, BatchHeader, error) {
	dst, h, _, err := DecodeInspect(dst, b)
	return dst, h, err
}

// DecodeInspect is DecodeValidBatch that also returns the batch's Stats,
// as Inspect does, in the same pass.
func DecodeInspect(dst []Record, b []byte) ([]Record, BatchHeader, Stats, error) {
	var st Stats
	h, err := ParseBatch(b)
	if err != nil {
		return dst, h, st, err
	}
	recs := b[BatchHeaderSize:h.Size()]
	n := len(dst)
	dst = slices.Grow(dst, int(h.RecordCount))
	fail := func(err error) ([]Record, BatchHeader, Stats, error) {
		clear(dst[n:])
		return dst[:n], h, Stats{}, err
	}
	// walk's checks, made here in the same pass that decodes: walk with a
	// callback per record cost 10-25% more per record on a backlog read
	// (BenchmarkConsumerDecode). FuzzValidateBatch holds the two together.
	c := recordsCursor(h, recs)
	var r rawRecord
	maxTS := h.FirstTimestamp
	nHeaders, keyBytes := 0, 0
	for i := 0; i < int(h.RecordCount); i++ {
		c.record(i, &r)
		if c.err != nil {
			return fail(c.err)
		}
		if i == 0 && r.tsDelta != 0 {
			return fail(fmt.Errorf("%w: record 0: timestamp delta %d, want 0", ErrCorrupt, r.tsDelta))
		}
		ts := h.FirstTimestamp + r.tsDelta
		maxTS = max(maxTS, ts)
		st.count(&r, ts)
		dst = append(dst, Record{Offset: h.BaseOffset + int64(i), Timestamp: ts, Key: r.key, Payload: r.payload})
		dst[len(dst)-1].MessageID = r.id
		nHeaders += r.nHeaders
		keyBytes += r.keyBytes
	}
	if c.left() != 0 {
		return fail(fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorrupt, c.left(), h.RecordCount))
	}
	if maxTS != h.MaxTimestamp {
		return fail(fmt.Errorf("%w: max timestamp %d, records' newest is %d", ErrCorrupt, h.MaxTimestamp, maxTS))
	}
	if nHeaders > 0 {
		hs := make([]Header, 0, nHeaders)
		var keys strings.Builder
		keys.Grow(keyBytes)
		c = recordsCursor(h, recs)
		for i := 0; i < int(h.RecordCount); i++ {
			c.record(i, &r) // checked above
			if r.nHeaders > 0 {
				start := len(hs)
				hs = appendHeaders(hs, r.headers, r.nHeaders, &keys)
				dst[n+i].Headers = hs[start:len(hs):len(hs)]
			}
		}
	}
	return dst, h, st, nil
}

// DecodeRecords appends the records of the batch at the start of b to dst
// and returns the extended slice. Each record gets Offset = BaseOffset +
// its position and its absolute Timestamp.
//
// Ownership: Key, Payload and header values alias b: copy them before
// reusing b. The Headers of all records of the batch share one allocation
// and their keys one string; the records' slices are capped so that
// appending to one does not overwrite another.
//
// REQUIRES: b was accepted by ValidateBatch (the CRC is not checked again).
// On bytes it would reject, DecodeRecords may return an error wrapping
// ErrCorrupt (records appended before the error stay in the result) but
// never panics.
func DecodeRecords(dst []Record, b []byte) ([]Record, error) {
	if h, err := parseHeader(b); err == nil {
		dst = slices.Grow(dst, int(h.RecordCount))
	}
	err := decode(b, func(r Record) bool {
		dst = append(dst, r)
		return true
	})
	return dst, err
}

// ForEachRecord calls fn with each record of the batch at the start of b,
// in order, until fn returns false. Records are as DecodeRecords makes them
// (their slices alias b). REQUIRES and errors: as DecodeRecords.
func ForEachRecord(b []byte, fn func(Record) bool) error {
	return decode(b, fn)
}

// decode reads the records of the batch at the start of b in two passes:
// the first counts headers and header key bytes so that the second can
// put all headers in one slice and all keys in one string.
func decode(b []byte, emit func(Record) bool) error {
	rr, err := NewRawReader(b)
	if err != nil {
		return err
	}
	h, recs := rr.h, rr.c.b
	nHeaders, keyBytes, err := measure(h, recs)
	if err != nil {
		return err
	}
	return decodeRecords(h, recs, nHeaders, keyBytes, emit)
}

// decodeRecords is decode's second pass, given what the first counted.
func decodeRecords(h BatchHeader, recs []byte, nHeaders, keyBytes int, emit func(Record) bool) error {
	var hs []Header
	var keys strings.Builder
	if nHeaders > 0 {
		hs = make([]Header, 0, nHeaders)
		keys.Grow(keyBytes)
	}
	c := recordsCursor(h, recs)
	var r rawRecord
	for i := 0; i < int(h.RecordCount); i++ {
		c.record(i, &r)
		if c.err != nil {
			return c.err
		}
		rec := Record{
			Offset:    h.BaseOffset + int64(i),
			Timestamp: h.FirstTimestamp + r.tsDelta,
			Key:       r.key,
			Payload:   r.payload,
		}
		rec.MessageID = r.id
		if r.nHeaders > 0 {
			start := len(hs)
			hs = appendHeaders(hs, r.headers, r.nHeaders, &keys)
			rec.Headers = hs[start:len(hs):len(hs)]
		}
		if !emit(rec) {
			return nil
		}
	}
	return nil
}

// measure counts the headers of the records in recs, those of the batch
// whose header is h, and the bytes of their keys.
func measure(h BatchHeader, recs []byte) (nHeaders, keyBytes int, err error) {
	c := recordsCursor(h, recs)
	var r rawRecord
	for i := 0; i < int(h.RecordCount); i++ {
		c.record(i, &r)
		if c.err != nil {
			return 0, 0, c.err
		}
		nHeaders += r.nHeaders
		keyBytes += r.keyBytes
	}
	return nHeaders, keyBytes, nil
}

// appendHeaders decodes n headers from enc, already checked by
// cursor.record, appending them to hs and their keys to keys. A key is a
// substring of keys.String(): the builder only appends, so earlier
// substrings stay valid, and it never reallocates as measure sized it.
func appendHeaders(hs []Header, enc []byte, n int, keys *strings.Builder) []Header {
	c := cursor{b: enc}
	for j := 0; j < n; j++ {
		k := c.bytes(c.uvarint("header key length"), "header key")
		v := c.lenBytes("header value")
		keys.Write(k)
		s := keys.String()
		hs = append(hs, Header{Key: s[len(s)-len(k):], Value: v})
	}
	return hs
}
