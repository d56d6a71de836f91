package rest

import (
	"math"

	"github.com/hermes-mq/hermes/internal/jsonscan"
	"github.com/hermes-mq/hermes/pkg/record"
)

// decodePublishFast decodes a publish body of the common shape into out
// (zero on entry), and reports whether it did; if not, out may be partly
// set and the body goes to encoding/json (decodeJSON) whole, so that its
// result and its error are the ones the client gets.
//
// The common shape is what encoding/json reads the same way with none of
// its subtleties: keys spelt exactly as the API spells them, each at most
// once per object; strings the scanner takes (jsonscan.Scanner.Str); integers
// without fraction or exponent, in range; null for a field (which leaves
// it nil, as encoding/json does); no more than MaxPublishRecords records
// or record.MaxRecordHeaders headers; nothing but white space after the
// object. FuzzDecodePublishFast checks that whatever it takes, it decodes
// as decodeJSON does.
func decodePublishFast(body []byte, out *publishBody) bool {
	s := scanner{jsonscan.Scanner{B: body}}
	s.Space()
	var single recordIn
	if !s.object(&single, out) {
		return false
	}
	s.Space()
	if !s.Done() {
		return false
	}
	out.Payload, out.PayloadBase64 = single.Payload, single.PayloadBase64
	out.Key, out.KeyBase64 = single.Key, single.KeyBase64
	out.Headers, out.MessageID = single.Headers, single.MessageID
	out.Partition, out.TimestampUnixNano = single.Partition, single.TimestampUnixNano
	return true
}

// scanner is jsonscan.Scanner with the publish body's shapes.
type scanner struct{ jsonscan.Scanner }

// Fields of a publish body, as bits of a set of fields seen.
const (
	fieldPayload = iota
	fieldPayloadBase64
	fieldKey
	fieldKeyBase64
	fieldHeaders
	fieldMessageID
	fieldPartition
	fieldTimestamp
	fieldMode    // top level only
	fieldRecords // top level only
)

// lastRecordField is the last field of a record of "records".
const lastRecordField = fieldTimestamp

// publishField returns the field a key names, or -1.
func publishField(key []byte) int {
	switch string(key) {
	case "payload":
		return fieldPayload
	case "payload_base64":
		return fieldPayloadBase64
	case "key":
		return fieldKey
	case "key_base64":
		return fieldKeyBase64
	case "headers":
		return fieldHeaders
	case "message_id":
		return fieldMessageID
	case "partition":
		return fieldPartition
	case "timestamp_unix_nano":
		return fieldTimestamp
	case "mode":
		return fieldMode
	case "records":
		return fieldRecords
	}
	return -1
}

// object takes a record object into r. At the top level of a body, top
// is the body, which takes "mode" and "records"; in "records" it is nil.
func (s *scanner) object(r *recordIn, top *publishBody) bool {
	if !s.Next('{') {
		return false
	}
	if s.Next('}') {
		return true
	}
	var seen uint16
	for more := true; more; {
		key, ok := s.Key()
		f := publishField(key)
		if !ok || f < 0 || (f > lastRecordField && top == nil) || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		switch {
		case s.Null(): // the field stays nil
		case f == fieldMode:
			ok = s.strPtr(&top.Mode)
		case f == fieldRecords:
			ok = s.records(&top.Records)
		default:
			ok = s.recordValue(f, r)
		}
		if !ok {
			return false
		}
		if more, ok = s.EndOf('}'); !ok {
			return false
		}
	}
	return true
}

// recordValue takes the value of record field f into r.
func (s *scanner) recordValue(f int, r *recordIn) bool {
	switch f {
	case fieldPayload:
		return s.strPtr(&r.Payload)
	case fieldPayloadBase64:
		return s.strPtr(&r.PayloadBase64)
	case fieldKey:
		return s.strPtr(&r.Key)
	case fieldKeyBase64:
		return s.strPtr(&r.KeyBase64)
	case fieldHeaders:
		return s.headers(&r.Headers)
	case fieldMessageID:
		return s.strPtr(&r.MessageID)
	case fieldPartition:
		v, ok := s.Integer(math.MinInt32, math.MaxInt32)
		p := int32(v)
		r.Partition = &p
		return ok
	case fieldTimestamp:
		v, ok := s.Integer(math.MinInt64, math.MaxInt64)
		r.TimestampUnixNano = &v
		return ok
	}
	return false
}

func (s *scanner) strPtr(p **string) bool {
	v, ok := s.Str()
	*p = &v
	return ok
}

// records takes the "records" array.
func (s *scanner) records(out **recordList) bool {
	if !s.Next('[') {
		return false
	}
	l := recordList{}
	if !s.Next(']') {
		for more := true; more; {
			if len(l) == MaxPublishRecords {
				return false
			}
			l = append(l, recordIn{})
			if !s.object(&l[len(l)-1], nil) {
				return false
			}
			var ok bool
			if more, ok = s.EndOf(']'); !ok {
				return false
			}
		}
	}
	*out = &l
	return true
}

// headers takes "headers": an array of header objects or an object of
// strings (or nulls).
func (s *scanner) headers(out **headersIn) bool {
	h := headersIn{}
	var ok bool
	switch {
	case s.Next('['):
		ok = s.headerList(&h)
	case s.Next('{'):
		ok = s.headerMap(&h)
	}
	*out = &h
	return ok
}

// headerList takes the elements of an array of headers, after its '['.
func (s *scanner) headerList(h *headersIn) bool {
	if s.Next(']') {
		return true
	}
	for more := true; more; {
		if len(*h) == record.MaxRecordHeaders {
			return false
		}
		*h = append(*h, headerIn{})
		if !s.header(&(*h)[len(*h)-1]) {
			return false
		}
		var ok bool
		if more, ok = s.EndOf(']'); !ok {
			return false
		}
	}
	return true
}

// header takes one header object.
func (s *scanner) header(h *headerIn) bool {
	if !s.Next('{') {
		return false
	}
	if s.Next('}') {
		return true
	}
	var seen uint8
	for more := true; more; {
		key, ok := s.Key()
		f := headerField(key)
		if !ok || f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		if !s.Null() {
			switch f {
			case 0:
				ok = s.strPtr(&h.Key)
			case 1:
				ok = s.strPtr(&h.KeyBase64)
			case 2:
				ok = s.strPtr(&h.Value)
			case 3:
				ok = s.strPtr(&h.ValueBase64)
			}
		}
		if !ok {
			return false
		}
		if more, ok = s.EndOf('}'); !ok {
			return false
		}
	}
	return true
}

// headerField returns the field of a header a key names, or -1.
func headerField(key []byte) int {
	switch string(key) {
	case "key":
		return 0
	case "key_base64":
		return 1
	case "value":
		return 2
	case "value_base64":
		return 3
	}
	return -1
}

// headerMap takes the members of an object of headers, after its '{',
// in document order.
func (s *scanner) headerMap(h *headersIn) bool {
	if s.Next('}') {
		return true
	}
	for more := true; more; {
		if len(*h) == record.MaxRecordHeaders {
			return false
		}
		key, ok := s.Str()
		if !ok {
			return false
		}
		s.Space()
		if !s.Next(':') {
			return false
		}
		var v *string
		if !s.Null() && !s.strPtr(&v) {
			return false
		}
		*h = append(*h, headerIn{Key: &key, Value: v})
		if more, ok = s.EndOf('}'); !ok {
			return false
		}
	}
	return true
}
