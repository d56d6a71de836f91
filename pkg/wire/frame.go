// Package wire is hermes-wire v1, Hermes' binary protocol for low
// latency (docs/PROTOCOL.md): its frames, their encoding and decoding,
// shared by the broker's listener and the Go client in this package.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Frame types (docs/PROTOCOL.md, "hermes-wire v1").
const (
	FrameHello       = 0x01
	FrameHelloOK     = 0x02
	FramePing        = 0x03
	FramePong        = 0x04
	FrameOK          = 0x05
	FrameOpenTopic   = 0x10
	FrameTopic       = 0x11
	FramePublish     = 0x12
	FramePublishAck  = 0x13
	FrameSubscribe   = 0x20
	FrameSubscribed  = 0x21
	FrameAssignment  = 0x22
	FrameDeliver     = 0x23
	FrameCredit      = 0x24
	FrameAck         = 0x25
	FrameNack        = 0x26
	FrameCommit      = 0x27
	FrameUnsubscribe = 0x28
	FrameSubEnd      = 0x29
	FrameError       = 0x7F
)

// Sizes and bounds of the protocol.
const (
	// HeaderSize is the size of a frame's fixed header.
	HeaderSize = 16
	// Version is the newest protocol version of this package.
	Version = 1
	// MaxFrame is the largest frame a server accepts after the
	// handshake: the largest packed batch and room for the publish
	// header.
	MaxFrame = record.MaxBatchBytes + 64<<10
	// MaxHandshakeFrame bounds frames before the handshake.
	MaxHandshakeFrame = 64 << 10
	// MaxInFlight is how many PUBLISH frames a client may have
	// unanswered.
	MaxInFlight = 1024
	// MaxSubscriptions and MaxTopics bound a connection's open
	// subscriptions and topics.
	MaxSubscriptions = 64
	MaxTopics        = 4096
	// MaxRecords bounds the records of a PUBLISH, MaxOffsets the offsets
	// of an ACK, NACK or COMMIT.
	MaxRecords = 65536
	MaxOffsets = 65536
	// MaxPingBody bounds a PING's body; MaxClientName a client's name;
	// MaxSecret a user name, password or token.
	MaxPingBody   = 64
	MaxClientName = 255
	MaxSecret     = 1024
	// MaxName bounds topic and group names.
	MaxName = 249
)

// Magic opens a HELLO.
var Magic = [4]byte{'H', 'M', 'W', 'R'}

// Auth methods of a HELLO.
const (
	AuthNone     = 0
	AuthPassword = 1
	AuthToken    = 2
)

// Delivery modes of a PUBLISH (as the gRPC API numbers them).
const (
	ModeDefault     = 0
	ModeConsistent  = 1
	ModeEventual    = 2
	ModePerformance = 3
)

// Formats of a PUBLISH or a DELIVER.
const (
	FormatRecords = 0
	FormatBatch   = 1
)

// Flags of a SUBSCRIBE.
const (
	SubPerformance = 1 << 0
	SubPacked      = 1 << 1
)

// Start positions of a SUBSCRIBE.
const (
	StartLatest    = 0
	StartEarliest  = 1
	StartOffset    = 2
	StartTimestamp = 3
)

// Capabilities of a HELLO and its HELLO_OK.
const (
	// CapGRPCAddress: HELLO_OK ends with the node's gRPC address (for
	// what hermes-wire does not carry: topic and group administration).
	CapGRPCAddress = 1 << 0
	// CapClientID: SUBSCRIBE ends with the member's client id.
	CapClientID = 1 << 1
	// CapLeader: PUBLISH_ACK ends with the hermes-wire address of the
	// partition's leader when the node relayed the records to it.
	CapLeader = 1 << 2
)

// FlagFatal on an ERROR: the server closes the connection after it.
const FlagFatal = 1

// Error codes: the gRPC API's ErrorCode numbers, and two of the
// protocol's own.
const (
	CodeInvalidArgument    = 1
	CodeTopicNotFound      = 2
	CodeUnavailable        = 13
	CodeUnauthenticated    = 17
	CodeUnsupportedVersion = 20
	CodeProtocolError      = 21
)

var codeNames = map[uint16]string{
	1: "INVALID_ARGUMENT", 2: "TOPIC_NOT_FOUND", 3: "TOPIC_EXISTS", 4: "INVALID_TOPIC_NAME",
	5: "PARTITION_NOT_FOUND", 6: "MESSAGE_TOO_LARGE", 7: "OFFSET_OUT_OF_RANGE", 8: "RESOURCE_EXHAUSTED",
	9: "GROUP_NOT_FOUND", 10: "NOT_ASSIGNED", 11: "UNKNOWN_MEMBER", 12: "CORRUPT_BATCH",
	13: "UNAVAILABLE", 14: "INTERNAL", 15: "GROUP_NOT_EMPTY", 16: "PERMISSION_DENIED",
	17: "UNAUTHENTICATED", 18: "ALREADY_EXISTS", 19: "NOT_FOUND",
	20: "UNSUPPORTED_VERSION", 21: "PROTOCOL_ERROR", 22: "CORRUPT_DATA",
}

