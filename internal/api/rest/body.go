package rest

import (
	"net/http"
	"strconv"
)

// errReader is a reader that fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// writePublishResponse answers a publish as writeJSON does, without
// reflection. The strings of a publishResponse (a mode's name, message
// ids) are plain ASCII with nothing to escape; one that is not is left to
// writeJSON.
func writePublishResponse(w http.ResponseWriter, resp *publishResponse) {
	const ackSize = len(`{"partition":2147483647,"offset":-9223372036854775808,"message_id":"01234567-89ab-cdef-0123-456789abcdef"},`)
	b := make([]byte, 0, len(`{"mode":"performance","records":[]}`)+1+len(resp.Records)*ackSize)
	b = append(b, `{"mode":`...)
	b, ok := appendPlainString(b, resp.Mode)
	b = append(b, `,"records":[`...)
	for i := range resp.Records {
		ack := &resp.Records[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"partition":`...)
		b = strconv.AppendInt(b, int64(ack.Partition), 10)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, ack.Offset, 10)
		b = append(b, `,"message_id":`...)
		var plain bool
		b, plain = appendPlainString(b, ack.MessageID)
		ok = ok && plain
		b = append(b, '}')
	}
	b = append(b, "]}\n"...) // json.Encoder ends a value with a newline
	if !ok {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// appendPlainString appends s quoted, and reports whether s was plain:
// printable ASCII without a quote or backslash, which JSON takes as is.
func appendPlainString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	b = append(b, s...)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return b, false
		}
	}
	return b, true
}
