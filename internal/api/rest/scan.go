package rest

import (
	"math"
	"strings"
	"unicode/utf8"
)

// scanner reads JSON from b[i:] for the hand decoders of the common
// request shapes (publishfast.go). It takes only JSON that
// encoding/json reads the same way; each method reports false for
// anything else, without promising where i is then, and the caller falls
// back to encoding/json for the whole body.
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
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// next takes c and the white space after it.
func (s *scanner) next(c byte) bool {
	if !s.take(c) {
		return false
	}
	s.space()
	return true
}

// key takes an object key of printable ASCII without escapes, and the
// colon after it; the bytes returned alias b.
func (s *scanner) key() ([]byte, bool) {
	if !s.take('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			key := s.b[start:s.i]
			s.i++
			s.space()
			if !s.next(':') {
				return nil, false
			}
			return key, true
		case c < 0x20 || c >= utf8.RuneSelf || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// endOf takes what follows a member or element and the white space
// after it: a comma (more follow, true) or last, the closing bracket
// (false). ok is false for anything else.
func (s *scanner) endOf(last byte) (more, ok bool) {
	s.space()
	switch {
	case s.next(','):
		return true, true
	case s.next(last):
		return false, true
	}
	return false, false
}

// str takes a string. It refuses a string that encoding/json would alter
// (invalid UTF-8, a \u escape of a surrogate half) or refuse (a control
// character).
func (s *scanner) str() (string, bool) {
	if !s.take('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) {
		s.i += plainRun(s.b[s.i:])
		if s.i == len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			out := string(s.b[start:s.i])
			s.i++
			return out, true
		case c == '\\':
			return s.escapedString(start)
		case c < 0x20:
			return "", false
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			s.i += n
		}
	}
	return "", false
}

// escapedString finishes a string that started at start and has an escape
// at i.
func (s *scanner) escapedString(start int) (string, bool) {
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
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return buf.String(), true
		case c == '\\':
			if !s.escape(&buf) {
				return "", false
			}
		case c < 0x20:
			return "", false
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			buf.Write(s.b[s.i : s.i+n])
			s.i += n
		}
	}
	return "", false
}

// escape takes one escape (at i) into buf: not a \u of a surrogate half,
// which encoding/json pairs or replaces.
func (s *scanner) escape(buf *strings.Builder) bool {
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
	return true
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

// integer takes a JSON integer (no fraction or exponent) within [lo, hi].
// A number it refuses may still be valid JSON, whose error (a fraction,
// an overflow) encoding/json then gives.
func (s *scanner) integer(lo, hi int64) (int64, bool) {
	neg := s.take('-')
	start := s.i
	var u uint64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		u = u*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	switch n := s.i - start; {
	case n == 0 || n > 19: // 19 digits cannot overflow u
		return 0, false
	case n > 1 && s.b[start] == '0':
		return 0, false // a leading zero: not JSON
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	v := int64(u)
	if neg {
		v = -v
	}
	return v, lo <= v && v <= hi
}
