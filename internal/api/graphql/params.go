package graphql

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
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
	s := scanner{b: body}
	s.space()
	if !s.take('{') {
		return false
	}
	s.space()
	if s.take('}') {
		return true
	}
	var seen [4]bool // query, operationName, variables, extensions
	for {
		key, ok := s.plainString()
		if !ok {
			return false
		}
		field := paramField(key)
		if field < 0 || seen[field] {
			return false
		}
		seen[field] = true
		s.space()
		if !s.take(':') {
			return false
		}
		s.space()
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
		s.space()
		switch {
		case s.take(','):
			s.space()
		case s.take('}'):
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

// scanner reads JSON from b[i:]. Each method reports false for anything it
// does not take, without promising where i is then.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) take(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null takes the literal null.
func (s *scanner) null() bool {
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// plainString takes a string of printable ASCII without escapes (a key)
// and returns its bytes, which alias b.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.take('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// stringOrNull takes a string into *out, or null (which leaves *out as it
// is, as encoding/json does).
func (s *scanner) stringOrNull(out *string) bool {
	if s.null() {
		return true
	}
	if !s.take('"') {
		return false
	}
	start := s.i
	for s.i < len(s.b) {
		s.i += plainRun(s.b[s.i:])
		if s.i == len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			*out = string(s.b[start:s.i])
			s.i++
			return true
		case c == '\\':
			return s.escapedString(start, out)
		case c < 0x20:
			return false
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return false // encoding/json would substitute U+FFFD
			}
			s.i += n
		}
	}
	return false
}

// escapedString finishes a string that started at start and has an escape
// at i. It takes the escapes that mean one character (a \u of a surrogate
// half, which encoding/json pairs or replaces, it does not).
func (s *scanner) escapedString(start int, out *string) bool {
	// The string decodes to at most as many bytes as it has up to its
	// closing quote (an escape is never shorter than what it stands for).
	end := s.i
	for end < len(s.b) && s.b[end] != '"' {
		if s.b[end] == '\\' {
			end++
		}
		end++
	}
	var buf strings.Builder // its String does not copy
	buf.Grow(min(end, len(s.b)) - start)
	buf.Write(s.b[start:s.i])
	for s.i < len(s.b) {
		n := plainRun(s.b[s.i:])
		buf.Write(s.b[s.i : s.i+n])
		if s.i += n; s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			*out = buf.String()
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			s.i += 2
			switch e := s.b[s.i-1]; e {
			case '"', '\\', '/':
				buf.WriteByte(e)
			case 'b':
				buf.WriteByte('\b')
			case 'f':
				buf.WriteByte('\f')
			case 'n':
				buf.WriteByte('\n')
			case 'r':
				buf.WriteByte('\r')
			case 't':
				buf.WriteByte('\t')
			case 'u':
				r, ok := s.hex4()
				if !ok || utf8.RuneLen(r) < 0 { // RuneLen is -1 for surrogates
					return false
				}
				buf.WriteRune(r)
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			buf.Write(s.b[s.i : s.i+n])
			s.i += n
		}
	}
	return false
}

// plainRun returns how many bytes b starts with that stand for themselves
// in a JSON string: printable ASCII but the quote and the backslash.
func plainRun(b []byte) int {
	for i, c := range b {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return i
		}
	}
	return len(b)
}

// hex4 takes the four hex digits of a \u escape.
func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.i += 4
	return r, true
}

// objectOrNull takes an object into *out (decoded by encoding/json with
// UseNumber, as the whole body would be), or null (*out stays nil).
func (s *scanner) objectOrNull(out *map[string]any) bool {
	if s.null() {
		return true
	}
	start := s.i
	if !s.skipObject() {
		return false
	}
	raw := s.b[start:s.i]
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
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	depth := 0
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '{', '[':
			if depth++; depth > maxFastDepth {
				return false
			}
		case '}', ']':
			if depth--; depth == 0 {
				s.i++
				return true
			}
		case '"':
			for s.i++; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
				if s.b[s.i] == '\\' {
					s.i++
				}
			}
		}
	}
	return false
}
