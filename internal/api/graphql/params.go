package graphql

import (
	"bytes"
	"encoding/json"

	"github.com/99designs/gqlgen/graphql"

	"github.com/hermes-mq/hermes/internal/jsonscan"
)

// maxFastDepth bounds how deeply the variables or extensions of a request
// may nest for the fast path to take them; deeper ones go to
// encoding/json whole, so that its own nesting limit (counted from the
// body, not from the object) decides.
const maxFastDepth = 64

// decodeParams decodes a POST body into p (zero on entry) exactly as
// gqlgen's POST transport does: encoding/json's Decoder with UseNumber,
// one JSON value, the rest of the body ignored. Nearly every client sends
// {"query": "...", "operationName": ..., "variables": {...}, "extensions":
// {...}}; that shape, with plain keys and strings, is decoded by hand,
// which costs a fraction of encoding/json's reflection. Anything else (an
// unknown or differently-cased key, a key twice, a string with a control
// character or invalid UTF-8 or a surrogate escape, a malformed body) goes
// to encoding/json from the start, so that its result and its error are
// the ones the client gets. FuzzDecodeParams checks both paths agree.
func decodeParams(body []byte, p *graphql.RawParams) error {
	if decodeParamsFast(body, p) {
		return nil
	}
	*p = graphql.RawParams{}
	return decodeParamsJSON(body, p)
}

// decodeParamsJSON is gqlgen's decoding (transport.jsonDecode).
func decodeParamsJSON(body []byte, p *graphql.RawParams) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	return d.Decode(p)
}

// decodeParamsFast decodes body into p if it has the common shape, and
// reports whether it did; if not, p may be partly set.
func decodeParamsFast(body []byte, p *graphql.RawParams) bool {
	s := scanner{jsonscan.Scanner{B: body}}
	s.Space()
	if !s.Take('{') {
		return false
	}
	s.Space()
	if s.Take('}') {
		return true
	}
	var seen [4]bool // query, operationName, variables, extensions
	for {
		key, ok := s.Key()
		if !ok {
			return false
		}
		field := paramField(key)
		if field < 0 || seen[field] {
			return false
		}
		seen[field] = true
		switch field {
		case 0:
			ok = s.stringOrNull(&p.Query)
		case 1:
			ok = s.stringOrNull(&p.OperationName)
		case 2:
			ok = s.objectOrNull(&p.Variables)
		case 3:
			ok = s.objectOrNull(&p.Extensions)
		}
		if !ok {
			return false
		}
		s.Space()
		switch {
		case s.Take(','):
			s.Space()
		case s.Take('}'):
			return true // what follows the value is ignored, as by json.Decoder
		default:
			return false
		}
	}
}

// paramField returns the index of a request key in decodeParamsFast's
// seen, or -1 for a key it leaves to encoding/json.
func paramField(key []byte) int {
	switch string(key) {
	case "query":
		return 0
	case "operationName":
		return 1
	case "variables":
		return 2
	case "extensions":
		return 3
	}
	return -1
}

// scanner is jsonscan.Scanner with the request body's shapes.
type scanner struct{ jsonscan.Scanner }

// stringOrNull takes a string into *out, or null (which leaves *out as it
// is, as encoding/json does).
func (s *scanner) stringOrNull(out *string) bool {
	if s.Null() {
		return true
	}
	v, ok := s.Str()
	if ok {
		*out = v
	}
	return ok
}

// objectOrNull takes an object into *out (decoded by encoding/json with
// UseNumber, as the whole body would be), or null (*out stays nil).
func (s *scanner) objectOrNull(out *map[string]any) bool {
	if s.Null() {
		return true
	}
	start := s.I
	if !s.skipObject() {
		return false
	}
	raw := s.B[start:s.I]
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	// The decoder must take exactly raw: a value that ended sooner would
	// mean the two scans disagree, and encoding/json's is the one to keep.
	return d.Decode(out) == nil && d.InputOffset() == int64(len(raw))
}

// skipObject moves past an object, matching brackets and skipping
// strings; encoding/json validates what is inside. It refuses an object
// nested deeper than maxFastDepth.
func (s *scanner) skipObject() bool {
	if s.I >= len(s.B) || s.B[s.I] != '{' {
		return false
	}
	depth := 0
	for ; s.I < len(s.B); s.I++ {
		switch s.B[s.I] {
		case '{', '[':
			if depth++; depth > maxFastDepth {
				return false
			}
		case '}', ']':
			if depth--; depth == 0 {
				s.I++
				return true
			}
		case '"':
			for s.I++; s.I < len(s.B) && s.B[s.I] != '"'; s.I++ {
				if s.B[s.I] == '\\' {
					s.I++
				}
			}
		}
	}
	return false
}
