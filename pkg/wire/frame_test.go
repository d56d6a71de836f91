package wire

import (
	"bytes"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// TestSpecExample is the PUBLISH of docs/PROTOCOL.md, byte for byte.
func TestSpecExample(t *testing.T) {
	want := []byte{
		0x41, 0, 0, 0, 0x12, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0,
		1, 0, 0, 0,
		0x21, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 'k',
		0, 0,
		'h', 'i',
	}
	got := AppendPublish(nil, 7, 1, 0, ModePerformance, []record.Record{{Key: []byte("k"), Payload: []byte("hi")}})
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
}

// TestRecordRoundTrip: R and D decode to what was encoded, nil and empty
// kept apart.
func TestRecordRoundTrip(t *testing.T) {
	in := record.Record{Offset: 42, Timestamp: 7, MessageID: record.MessageID{1, 2}, Key: []byte{},
		Headers: []record.Header{{Key: "a", Value: nil}, {Key: "b", Value: []byte("v")}}, Payload: []byte("p")}
	d := NewDecoder(AppendDelivered(nil, &in, 3))
	var out record.Record
	if n := d.Delivered(&out); n != 3 || d.End() != nil {
		t.Fatalf("count %d, err %v", n, d.Err())
	}
	if out.Offset != 42 || out.Timestamp != 7 || out.MessageID != in.MessageID || out.Key == nil || len(out.Key) != 0 ||
		out.Headers[0].Value != nil || string(out.Headers[1].Value) != "v" || string(out.Payload) != "p" {
		t.Fatalf("decoded %+v", out)
	}
	in.Key = nil
	d = NewDecoder(AppendRecord(nil, &in))
	d.Record(&out)
	if d.End() != nil || out.Key != nil || out.Offset != 0 {
		t.Fatalf("decoded %+v, %v", out, d.Err())
	}
}

// FuzzDecoder: no input makes the client's decoding of pushed frames or
// records panic, and what decodes re-encodes to the same bytes.
func FuzzDecoder(f *testing.F) {
	f.Add(AppendDelivered(nil, &record.Record{Payload: []byte("x"), Headers: []record.Header{{Key: "h"}}}, 1))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		var r record.Record
		n := d.Delivered(&r)
		if d.End() == nil {
			if again := AppendDelivered(nil, &r, n); !bytes.Equal(again, b) {
				t.Fatalf("% x re-encodes to % x", b, again)
			}
		}
		d = NewDecoder(b)
		d.ErrorBody()
		s := &Subscription{ready: make(chan struct{}, 1), credit: 1}
		for _, typ := range []uint8{FrameDeliver, FrameAssignment, FrameSubEnd} {
			d = NewDecoder(b)
			s.push(typ, &d)
		}
	})
}

// TestParseAckLeader: a PUBLISH_ACK ends with the leader hint exactly when
// the connection has CapLeader, after the places of records of several
// partitions; one without the hint, or with bytes past it, does not parse.
func TestParseAckLeader(t *testing.T) {
	h := Header{Type: FramePublishAck}
	ack := func(partition int32, count int, tail func([]byte) []byte) []byte {
		b := AppendU32(nil, uint32(partition))
		b = append(b, ModeConsistent, 0, 0, 0)
		b = AppendU64(b, 40)
		b = AppendU32(b, uint32(count))
		return tail(b)
	}
	none := func(b []byte) []byte { return b }
	hint := func(addr string) func([]byte) []byte {
		return func(b []byte) []byte { return AppendStr(b, addr) }
	}
	places := func(b []byte) []byte {
		b = AppendU32(b, 0)
		b = AppendU64(b, 7)
		b = AppendU32(b, 1)
		return AppendU64(b, 9)
	}
	for _, c := range []struct {
		name   string
		body   []byte
		caps   uint32
		leader string
		bad    bool
	}{
		{"v1", ack(2, 3, none), 0, "", false},
		{"v1 with a hint it did not ask for", ack(2, 3, hint("")), 0, "", true},
		{"relayed", ack(2, 3, hint("10.0.0.2:7070")), CapLeader, "10.0.0.2:7070", false},
		{"stored here", ack(2, 3, hint("")), CapLeader, "", false},
		{"hint missing", ack(2, 3, none), CapLeader, "", true},
		{"bytes past the hint", append(ack(2, 3, hint("a:1")), 0), CapLeader, "", true},
		{"several partitions, v1", ack(-1, 2, places), 0, "", false},
		{"several partitions, hint", ack(-1, 2, func(b []byte) []byte { return hint("")(places(b)) }), CapLeader, "", false},
		{"several partitions, a place short", ack(-1, 3, func(b []byte) []byte { return hint("")(places(b)) }), CapLeader, "", true},
	} {
		a, err := parseAck(h, c.body, c.caps)
		if (err != nil) != c.bad || err == nil && a.Leader != c.leader {
			t.Errorf("%s: %+v, %v", c.name, a, err)
		}
		if err == nil && a.Partition == -1 && (len(a.Places) != 2 || a.Places[1] != (Place{Partition: 1, Offset: 9})) {
			t.Errorf("%s: places %+v", c.name, a.Places)
		}
	}
}
