package record

import (
	"fmt"
	"testing"
)

func TestHeaderValue(t *testing.T) {
	recs := []Record{
		{Payload: []byte("a"), Headers: []Header{{Key: "x", Value: []byte("1")}, {Key: "traceparent", Value: []byte("tp0")}, {Key: "traceparent", Value: []byte("second")}}},
		{Payload: []byte("b")},
		{Payload: []byte("c"), Headers: []Header{{Key: "traceparent", Value: []byte("tp2")}, {Key: "empty", Value: []byte{}}}},
	}
	b := AppendBatch(nil, 0, recs)
	for _, c := range []struct {
		i    int
		key  string
		want string
		ok   bool
	}{
		{0, "traceparent", "tp0", true}, {0, "x", "1", true}, {0, "y", "", false},
		{1, "traceparent", "", false}, {2, "traceparent", "tp2", true}, {2, "empty", "", true},
		{3, "traceparent", "", false}, {-1, "x", "", false},
	} {
		v, ok := HeaderValue(b, c.i, c.key)
		if ok != c.ok || string(v) != c.want {
			t.Errorf("HeaderValue(%d, %q) = %q, %v; want %q, %v", c.i, c.key, v, ok, c.want, c.ok)
		}
	}
	var got []string
	ForEachHeaderValue(b, "traceparent", func(i int, v []byte) bool {
		got = append(got, fmt.Sprintf("%d=%s", i, v))
		return true
	})
	if fmt.Sprint(got) != "[0=tp0 2=tp2]" {
		t.Errorf("ForEachHeaderValue: %v", got)
	}
	got = nil
	ForEachHeaderValue(b, "traceparent", func(i int, v []byte) bool { got = append(got, string(v)); return false })
	if len(got) != 1 {
		t.Errorf("ForEachHeaderValue went on after false: %v", got)
	}
	if _, ok := HeaderValue(b[:len(b)-3], 0, "x"); ok {
		t.Error("HeaderValue of a cut batch found a header")
	}
	n := 0
	count := func(int, []byte) bool { n++; return true }
	if a := testing.AllocsPerRun(100, func() {
		HeaderValue(b, 2, "traceparent")
		ForEachHeaderValue(b, "traceparent", count)
	}); a != 0 {
		t.Errorf("HeaderValue and ForEachHeaderValue allocate %.1f times", a)
	}
}
