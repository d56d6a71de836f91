package broker

import (
	"fmt"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// DecodeFrom leaves no record it did not return in dst's array: trim
// decodes into pooled scratch slices, which must not keep the batches'
// bytes alive through records skipped (before from, beyond max).
func TestDecodeFromClearsWhatItLeavesOut(t *testing.T) {
	recs := make([]record.Record, 10)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(100 + i), Timestamp: int64(i + 1), Payload: []byte(fmt.Sprintf("p%d", i))}
	}
	batch := record.AppendBatch(nil, 100, recs)
	for _, tc := range []struct {
		from       int64
		max        int
		want, next int64
	}{
		{from: 100, max: 0, want: 10, next: 110},
		{from: 104, max: 0, want: 6, next: 110},
		{from: 100, max: 3, want: 3, next: 103},
		{from: 107, max: 2, want: 2, next: 109},
	} {
		dst := make([]record.Record, 0, 64)
		out, next, err := DecodeFrom(dst, [][]byte{batch}, tc.from, tc.max)
		if err != nil || int64(len(out)) != tc.want || next != tc.next {
			t.Fatalf("from %d max %d: %d records, next %d, %v; want %d, %d", tc.from, tc.max, len(out), next, err, tc.want, tc.next)
		}
		if out[0].Offset != tc.from || string(out[0].Payload) != fmt.Sprintf("p%d", tc.from-100) {
			t.Fatalf("from %d: first record %d %q", tc.from, out[0].Offset, out[0].Payload)
		}
		for i, r := range dst[len(out):cap(dst)] {
			if r.Payload != nil || r.Offset != 0 {
				t.Fatalf("from %d max %d: record left out at %d still in the array: %+v", tc.from, tc.max, len(out)+i, r)
			}
		}
	}
}
