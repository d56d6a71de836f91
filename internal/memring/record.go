package memring

import "github.com/hermes-mq/hermes/pkg/record"

// size is what a record counts against Options.MaxBytes: key, header keys
// and values, and payload bytes.
func size(rec *record.Record) int64 {
	n := len(rec.Key) + len(rec.Payload)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// clone returns a deep copy of rec whose key, header values and payload
// live in one slice from alloc (header keys are strings, already
// immutable).
// Each sub-slice is capped at its length, so an append by a reader cannot
// write into its neighbour. nil slices stay nil and empty ones empty.
func clone(rec *record.Record, alloc func(n int) []byte) record.Record {
	out := *rec
	n := len(rec.Key) + len(rec.Payload)
	for _, h := range rec.Headers {
		n += len(h.Value)
	}
	buf := alloc(n)
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
		out.Headers = make([]record.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			out.Headers[i] = record.Header{Key: h.Key, Value: take(h.Value)}
		}
	}
	return out
}
