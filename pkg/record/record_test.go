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
