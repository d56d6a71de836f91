package partlog

import (
	"bytes"
	"fmt"

	"github.com/hermes-mq/hermes/pkg/record"
)

// testRecords makes n records with payloads of payloadLen bytes; every
// third has a key, every fifth two headers.
func testRecords(n, payloadLen int, ts int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.Timestamp = ts + int64(i)*1000
		r.MessageID[0], r.MessageID[15] = byte(i), byte(i>>8)
		r.Payload = bytes.Repeat([]byte{byte('a' + i%26)}, payloadLen)
		if i%3 == 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		if i%5 == 0 {
			r.Headers = []record.Header{{Key: "h1", Value: []byte("v1")}, {Key: "trace", Value: nil}}
		}
	}
	return recs
}

// recordsEqual reports whether two records hold the same values, treating
// nil and empty payloads alike (the format does not tell them apart).
func recordsEqual(a, b Record) bool {
	if a.Offset != b.Offset || a.MessageID != b.MessageID || a.Timestamp != b.Timestamp ||
		!bytes.Equal(a.Payload, b.Payload) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key) ||
		len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		ha, hb := a.Headers[i], b.Headers[i]
		if ha.Key != hb.Key || (ha.Value == nil) != (hb.Value == nil) || !bytes.Equal(ha.Value, hb.Value) {
			return false
		}
	}
	return true
}