// CodeName names an error code as every Hermes API does ("" for none it
// knows).
func CodeName(code uint16) string { return codeNames[code] }

// CodeOf returns the code of a name (0 for none it knows).
func CodeOf(name string) uint16 {
	for c, n := range codeNames {
		if n == name {
			return c
		}
	}
	return 0
}

// Error is an ERROR frame, or a SUB_END's reason.
type Error struct {
	Code       uint16
	Retriable  bool
	RetryAfter time.Duration
	Message    string
	// Leader is the hermes-wire address of the node to send the request
	// to, when the server knows it.
	Leader string
	// Fatal: the server closed the connection after it.
	Fatal bool
}

func (e *Error) Error() string {
	name := CodeName(e.Code)
	if name == "" {
		name = fmt.Sprintf("code %d", e.Code)
	}
	return name + ": " + e.Message
}

// errMalformed is a frame body that does not parse.
var errMalformed = errors.New("malformed frame")

// IsMalformed reports whether err is a Decoder's error.
func IsMalformed(err error) bool { return errors.Is(err, errMalformed) }

// Header is a frame's fixed header.
type Header struct {
	// Length is the bytes after the length field: 12 + the body's.
	Length uint32
	Type   uint8
	Flags  uint8
	Corr   uint64
}

// ParseHeader parses the first HeaderSize bytes of b.
func ParseHeader(b []byte) (Header, error) {
	h := Header{
		Length: binary.LittleEndian.Uint32(b),
		Type:   b[4],
		Flags:  b[5],
		Corr:   binary.LittleEndian.Uint64(b[8:]),
	}
	if r := binary.LittleEndian.Uint16(b[6:]); r != 0 {
		return h, fmt.Errorf("%w: reserved header bytes are %#04x, not 0", errMalformed, r)
	}
	if h.Length < HeaderSize-4 {
		return h, fmt.Errorf("%w: frame length %d is below the header's 12", errMalformed, h.Length)
	}
	return h, nil
}

// BodyLen is the length of the body of the frame h heads.
func (h Header) BodyLen() int { return int(h.Length) - (HeaderSize - 4) }

// Decoder reads a frame body strictly: every read checks its bounds,
// and the first failure sticks, so a reader reads all its fields and
// checks Err (or End) once. Slices it returns alias the body.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder of body.
func NewDecoder(body []byte) Decoder { return Decoder{b: body} }

// Err is the first failure.
func (d *Decoder) Err() error { return d.err }

// Fail records a failure (the first one sticks).
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errMalformed}, args...)...)
	}
	d.b = nil
}

