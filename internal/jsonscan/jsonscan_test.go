package jsonscan

import (
	"encoding/json"
	"math"
	"testing"
)

// Str takes exactly the strings encoding/json decodes unchanged, and
// gives the same value; others it refuses (the caller falls back).
func TestStrAgreesWithEncodingJSON(t *testing.T) {
	// encoding/json pairs surrogate escapes and replaces invalid UTF-8:
	// Str leaves both to it.
	alters := map[string]bool{`"\ud83d\ude00"`: true, "\"bad\xff\"": true}
	for _, in := range []string{
		`"plain"`, `""`, `"tab\tquote\"slash\/back\\"`, `"\u00e9\u4e2d"`, `"é中"`,
		`"\ud83d\ude00"`, // a surrogate pair: refused (encoding/json pairs it)
		"\"ctl\x01\"", "\"bad\xff\"", `"unterminated`, `"\x"`, `"\u12"`,
	} {
		s := Scanner{B: []byte(in)}
		got, ok := s.Str()
		var want string
		err := json.Unmarshal([]byte(in), &want)
		switch {
		case ok && (err != nil || got != want || !s.Done()):
			t.Errorf("%q: took %q, encoding/json says %q, %v", in, got, want, err)
		case !ok && err == nil && !alters[in]:
			t.Errorf("%q: refused what encoding/json decodes unchanged (%q)", in, want)
		}
	}
}

func TestIntegerAndKeys(t *testing.T) {
	for in, want := range map[string]bool{"0": true, "-7": true, "42": true, "01": false, "1.5": false, "1e3": false,
		"9223372036854775807": true, "9223372036854775808": false, "-": false} {
		s := Scanner{B: []byte(in)}
		if _, ok := s.Integer(math.MinInt64, math.MaxInt64); ok != want {
			t.Errorf("Integer(%q): %v, want %v", in, ok, want)
		}
	}
	s := Scanner{B: []byte(`{ "a" : 1 , "b":2}`)}
	s.Space()
	if !s.Next('{') {
		t.Fatal("no object")
	}
	for _, k := range []string{"a", "b"} {
		key, ok := s.Key()
		if !ok || string(key) != k {
			t.Fatalf("key %q, %v, want %q", key, ok, k)
		}
		if _, ok := s.Integer(0, 10); !ok {
			t.Fatal("value")
		}
		more, ok := s.EndOf('}')
		if !ok || more != (k == "a") {
			t.Fatalf("after %q: more %v, ok %v", k, more, ok)
		}
	}
	if !s.Done() {
		t.Fatal("not at the end")
	}
	if _, ok := (&Scanner{B: []byte(`"caf\u00e9":`)}).Key(); ok {
		t.Fatal("a key with an escape is taken")
	}
}
