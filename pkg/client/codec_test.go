package client

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// TestCodecRoundTrip: what the producer packs, the consumer unpacks,
// keeping nil and empty keys apart and header order.
func TestCodecRoundTrip(t *testing.T) {
	ts := time.Unix(1700000000, 123)
	msgs := []*Message{
		{ID: MessageID{1}, Key: nil, Payload: []byte("a")},
		{ID: MessageID{2}, Key: []byte{}, Payload: nil, Timestamp: ts},
		{ID: MessageID{3}, Key: []byte("k"), Payload: []byte("c"),
			Headers: []Header{{Key: "x", Value: []byte("1")}, {Key: "x", Value: nil}}},
	}
	var enc encoder
	now := time.Unix(1800000000, 0)
	data, err := enc.encode(msgs, now)
	if err != nil {
		t.Fatal(err)
	}
	two := append(append([]byte{}, data...), data...) // two batches back to back
	var dec decoder
	got, err := dec.decode(two, "t", 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 { // record 0 of each batch (both at base 0) is below `from`
		t.Fatalf("decoded %d records, want 4", len(got))
	}
	for i, m := range got[:2] {
		want := msgs[i+1]
		if m.ID != want.ID || !bytes.Equal(m.Payload, want.Payload) || (m.Key == nil) != (want.Key == nil) ||
			m.Topic != "t" || m.Partition != 4 || m.Offset != int64(i+1) || len(m.Headers) != len(want.Headers) {
			t.Errorf("record %d: %+v, want %+v", i+1, m, want)
		}
	}
	if !got[0].Timestamp.Equal(ts) || !got[3].Timestamp.Equal(now) {
		t.Errorf("timestamps %v %v", got[0].Timestamp, got[3].Timestamp)
	}
	if h := got[1].Headers; h[0].Key != "x" || string(h[0].Value) != "1" || h[1].Key != "x" {
		t.Errorf("headers %+v", h)
	}
	putBuffer(data)
}

func TestDecodeCorrupt(t *testing.T) {
	var enc encoder
	data, _ := enc.encode([]*Message{{Payload: []byte("abc")}}, time.Now())
	data[len(data)-1] ^= 0xff
	var dec decoder
	if _, err := dec.decode(data, "t", 0, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("err = %v, want ErrCorruptBatch", err)
	}
}

// FuzzDecode: no input makes the consumer's decoder panic, and whatever it
// accepts decodes to records of the asked partition.
func FuzzDecode(f *testing.F) {
	var enc encoder
	data, _ := enc.encode([]*Message{{Key: []byte("k"), Payload: []byte("v"), Headers: []Header{{Key: "h"}}}}, time.Now())
	f.Add(data)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var dec decoder
		ms, err := dec.decode(b, "t", 2, 0)
		if err != nil && !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("error of unknown kind: %v", err)
		}
		for _, m := range ms {
			if m.Partition != 2 || m.Topic != "t" {
				t.Fatalf("decoded %+v", m)
			}
		}
	})
}

// TestEncodeSizeBound: a batch is refused when its encoding exceeds the
// format's bound, whether its payloads alone do or only its framing and
// headers push it over; a batch just within is encoded whole.
func TestEncodeSizeBound(t *testing.T) {
	var enc encoder
	var dec decoder
	// Two records whose payloads fill the bound but for room to spare:
	// the batch is the header, two ids and lengths, and the payloads.
	fits := func(spare int) []*Message {
		half := (record.MaxBatchBytes - record.BatchHeaderSize - spare) / 2
		return []*Message{{ID: MessageID{1}, Payload: make([]byte, half)}, {ID: MessageID{2}, Payload: make([]byte, half)}}
	}
	data, err := enc.encode(fits(200), time.Now())
	if err != nil {
		t.Fatalf("a batch within the bound: %v", err)
	}
	if len(data) > record.MaxBatchBytes {
		t.Fatalf("encoded %d bytes, more than %d", len(data), record.MaxBatchBytes)
	}
	if got, err := dec.decode(data, "t", 0, 0); err != nil || len(got) != 2 {
		t.Fatalf("decoded %d records, %v", len(got), err)
	}
	putBuffer(data)
	// Payloads within the bound, framing and a header over it.
	over := fits(0)
	over[1].Headers = []Header{{Key: "h", Value: make([]byte, 100)}}
	if _, err := enc.encode(over, time.Now()); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("framing over the bound: err = %v, want ErrMessageTooLarge", err)
	}
	// Payloads alone over it: refused before encoding.
	if _, err := enc.encode(fits(-10), time.Now()); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("payloads over the bound: err = %v, want ErrMessageTooLarge", err)
	}
}
