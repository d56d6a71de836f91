package record

// Header is one record header. Keys need not be unique; order is kept.
type Header struct {
	Key   string
	Value []byte
}

// MessageID is a record's unique id: a UUIDv7 made by the client library,
// or by the broker when the client sent none. The zero value means "none".
type MessageID [16]byte

// IsZero reports whether id is unset.
func (id MessageID) IsZero() bool { return id == MessageID{} }

// Record is one message as a producer sends it and a consumer sees it.
//
// Slices in a Record returned by a decoder alias the buffer it decoded;
// the caller must copy them if it keeps them after reusing that buffer.
type Record struct {
	// Offset is the record's position in its partition, dense and
	// increasing. It is assigned by the log on append; producers leave it 0.
	Offset    int64
	MessageID MessageID
	// Timestamp is the record's time in Unix nanoseconds.
	Timestamp int64
	// Key is nil when the record has no key (distinct from an empty key).
	Key     []byte
	Headers []Header
	Payload []byte
}

// CreditOverhead is what a record counts for beyond its key, headers and
// payload in byte credit (its id, offset, timestamp and framing, about).
const CreditOverhead = 32

// CreditBytes is the byte credit a subscriber spends on one record
// delivered on its own (unpacked): its key, payload, and header keys and
// values, plus CreditOverhead. A packed batch spends its length. Broker
// and clients count alike, so what a client gives back is exactly what
// the broker charged.
func CreditBytes(r *Record) int64 {
	n := len(r.Key) + len(r.Payload) + CreditOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// Clone returns a deep copy of rec whose key, header values and payload
// live in one slice that alloc returns, empty with room for their total
// (header keys are strings, already immutable). Each sub-slice is capped
// at its length, so an append by a reader cannot write into its
// neighbour; nil slices stay nil and empty ones empty.
func Clone(rec *Record, alloc func(n int) []byte) Record {
	out := *rec
	buf := alloc(CloneBytes(rec))
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	out.Key = take(rec.Key)
	out.Payload = take(rec.Payload)
	if rec.Headers != nil {
		out.Headers = make([]Header, len(rec.Headers))
		for i, h := range rec.Headers {
			out.Headers[i] = Header{Key: h.Key, Value: take(h.Value)}
		}
	}
	return out
}

// CloneAll returns deep copies of recs whose bytes share one allocation.
func CloneAll(recs []Record) []Record {
	n := 0
	for i := range recs {
		n += CloneBytes(&recs[i])
	}
	buf := make([]byte, 0, n)
	alloc := func(n int) []byte {
		at := len(buf)
		buf = buf[:at+n]
		return buf[at : at : at+n]
	}
	out := make([]Record, len(recs))
	for i := range recs {
		out[i] = Clone(&recs[i], alloc)
	}
	return out
}

// CloneBytes is the room Clone asks alloc for: rec's key, header values
// and payload.
func CloneBytes(rec *Record) int {
	n := len(rec.Key) + len(rec.Payload)
	for _, h := range rec.Headers {
		n += len(h.Value)
	}
	return n
}
