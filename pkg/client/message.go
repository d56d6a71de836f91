package client

import (
	"fmt"
	"strings"
	"time"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Mode is a delivery mode: when a publish is acknowledged, and what it
// survives. See the README for the guarantees of each.
type Mode int32

const (
	// ModeDefault uses the topic's default mode.
	ModeDefault Mode = Mode(hermesv1.DeliveryMode_DELIVERY_MODE_UNSPECIFIED)
	// ModeConsistent acknowledges after a quorum commit, fsynced on each
	// replica.
	ModeConsistent Mode = Mode(hermesv1.DeliveryMode_DELIVERY_MODE_CONSISTENT)
	// ModeEventual acknowledges after the leader's local fsync.
	ModeEventual Mode = Mode(hermesv1.DeliveryMode_DELIVERY_MODE_EVENTUAL)
	// ModePerformance keeps records in the leader's memory only: they are
	// lost on restart and when its ring overflows.
	ModePerformance Mode = Mode(hermesv1.DeliveryMode_DELIVERY_MODE_PERFORMANCE)
)

var modeNames = []string{"default", "consistent", "eventual", "performance"}

// String returns the mode's lower-case name ("consistent", ...).
func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int32(m))
}

// ParseMode parses a mode name as String writes it (case-insensitive; ""
// is ModeDefault). Errors: ErrInvalidArgument for an unknown name.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ModeDefault, nil
	}
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return 0, &Error{Code: CodeInvalidArgument,
		Message: fmt.Sprintf("unknown mode %q (want consistent, eventual or performance)", s)}
}

func (m Mode) proto() hermesv1.DeliveryMode { return hermesv1.DeliveryMode(m) }

// Header is one record header. Keys need not be unique; order is kept.
type Header struct {
	Key   string
	Value []byte
}

// MessageID is a record's unique id: a UUIDv7 made by this package when the
// publisher leaves it zero. Retries resend the same records with the same
// ids (a Producer resends a batch byte for byte), and the broker recognises
// a retry of records it stored within its duplicate window (`hermes serve
// --dedup-window`, default 2 minutes, and at most --dedup-max-batches
// batches per partition; -1 turns it off): it answers with the first
// copy's offsets and does not store them again. A retry outside that
// window, and ModePerformance records (never checked), may be stored and
// delivered twice; the copies carry the same id, by which consumers can
// recognise them.
type MessageID [16]byte

// IsZero reports whether id is unset.
func (id MessageID) IsZero() bool { return id == MessageID{} }

// String formats id as a UUID ("xxxxxxxx-xxxx-...").
func (id MessageID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// Message is one record, as a publisher sends it and a consumer sees it.
//
// On publish, only ID (zero: one is made), Key, Headers, Payload and
// Timestamp (zero: now) are read; the publisher must not modify the
// Message or its slices until its publish completed (Future done).
// The fields below Timestamp are set on delivery.
//
// A delivered Message's slices may share memory with other messages of the
// same delivery; they stay valid as long as the Message is referenced.
type Message struct {
	ID MessageID
	// Key chooses the partition by murmur2 hash; nil means no key (an
	// empty non-nil key is a key).
	Key       []byte
	Headers   []Header
	Payload   []byte
	Timestamp time.Time

	Topic     string
	Partition int32
	Offset    int64
	// Mode is the mode the record was published in (on delivery:
	// ModePerformance records carry offsets of a separate in-memory ring).
	Mode Mode
	// DeliveryCount is 1 for the first delivery with AckPerMessage, more
	// for redeliveries; 0 in other ack modes.
	DeliveryCount int
}

// size is the record's size as the broker's max message bytes counts it:
// key + headers + payload.
func (m *Message) size() int {
	n := len(m.Key) + len(m.Payload)
	for i := range m.Headers {
		n += len(m.Headers[i].Key) + len(m.Headers[i].Value)
	}
	return n
}

// Ack locates one published record.
type Ack struct {
	ID        MessageID
	Partition int32
	Offset    int64
	// Mode is the mode the record was acknowledged in.
	Mode Mode
}

// String formats the ack as "partition/offset".
func (a Ack) String() string { return fmt.Sprintf("%d/%d", a.Partition, a.Offset) }

// toProto converts m for a unary or unpacked publish.
func (m *Message) toProto() *hermesv1.Record {
	r := &hermesv1.Record{MessageId: m.ID[:], Payload: m.Payload}
	if m.Key != nil {
		r.Key = m.Key
	}
	if !m.Timestamp.IsZero() {
		r.TimestampUnixNano = m.Timestamp.UnixNano()
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]*hermesv1.Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = &hermesv1.Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

// messageFromProto converts a delivered record into m.
func messageFromProto(m *Message, topic string, r *hermesv1.Record) {
	*m = Message{
		Key:           r.Key, // nil when absent: optional field
		Payload:       r.GetPayload(),
		Topic:         topic,
		Partition:     r.GetPartition(),
		Offset:        r.GetOffset(),
		Mode:          Mode(r.GetMode()),
		DeliveryCount: int(r.GetDeliveryCount()),
	}
	copy(m.ID[:], r.GetMessageId())
	if ts := r.GetTimestampUnixNano(); ts != 0 {
		m.Timestamp = time.Unix(0, ts)
	}
	if hs := r.GetHeaders(); len(hs) > 0 {
		m.Headers = make([]Header, len(hs))
		for i, h := range hs {
			m.Headers[i] = Header{Key: h.GetKey(), Value: h.GetValue()}
		}
	}
}
