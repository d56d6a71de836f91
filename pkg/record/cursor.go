package record

import (
	"encoding/binary"
	"fmt"
)

// cursor reads the fields of a batch's records. Every read is bounds
// checked, so it never panics on malformed input: the first problem is
// kept in err (wrapping ErrCorrupt) and later reads return zero values.
type cursor struct {
	b   []byte
	pos int // Invariant: 0 <= pos <= len(b)
	rec int // index of the record being read, for error messages
	err error
	// deltaIDs: the ids of records after the first are delta-encoded,
	// from prevID, the id of the record read before.
	deltaIDs bool
	prevID   MessageID
}

// recordsCursor returns a cursor over recs, the records of the batch
// whose header is h.
func recordsCursor(h BatchHeader, recs []byte) cursor {
	return cursor{b: recs, deltaIDs: h.DeltaIDs()}
}

func (c *cursor) left() int { return len(c.b) - c.pos }

func (c *cursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: record %d: %s", ErrCorrupt, c.rec, fmt.Sprintf(format, args...))
	}
}

// uvarint reads a minimally encoded uvarint.
func (c *cursor) uvarint(what string) uint64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Uvarint(c.b[c.pos:])
	switch {
	case n == 0:
		c.fail("%s: truncated varint", what)
		return 0
	case n < 0:
		c.fail("%s: varint overflows 64 bits", what)
		return 0
	case n > 1 && c.b[c.pos+n-1] == 0:
		c.fail("%s: varint not minimally encoded", what)
		return 0
	}
	c.pos += n
	return v
}

// varint reads a minimally encoded zig-zag varint.
func (c *cursor) varint(what string) int64 {
	u := c.uvarint(what)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// bytes returns the next n bytes, aliasing c.b.
func (c *cursor) bytes(n uint64, what string) []byte {
	if c.err != nil {
		return nil
	}
	if n > uint64(c.left()) {
		c.fail("%s: %d bytes, only %d left", what, n, c.left())
		return nil
	}
	b := c.b[c.pos : c.pos+int(n) : c.pos+int(n)]
	c.pos += int(n)
	return b
}

// lenBytes reads a varint length (-1 meaning nil) and that many bytes.
func (c *cursor) lenBytes(what string) []byte {
	n := c.varint(what)
	if c.err != nil || n == -1 {
		return nil
	}
	if n < -1 {
		c.fail("%s: length %d", what, n)
		return nil
	}
	return c.bytes(uint64(n), what)
}

// rawRecord is one record's fields as read from a batch; slices alias it.
type rawRecord struct {
	tsDelta int64
	id      MessageID
	key     []byte // nil for a nil key
	// keyEncoded is the key with its length in front, as encoded.
	keyEncoded []byte
	nHeaders   int
	keyBytes   int    // total length of the header keys
	headers    []byte // the encoded headers
	payload    []byte
}

// record reads record i of the batch into r, checking its framing: the
// body length, offsetDelta == i, varints, lengths within the body. It
// reads the records of a batch in order, from 0 (a delta-encoded id
// needs the one before).
func (c *cursor) record(i int, r *rawRecord) {
	c.rec = i
	n := c.uvarint("record length")
	body := cursor{b: c.bytes(n, "record body"), rec: i, err: c.err}
	if d := body.uvarint("offset delta"); body.err == nil && d != uint64(i) {
		body.fail("offset delta %d, want %d", d, i)
	}
	r.tsDelta = body.varint("timestamp delta")
	if c.deltaIDs && i > 0 {
		r.id = c.prevID.add(body.idDelta())
	} else {
		copy(r.id[:], body.bytes(16, "message id"))
	}
	c.prevID = r.id
	keyAt := body.pos
	r.key = body.lenBytes("key")
	r.keyEncoded = body.b[keyAt:body.pos:body.pos]
	hn := body.uvarint("header count")
	if body.err == nil && (hn > MaxRecordHeaders || hn > uint64(body.left()/2)) {
		body.fail("header count %d too large", hn)
	}
	start, keyBytes := body.pos, 0
	for j := uint64(0); j < hn && body.err == nil; j++ {
		keyBytes += len(body.bytes(body.uvarint("header key length"), "header key"))
		body.lenBytes("header value")
	}
	if body.err != nil {
		c.err = body.err
		return
	}
	r.nHeaders, r.keyBytes = int(hn), keyBytes
	r.headers = body.b[start:body.pos]
	r.payload = body.b[body.pos:]
}

// idDelta reads a delta-encoded message id: two zig-zag varints of at
// most 16 bytes together, returned as the unsigned deltas of the halves.
func (c *cursor) idDelta() (hi, lo uint64) {
	// Ids made close together differ by a varint of a byte or two each.
	if c.err == nil && c.left() >= 2 && c.b[c.pos] < 0x80 && c.b[c.pos+1] < 0x80 {
		h, l := uint64(c.b[c.pos]), uint64(c.b[c.pos+1])
		c.pos += 2
		return uint64(int64(h>>1) ^ -int64(h&1)), uint64(int64(l>>1) ^ -int64(l&1))
	}
	at := c.pos
	h, l := c.varint("message id delta"), c.varint("message id delta")
	if n := c.pos - at; c.err == nil && n > len(MessageID{}) {
		c.fail("message id delta of %d bytes, longer than the id", n)
	}
	return uint64(h), uint64(l)
}
