package record

import "testing"

// TestNewMessageIDIsAUUIDv7: version 7, RFC 9562 variant, time ordered,
// never repeated.
func TestNewMessageIDIsAUUIDv7(t *testing.T) {
	seen := make(map[MessageID]bool)
	var prev MessageID
	for i := range 100000 {
		id := NewMessageID()
		if id[6]>>4 != 7 || id[8]>>6 != 2 {
			t.Fatalf("id %x: version %d, variant %b", id, id[6]>>4, id[8]>>6)
		}
		if seen[id] {
			t.Fatalf("id %x repeated after %d", id, i)
		}
		seen[id] = true
		if string(id[:6]) < string(prev[:6]) {
			t.Fatalf("id %x is older than %x", id, prev)
		}
		prev = id
	}
}
