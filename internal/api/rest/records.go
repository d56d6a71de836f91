package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// recordOut is a record as this API shows it. Bytes that are valid UTF-8
// are shown as text (`payload`, `key`, header `value`), others in base64
// (`payload_base64`, ...), so that JSON never alters them.
type recordOut struct {
	Partition         int32       `json:"partition"`
	Offset            int64       `json:"offset"`
	Timestamp         string      `json:"timestamp"`
	TimestampUnixNano int64       `json:"timestamp_unix_nano"`
	MessageID         string      `json:"message_id"`
	Key               *string     `json:"key,omitempty"`
	KeyBase64         *string     `json:"key_base64,omitempty"`
	Headers           []headerOut `json:"headers,omitempty"`
	Payload           *string     `json:"payload,omitempty"`
	PayloadBase64     *string     `json:"payload_base64,omitempty"`
	// Subscriptions only: how often the record was delivered, and
	// "performance" for a record of the in-memory ring (whose offsets are
	// the ring's, not the log's).
	DeliveryCount int    `json:"delivery_count,omitempty"`
	Mode          string `json:"mode,omitempty"`
}

type headerOut struct {
	Key         *string `json:"key,omitempty"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

// timeLayout is RFC 3339 with all nine digits of the nanoseconds.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func toRecordOut(r *record.Record, partition int32) recordOut {
	out := recordOut{
		Partition: partition, Offset: r.Offset,
		Timestamp:         time.Unix(0, r.Timestamp).UTC().Format(timeLayout),
		TimestampUnixNano: r.Timestamp,
		MessageID:         formatID(r.MessageID),
	}
	out.Payload, out.PayloadBase64 = textOrBase64(r.Payload)
	if out.Payload == nil && out.PayloadBase64 == nil {
		empty := ""
		out.Payload = &empty
	}
	out.Key, out.KeyBase64 = textOrBase64(r.Key)
	if len(r.Headers) > 0 {
		out.Headers = make([]headerOut, len(r.Headers))
		for i, h := range r.Headers {
			ho := &out.Headers[i]
			ho.Key, ho.KeyBase64 = textOrBase64([]byte(h.Key))
			if ho.Key == nil && ho.KeyBase64 == nil {
				empty := ""
				ho.Key = &empty
			}
			ho.Value, ho.ValueBase64 = textOrBase64(h.Value)
		}
	}
	return out
}

func deliveredOut(r *broker.DeliveredRecord) recordOut {
	out := toRecordOut(&r.Record, r.Partition)
	out.DeliveryCount = r.DeliveryCount
	if r.Mode == broker.ModePerformance {
		out.Mode = "performance"
	}
	return out
}

// textOrBase64 shows b as text when it is valid UTF-8, else as base64;
// both nil when b is nil.
func textOrBase64(b []byte) (text, b64 *string) {
	if b == nil {
		return nil, nil
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// formatID shows a message id as a UUID string (8-4-4-4-12 lower-case hex).
func formatID(id record.MessageID) string { return uuid.UUID(id).String() }

// parseID parses a UUID string of exactly the 8-4-4-4-12 form.
func parseID(s string) (record.MessageID, error) {
	if len(s) != 36 {
		return record.MessageID{}, fmt.Errorf("must be a UUID string (8-4-4-4-12 hex digits), got %q", s)
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return record.MessageID{}, fmt.Errorf("must be a UUID string (8-4-4-4-12 hex digits), got %q", s)
	}
	return record.MessageID(id), nil
}

// recordIn is one record of a publish body. Pointer fields tell "absent"
// (or null) from "empty".
type recordIn struct {
	Payload           *string    `json:"payload"`
	PayloadBase64     *string    `json:"payload_base64"`
	Key               *string    `json:"key"`
	KeyBase64         *string    `json:"key_base64"`
	Headers           *headersIn `json:"headers"`
	MessageID         *string    `json:"message_id"`
	Partition         *int32     `json:"partition"`
	TimestampUnixNano *int64     `json:"timestamp_unix_nano"`
}

// headerIn is one header: key (or key_base64) and value (or
// value_base64; neither: a nil value).
type headerIn struct {
	Key         *string `json:"key"`
	KeyBase64   *string `json:"key_base64"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

// headersIn takes an array of headerIn, or an object of string values
// (read in document order, so duplicate keys are kept).
type headersIn []headerIn

func (h *headersIn) UnmarshalJSON(data []byte) error {
	*h = nil
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	tok, _ := dec.Token()
	switch tok {
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if i >= record.MaxRecordHeaders {
				return fieldErrorf("headers", "holds more than %d headers", record.MaxRecordHeaders)
			}
			var hi *headerIn
			path := fmt.Sprintf("headers[%d]", i)
			if err := decodeElement(dec, &hi, path); err != nil {
				return err
			}
			if hi == nil {
				return fieldErrorf(path, "must be an object, not null")
			}
			*h = append(*h, *hi)
		}
	case json.Delim('{'):
		for i := 0; dec.More(); i++ {
			if i >= record.MaxRecordHeaders {
				return fieldErrorf("headers", "holds more than %d headers", record.MaxRecordHeaders)
			}
			k, _ := dec.Token()
			key := k.(string)
			var v *string
			if err := decodeElement(dec, &v, fmt.Sprintf("headers[%q]", key)); err != nil {
				return err
			}
			*h = append(*h, headerIn{Key: &key, Value: v})
		}
	default:
		return fieldErrorf("headers", "must be an array of {key, value} objects or an object of strings")
	}
	if *h == nil {
		*h = headersIn{}
	}
	return nil
}

// recordList is the "records" array of a publish body, decoded one
// element at a time so that a body of many tiny records is refused at
// MaxPublishRecords instead of taking memory out of proportion to it.
type recordList []recordIn

// MaxPublishRecords bounds the records of one publish request.
const MaxPublishRecords = 10000

func (l *recordList) UnmarshalJSON(data []byte) error {
	*l = nil
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if tok, _ := dec.Token(); tok != json.Delim('[') {
		return fieldErrorf("records", "must be an array of records")
	}
	out := recordList{}
	for i := 0; dec.More(); i++ {
		if i >= MaxPublishRecords {
			return fieldErrorf("records", "holds more than %d records; split the request", MaxPublishRecords)
		}
		var r *recordIn
		path := fmt.Sprintf("records[%d]", i)
		if err := decodeElement(dec, &r, path); err != nil {
			return err
		}
		if r == nil {
			return fieldErrorf(path, "must be an object, not null")
		}
		out = append(out, *r)
	}
	*l = out
	return nil
}
