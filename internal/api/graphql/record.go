package graphql

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Record is a fetched or delivered record as the schema shows it. Its
// text and base64 forms are computed only for the fields a query selects.
// The slices of rec may alias the broker's caches: read, never modify.
type Record struct {
	rec           record.Record
	partition     int32
	mode          broker.Mode
	deliveryCount int
}

// The methods are the fields of Record in records.graphqls.

func (r *Record) Partition() int32      { return r.partition }
func (r *Record) Offset() int64         { return r.rec.Offset }
func (r *Record) MessageID() string     { return uuid.UUID(r.rec.MessageID).String() }
func (r *Record) Key() *string          { return text(r.rec.Key) }
func (r *Record) KeyBase64() *string    { return b64(r.rec.Key) }
func (r *Record) Payload() *string      { return textOrEmpty(r.rec.Payload) }
func (r *Record) PayloadBase64() string { return base64.StdEncoding.EncodeToString(r.rec.Payload) }
func (r *Record) Timestamp() time.Time  { return time.Unix(0, r.rec.Timestamp).UTC() }
func (r *Record) Mode() DeliveryMode    { return modeOut(r.mode) }
func (r *Record) DeliveryCount() int32  { return int32(r.deliveryCount) }

func (r *Record) Headers() []*Header {
	out := make([]*Header, len(r.rec.Headers))
	for i, h := range r.rec.Headers {
		out[i] = &Header{key: h.Key, value: h.Value}
	}
	return out
}

// Header is one record header.
type Header struct {
	key   string
	value []byte
}

func (h *Header) Key() string         { return h.key }
func (h *Header) Value() *string      { return textOrEmpty(h.value) }
func (h *Header) ValueBase64() string { return base64.StdEncoding.EncodeToString(h.value) }

// text is b as a string, or nil when b is nil or not UTF-8.
func text(b []byte) *string {
	if b == nil {
		return nil
	}
	return textOrEmpty(b)
}

// textOrEmpty is b as a string ("" for nil), or nil when not UTF-8.
func textOrEmpty(b []byte) *string {
	if !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	return &s
}

func b64(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func newRecord(r record.Record, partition int32, mode broker.Mode, deliveries int) *Record {
	return &Record{rec: r, partition: partition, mode: mode, deliveryCount: deliveries}
}
