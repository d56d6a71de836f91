package dedup

import (
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

func batch(t *testing.T, ids ...byte) []byte {
	t.Helper()
	var recs []record.Record
	for i, id := range ids {
		r := record.Record{Timestamp: int64(1000 + i), Payload: []byte("payload")}
		r.MessageID[0], r.MessageID[15] = id, 7
		recs = append(recs, r)
	}
	return record.AppendBatch(nil, 0, recs)
}

func TestKeyOfIgnoresWhatTheBrokerRewrites(t *testing.T) {
	b := batch(t, 1, 2, 3)
	k, ok := KeyOf(b)
	if !ok || k.Count != 3 || k.FirstID[0] != 1 {
		t.Fatalf("key %+v, %v", k, ok)
	}
	record.SetPosition(b, 12345, 7, 99, 0)
	if k2, _ := KeyOf(b); k2 != k {
		t.Fatalf("key changed with the batch's offset and raft position: %+v vs %+v", k2, k)
	}
	if k3, _ := KeyOf(batch(t, 1, 2)); k3 == k {
		t.Fatal("a batch with the same first id but other records has the same key")
	}
	var recs = []record.Record{{Timestamp: 1, Payload: []byte("x")}} // no id
	if _, ok := KeyOf(record.AppendBatch(nil, 0, recs)); ok {
		t.Fatal("a batch without message ids has a key")
	}
	if _, ok := KeyOf(b[:20]); ok {
		t.Fatal("a short batch has a key")
	}
}

func TestWindowBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	w := New(Options{MaxAge: time.Minute, MaxBatches: 3})
	keys := make([]Key, 5)
	for i := range keys {
		keys[i], _ = KeyOf(batch(t, byte(i+1)))
		w.Add(keys[i], int64(10*i), now)
	}
	if w.Len() != 3 {
		t.Fatalf("%d batches remembered, bound 3", w.Len())
	}
	if _, ok := w.Lookup(keys[1], now); ok {
		t.Fatal("a batch beyond the count bound is still remembered")
	}
	if base, ok := w.Lookup(keys[4], now); !ok || base != 40 {
		t.Fatalf("newest batch: %d, %v", base, ok)
	}
	w.TruncateFrom(30)
	if _, ok := w.Lookup(keys[3], now); ok || w.Len() != 1 {
		t.Fatalf("after truncating at 30: %d left, batch at 30 found %v", w.Len(), ok)
	}
	if _, ok := w.Lookup(keys[2], now.Add(2*time.Minute)); ok || w.Len() != 0 {
		t.Fatal("a batch older than the age bound is still remembered")
	}
	if New(Options{}) != nil {
		t.Fatal("zero options should disable the window")
	}
	var off *Window
	off.Add(keys[0], 1, now)
	if _, ok := off.Lookup(keys[0], now); ok {
		t.Fatal("a disabled window remembers")
	}
	// Many adds: the consumed prefix is reclaimed, lookups stay right.
	w = New(Options{MaxAge: time.Hour, MaxBatches: 100})
	for i := 0; i < 5000; i++ {
		var k Key
		k.FirstID[0], k.FirstID[1], k.Count = byte(i), byte(i>>8), 1
		w.Add(k, int64(i), now)
	}
	if w.Len() != 100 || len(w.fifo) > 2200 {
		t.Fatalf("len %d, fifo %d", w.Len(), len(w.fifo))
	}
	for i := 4900; i < 5000; i++ {
		var k Key
		k.FirstID[0], k.FirstID[1], k.Count = byte(i), byte(i>>8), 1
		if base, ok := w.Lookup(k, now); !ok || base != int64(i) {
			t.Fatalf("batch %d: %d, %v", i, base, ok)
		}
	}
	// Reclaiming the prefix reuses the array: a warm window's adds do not
	// allocate it again (AllocsPerRun rounds down per run, so a run is a
	// thousand adds).
	next := 5000
	thousand := func() {
		for range 1000 {
			var k Key
			k.FirstID[0], k.FirstID[1], k.Count = byte(next), byte(next>>8), 1
			w.Add(k, int64(next), now)
			next++
		}
	}
	thousand()
	if allocs := testing.AllocsPerRun(20, thousand); allocs > 1 {
		t.Fatalf("a warm window allocates %.0f times per thousand adds", allocs)
	}
}
