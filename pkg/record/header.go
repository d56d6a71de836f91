package record

// HeaderValue returns the value of the first header named key of record i
// of the batch at the start of b, without decoding the batch (and without
// allocating): it reads the records up to i. ok is false when the batch
// has no record i, the record no such header, or the bytes are not a
// well-framed batch. The value aliases b.
func HeaderValue(b []byte, i int, key string) (value []byte, ok bool) {
	h, err := parseHeader(b)
	if err != nil || i < 0 || i >= int(h.RecordCount) || len(b) < h.Size() {
		return nil, false
	}
	c := recordsCursor(h, b[BatchHeaderSize:h.Size()])
	var r rawRecord
	for j := 0; j <= i; j++ {
		c.record(j, &r)
		if c.err != nil {
			return nil, false
		}
	}
	return headerIn(r.headers, r.nHeaders, key)
}

// ForEachHeaderValue calls fn with the index and the value of the first
// header named key of each record of the batch at the start of b that has
// one, in order, until fn returns false; it does not allocate. It stops
// silently at bytes that are not a well-framed batch.
func ForEachHeaderValue(b []byte, key string, fn func(i int, value []byte) bool) {
	h, err := parseHeader(b)
	if err != nil || len(b) < h.Size() {
		return
	}
	c := recordsCursor(h, b[BatchHeaderSize:h.Size()])
	var r rawRecord
	for j := 0; j < int(h.RecordCount); j++ {
		c.record(j, &r)
		if c.err != nil {
			return
		}
		if v, ok := headerIn(r.headers, r.nHeaders, key); ok && !fn(j, v) {
			return
		}
	}
}

// headerIn finds the first header named key among the n encoded headers
// enc (checked by cursor.record).
func headerIn(enc []byte, n int, key string) ([]byte, bool) {
	c := cursor{b: enc}
	for j := 0; j < n && c.err == nil; j++ {
		k := c.bytes(c.uvarint("header key length"), "header key")
		v := c.lenBytes("header value")
		if c.err == nil && string(k) == key {
			return v, true
		}
	}
	return nil, false
}