// Take returns the next n bytes.
func (d *Decoder) Take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.Fail("%s needs %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Rest returns every byte left.
func (d *Decoder) Rest() []byte {
	if d.err != nil {
		return nil
	}
	v := d.b
	d.b = d.b[len(d.b):]
	return v
}

// Len is the bytes left.
func (d *Decoder) Len() int { return len(d.b) }

func (d *Decoder) U8(what string) uint8 {
	if v := d.Take(1, what); v != nil {
		return v[0]
	}
	return 0
}

func (d *Decoder) U16(what string) uint16 {
	if v := d.Take(2, what); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *Decoder) U32(what string) uint32 {
	if v := d.Take(4, what); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *Decoder) U64(what string) uint64 {
	if v := d.Take(8, what); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *Decoder) I32(what string) int32 { return int32(d.U32(what)) }
func (d *Decoder) I64(what string) int64 { return int64(d.U64(what)) }

// Zero reads n reserved bytes, which must be 0.
func (d *Decoder) Zero(n int, what string) {
	for _, c := range d.Take(n, what) {
		if c != 0 {
			d.Fail("%s must be 0", what)
			return
		}
	}
}

// Str reads a str of at most max bytes.
func (d *Decoder) Str(max int, what string) []byte {
	n := int(d.U16(what))
	if n > max {
		d.Fail("%s is %d bytes; at most %d", what, n, max)
		return nil
	}
	return d.Take(n, what)
}

// Bytes reads a bytes field: nil for length −1.
func (d *Decoder) Bytes(what string) []byte {
	n := d.I32(what)
	if n == -1 || d.err != nil {
		return nil
	}
	if n < -1 {
		d.Fail("%s length %d", what, n)
		return nil
	}
	return d.Take(int(n), what)
}

// End checks that the body was read exactly and returns Err.
func (d *Decoder) End() error {
	if d.err == nil && len(d.b) != 0 {
		d.Fail("%d bytes left over", len(d.b))
	}
	return d.err
}

// Record reads a published record (R) into r. Header keys are copied
// into strings; the other slices alias the body.
func (d *Decoder) Record(r *record.Record) {
	n := int(d.U32("record length"))
	body := d.Take(n, "record")
	if d.err != nil {
		return
	}
	rd := Decoder{b: body}
	r.Offset = 0
	rd.recordFields(r)
	if rd.err != nil {
		d.err, d.b = rd.err, nil
	}
}

// Delivered reads a delivered record (D) into r and returns its
// delivery count.
func (d *Decoder) Delivered(r *record.Record) int {
	n := int(d.U32("record length"))
	body := d.Take(n, "record")
	if d.err != nil {
		return 0
	}
	rd := Decoder{b: body}
	r.Offset = rd.I64("offset")
	count := int(rd.U32("delivery count"))
	rd.recordFields(r)
	if rd.err != nil {
		d.err, d.b = rd.err, nil
	}
	return count
}

// recordFields reads what R and D share: timestamp to payload, which is
// the rest of d.
func (d *Decoder) recordFields(r *record.Record) {
	r.Timestamp = d.I64("timestamp")
	copy(r.MessageID[:], d.Take(16, "message id"))
	r.Key = d.Bytes("key")
	hc := int(d.U16("header count"))
	if hc > record.MaxRecordHeaders {
		d.Fail("%d headers; at most %d", hc, record.MaxRecordHeaders)
		return
	}
	r.Headers = nil
	if hc > 0 && d.err == nil {
		r.Headers = make([]record.Header, hc)
		for i := range hc {
			k := d.Str(1<<16-1, "header key")
			r.Headers[i] = record.Header{Key: string(k), Value: d.Bytes("header value")}
		}
	}
	r.Payload = d.Rest()
}

// ErrorBody reads an ERROR body (or a SUB_END's after its sub id).
func (d *Decoder) ErrorBody() *Error {
	e := &Error{Code: d.U16("code")}
	e.Retriable = d.U8("retriable") == 1
	d.Zero(1, "reserved")
	e.RetryAfter = time.Duration(d.U32("retry after")) * time.Millisecond
	e.Message = string(d.Str(1<<16-1, "message"))
	e.Leader = string(d.Str(1<<16-1, "leader"))
	return e
}

// BeginFrame appends a frame header with room for the length and
// returns where the frame starts; FinishFrame fills the length in once
// the body is appended.
func BeginFrame(b []byte, typ, flags uint8, corr uint64) ([]byte, int) {
	at := len(b)
	b = append(b, 0, 0, 0, 0, typ, flags, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, corr)
	return b, at
}

// FinishFrame sets the length of the frame that starts at at.
func FinishFrame(b []byte, at int) []byte {
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func AppendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func AppendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func AppendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// AppendStr appends a str (cut at 65,535 bytes).
func AppendStr(b []byte, s string) []byte {
	if len(s) > 1<<16-1 {
		s = s[:1<<16-1]
	}
	b = AppendU16(b, uint16(len(s)))
	return append(b, s...)
}

// AppendBytes appends a bytes field (nil: length −1).
func AppendBytes(b []byte, v []byte) []byte {
	if v == nil {
		return AppendU32(b, 0xffffffff)
	}
	b = AppendU32(b, uint32(len(v)))
	return append(b, v...)
}

// AppendRecord appends a record as a publisher sends it (R).
func AppendRecord(b []byte, r *record.Record) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendRecordFields(b, r)
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// AppendDelivered appends a delivered record (D).
func AppendDelivered(b []byte, r *record.Record, deliveryCount int) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = AppendU64(b, uint64(r.Offset))
	b = AppendU32(b, uint32(deliveryCount))
	b = appendRecordFields(b, r)
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func appendRecordFields(b []byte, r *record.Record) []byte {
	b = AppendU64(b, uint64(r.Timestamp))
	b = append(b, r.MessageID[:]...)
	b = AppendBytes(b, r.Key)
	b = AppendU16(b, uint16(len(r.Headers)))
	for _, h := range r.Headers {
		b = AppendStr(b, h.Key)
		b = AppendBytes(b, h.Value)
	}
	return append(b, r.Payload...)
}

// AppendErrorBody appends an ERROR body's fields.
func AppendErrorBody(b []byte, e *Error) []byte {
	b = AppendU16(b, e.Code)
	r := uint8(0)
	if e.Retriable {
		r = 1
	}
	b = append(b, r, 0)
	b = AppendU32(b, uint32(min(e.RetryAfter.Milliseconds(), 1<<32-1)))
	b = AppendStr(b, e.Message)
	return AppendStr(b, e.Leader)
}
