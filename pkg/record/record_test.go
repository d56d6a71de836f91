package record

import "testing"

// TestCloneOwnsItsBytes: a clone shares no byte with the original, keeps
// nil apart from empty, and caps each slice so an append cannot spill
// into its neighbour.
func TestCloneOwnsItsBytes(t *testing.T) {
	in := Record{Key: []byte{}, Payload: []byte("pay"), Headers: []Header{{Key: "a", Value: nil}, {Key: "b", Value: []byte("v")}}}
	var got []int
	out := Clone(&in, func(n int) []byte { got = append(got, n); return make([]byte, 0, n) })
	if len(got) != 1 || got[0] != CloneBytes(&in) || got[0] != 4 {
		t.Fatalf("alloc asked for %v", got)
	}
	in.Payload[0] = 'X'
	if string(out.Payload) != "pay" || out.Key == nil || len(out.Key) != 0 || out.Headers[0].Value != nil || string(out.Headers[1].Value) != "v" {
		t.Fatalf("clone %+v", out)
	}
	if cap(out.Payload) != len(out.Payload) {
		t.Fatal("payload not capped")
	}
}

// TestCloneAllOwnsItsBytes: copies of several records share nothing with
// the originals and keep nil apart from empty.
func TestCloneAllOwnsItsBytes(t *testing.T) {
	in := []Record{
		{Key: []byte("k1"), Payload: []byte("p1"), Headers: []Header{{Key: "h", Value: []byte("v1")}}},
		{Key: nil, Payload: []byte{}},
		{Key: []byte("k3"), Payload: []byte("p3")},
	}
	out := CloneAll(in)
	for i := range in {
		for _, b := range [][]byte{in[i].Key, in[i].Payload} {
			for j := range b {
				b[j] = 'X'
			}
		}
		if len(in[i].Headers) > 0 {
			in[i].Headers[0].Value[0] = 'X'
		}
	}
	if len(out) != 3 || string(out[0].Key) != "k1" || string(out[0].Payload) != "p1" || string(out[0].Headers[0].Value) != "v1" ||
		out[1].Key != nil || out[1].Payload == nil || len(out[1].Payload) != 0 || string(out[2].Key) != "k3" || string(out[2].Payload) != "p3" {
		t.Fatalf("copies %+v", out)
	}
}
