package chaos

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// The damage nemeses hit a segment's batches, not the preallocated zeros
// after them (which a node cuts quietly, so damage there tests nothing).
func TestDamageHitsTheData(t *testing.T) {
	var data []byte
	for i := 0; i < 40; i++ {
		data = record.AppendBatch(data, int64(i*5), []record.Record{
			{Timestamp: 1, Payload: make([]byte, 100)}, {Timestamp: 1, Payload: make([]byte, 100)},
			{Timestamp: 1, Payload: make([]byte, 100)}, {Timestamp: 1, Payload: make([]byte, 100)},
			{Timestamp: 1, Payload: make([]byte, 100)}})
	}
	end := int64(len(data))
	seg := filepath.Join(t.TempDir(), "00000000000000000000.log")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		if err := os.WriteFile(seg, append(data, make([]byte, 1<<20)...), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := dataEnd(seg); err != nil || got != end {
			t.Fatalf("dataEnd = %d, %v; want %d", got, err, end)
		}
		truncate := i%2 == 0
		desc, err := damage(rng, []string{seg}, truncate)
		if err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if truncate {
			if int64(len(after)) >= end {
				t.Fatalf("%s: file is %d bytes, the data %d", desc, len(after), end)
			}
			continue
		}
		diff := -1
		for j := range after {
			if j >= len(data) || after[j] != data[j] {
				diff = j
				break
			}
		}
		if diff < 0 || int64(diff) >= end {
			t.Fatalf("%s: changed byte %d, the data ends at %d", desc, diff, end)
		}
	}
}
