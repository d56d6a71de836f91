package memring

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/hermes-mq/hermes/pkg/record"
)

// recs returns n records with payloads of size bytes, the first 8 holding
// seq+i so a reader can check which record it got.
func recs(seq, n, size int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		p := make([]byte, max(size, 8))
		binary.BigEndian.PutUint64(p, uint64(seq+i))
		out[i] = record.Record{Payload: p[:size:size], Timestamp: int64(seq + i)}
	}
	return out
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		batches     []int // records per Append, 10-byte payloads
		start, end  int64
		wantRecords int
		wantBytes   int64
	}{
		{"under both bounds", Options{MaxRecords: 10, MaxBytes: 1000}, []int{3, 4}, 0, 7, 7, 70},
		{"record bound wraps", Options{MaxRecords: 5, MaxBytes: 1000}, []int{3, 3, 3, 4}, 8, 13, 5, 50},
		{"byte bound", Options{MaxRecords: 100, MaxBytes: 35}, []int{2, 2, 2}, 3, 6, 3, 30},
		{"batch larger than the ring", Options{MaxRecords: 4, MaxBytes: 1000}, []int{2, 9}, 7, 11, 4, 40},
		{"record larger than MaxBytes is evicted at once", Options{MaxRecords: 4, MaxBytes: 5}, []int{1, 2}, 3, 3, 0, 0},
		{"defaults", Options{}, []int{100, 100}, 0, 200, 200, 2000},
		{"grows past the first allocation", Options{MaxRecords: 200}, []int{150, 100}, 50, 250, 200, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.opts)
			seq := 0
			for _, n := range tt.batches {
				if first := r.Append(recs(seq, n, 10)); first != int64(seq) {
					t.Fatalf("Append returned %d, want %d", first, seq)
				}
				seq += n
			}
			n, b := r.Stats()
			if r.Start() != tt.start || r.End() != tt.end || n != tt.wantRecords || b != tt.wantBytes || r.Evicted() != tt.start {
				t.Fatalf("start %d end %d records %d bytes %d evicted %d, want %d %d %d %d %d",
					r.Start(), r.End(), n, b, r.Evicted(), tt.start, tt.end, tt.wantRecords, tt.wantBytes, tt.start)
			}
			got, next, _ := r.Read(0, 1000, nil)
			checkRun(t, got, tt.start)
			if next != tt.end || len(got) != tt.wantRecords {
				t.Fatalf("Read all: %d records, next %d", len(got), next)
			}
		})
	}
}

// checkRun checks that got holds consecutive offsets from first, each with
// the payload recs gave it.
func checkRun(t *testing.T, got []record.Record, first int64) {
	t.Helper()
	for i, rec := range got {
		if rec.Offset != first+int64(i) || binary.BigEndian.Uint64(rec.Payload[:8]) != uint64(rec.Offset) ||
			rec.Timestamp != rec.Offset {
			t.Fatalf("record %d: offset %d payload %x, want offset %d", i, rec.Offset, rec.Payload, first+int64(i))
		}
	}
}

func TestRead(t *testing.T) {
	r := New(Options{MaxRecords: 5})
	r.Append(recs(0, 13, 8)) // retains 8..12
	tests := []struct {
		name       string
		from       int64
		limit      int
		wantFirst  int64
		wantN      int
		next, miss int64
	}{
		{"behind the ring", 3, 100, 8, 5, 13, 5},
		{"behind, limited", 0, 2, 8, 2, 10, 8},
		{"negative from counts from 0", -4, 1, 8, 1, 9, 8},
		{"inside", 10, 100, 10, 3, 13, 0},
		{"inside across the wrap", 9, 3, 9, 3, 12, 0},
		{"at end", 13, 100, 0, 0, 13, 0},
		{"past end", 20, 100, 0, 0, 13, 0},
		{"zero limit", 10, 0, 0, 0, 10, 0},
		{"zero limit behind", 2, 0, 0, 0, 8, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]record.Record, 3, 8) // garbage to be overwritten
			got, next, missed := r.Read(tt.from, tt.limit, dst)
			if len(got) != tt.wantN || next != tt.next || missed != tt.miss {
				t.Fatalf("Read(%d, %d) = %d records, next %d, missed %d; want %d %d %d",
					tt.from, tt.limit, len(got), next, missed, tt.wantN, tt.next, tt.miss)
			}
			checkRun(t, got, tt.wantFirst)
		})
	}
}

func TestNoAliasing(t *testing.T) {
	r := New(Options{MaxRecords: 2})
	in := []record.Record{{
		Key:     []byte("key"),
		Headers: []record.Header{{Key: "h", Value: []byte("hv")}, {Key: "nil"}},
		Payload: []byte("payload"),
	}, {Key: []byte{}, Payload: nil}}
	r.Append(in)
	held, _, _ := r.Read(0, 10, nil)
	in[0].Key[0], in[0].Headers[0].Value[0], in[0].Payload[0] = 'X', 'X', 'X' // caller reuses its buffers
	_ = append(held[0].Key, "ZZZZ"...)                                        // a reader appending must not clobber the payload
	for i := range 10 {                                                       // wrap the ring many times
		r.Append(recs(i, 2, 16))
	}
	h := held[0]
	if string(h.Key) != "key" || string(h.Payload) != "payload" || string(h.Headers[0].Value) != "hv" ||
		h.Headers[1].Value != nil || h.Headers[1].Key != "nil" {
		t.Fatalf("held record changed: %+v", h)
	}
	if held[1].Key == nil || len(held[1].Key) != 0 || held[1].Payload != nil {
		t.Fatalf("nil/empty not preserved: key %#v payload %#v", held[1].Key, held[1].Payload)
	}
	if in[0].Offset != 0 || in[1].Offset != 0 {
		t.Fatalf("Append modified its input")
	}
}

func TestWait(t *testing.T) {
	r := New(Options{})
	ch := r.Wait()
	if ch != r.Wait() {
		t.Fatalf("two Waits before an Append returned different channels")
	}
	r.Append(nil)
	select {
	case <-ch:
		t.Fatalf("empty Append woke waiters")
	default:
	}
	r.Append(recs(0, 1, 1))
	select {
	case <-ch:
	default:
		t.Fatalf("Append did not wake waiters")
	}
	next := r.Wait()
	select {
	case <-next:
		t.Fatalf("fresh channel already closed")
	default:
	}
	r.Append(recs(1, 1, 1)) // no one waiting since: must not panic on a closed channel
	r.Append(recs(2, 1, 1))
	<-next
}

// TestConcurrent runs one writer and several readers under -race. Each
// reader must see every offset exactly once, either as a record or as
// missed, with the right payload.
func TestConcurrent(t *testing.T) {
	const total, batch, readers = 20000, 50, 4
	r := New(Options{MaxRecords: 256, MaxBytes: 256 * 16})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for id := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			missed, err := readAll(r, total, 7+id*13)
			if err == nil {
				t.Logf("reader %d: missed %d of %d", id, missed, total)
			}
			errs <- err
		}()
	}
	for seq := 0; seq < total; seq += batch {
		r.Append(recs(seq, batch, 16))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if r.End() != total || r.Evicted() != total-256 {
		t.Fatalf("end %d evicted %d", r.End(), r.Evicted())
	}
}

func readAll(r *Ring, total int64, limit int) (int64, error) {
	var next, seen, missed int64
	var buf []record.Record
	for next < total {
		ch := r.Wait()
		got, n, m := r.Read(next, limit, buf)
		if n != next+m+int64(len(got)) {
			return 0, fmt.Errorf("Read(%d) gave %d records, missed %d, next %d", next, len(got), m, n)
		}
		for i, rec := range got {
			want := next + m + int64(i)
			if rec.Offset != want || !bytes.Equal(rec.Payload[:8], binary.BigEndian.AppendUint64(nil, uint64(want))) {
				return 0, fmt.Errorf("got offset %d payload %x, want %d", rec.Offset, rec.Payload, want)
			}
		}
		seen += int64(len(got))
		missed += m
		if len(got) == 0 && m == 0 {
			<-ch
		}
		next, buf = n, got
	}
	if seen+missed != total {
		return 0, fmt.Errorf("seen %d + missed %d != %d", seen, missed, total)
	}
	return missed, nil
}

// TestAppendSmallRecordsAllocateNothing: small records are copied into the
// ring's shared chunks, so appending one costs no allocation of its own
// (a 64 KiB chunk every few hundred records, which AllocsPerRun's integer
// average rounds away).
func TestAppendSmallRecordsAllocateNothing(t *testing.T) {
	r := New(Options{MaxRecords: 1024})
	one := recs(0, 1, 96)
	r.Append(one)
	if avg := testing.AllocsPerRun(10000, func() { r.Append(one) }); avg != 0 {
		t.Fatalf("Append of one 96-byte record allocates %.2f times", avg)
	}
	// And the copies are independent of the caller's buffers and of each
	// other.
	one[0].Payload[0] ^= 0xff
	got, _, _ := r.Read(r.End()-2, 2, nil)
	if got[0].Payload[0] == one[0].Payload[0] || got[1].Payload[0] == one[0].Payload[0] {
		t.Fatal("the ring shares the caller's payload")
	}
	got[0].Payload = append(got[0].Payload, 1) // capped: must not write into got[1]
	if len(got[1].Payload) != 96 || got[1].Payload[0] == 1 && got[0].Payload[96] == 1 && &got[0].Payload[96] == &got[1].Payload[0] {
		t.Fatal("a reader's append wrote into the next record")
	}
}
