// Package jsonscan reads the common shapes of JSON request bodies by
// hand, for the REST and GraphQL adapters' fast decoders: it takes only
// JSON that encoding/json reads the same way, and each method reports
// false for anything else, so that the caller falls back to
// encoding/json for the whole body and its result and error are the ones
// a client gets.
package jsonscan

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Scanner reads JSON from B[I:]. Each method reports false for anything
// it does not take, without promising where I is then.
type Scanner struct {
	B []byte
	I int
}

// Done reports whether everything was read.
func (s *Scanner) Done() bool { return s.I == len(s.B) }

// Space takes white space.
func (s *Scanner) Space() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Take takes c.
func (s *Scanner) Take(c byte) bool {
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++
		return true
	}
	return false
}

// Null takes the literal null.
func (s *Scanner) Null() bool {
	if len(s.B)-s.I >= 4 && string(s.B[s.I:s.I+4]) == "null" {
		s.I += 4
		return true
	}
	return false
}

// Next takes c and the white space after it.
func (s *Scanner) Next(c byte) bool {
	if !s.Take(c) {
		return false
	}
	s.Space()
	return true
}

// Key takes an object key of printable ASCII without escapes, and the
// colon after it; the bytes returned alias B.
func (s *Scanner) Key() ([]byte, bool) {
	if !s.Take('"') {
		return nil, false
	}
	start := s.I
	for ; s.I < len(s.B); s.I++ {
		switch c := s.B[s.I]; {
		case c == '"':
			key := s.B[start:s.I]
			s.I++
			s.Space()
			if !s.Next(':') {
				return nil, false
			}
			return key, true
		case c < 0x20 || c >= utf8.RuneSelf || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// EndOf takes what follows a member or element and the white space
// after it: a comma (more follow, true) or last, the closing bracket
// (false). ok is false for anything else.
func (s *Scanner) EndOf(last byte) (more, ok bool) {
	s.Space()
	switch {
	case s.Next(','):
		return true, true
	case s.Next(last):
		return false, true
	}
	return false, false
}

// Str takes a string. It refuses a string that encoding/json would alter
// (invalid UTF-8, a \u escape of a surrogate half) or refuse (a control
// character).
func (s *Scanner) Str() (string, bool) {
	if !s.Take('"') {
		return "", false
	}
	start := s.I
	for s.I < len(s.B) {
		s.I += plainRun(s.B[s.I:])
		if s.I == len(s.B) {
			break
		}
		switch c := s.B[s.I]; {
		case c == '"':
			out := string(s.B[start:s.I])
			s.I++
			return out, true
		case c == '\\':
			return s.escapedString(start)
		case c < 0x20:
			return "", false
		default:
			r, n := utf8.DecodeRune(s.B[s.I:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			s.I += n
		}
	}
	return "", false
}

// escapedString finishes a string that started at start and has an escape
// at i.
func (s *Scanner) escapedString(start int) (string, bool) {
	// The string decodes to at most as many bytes as it has up to its
	// closing quote (an escape is never shorter than what it stands for).
	end := s.I
	for end < len(s.B) && s.B[end] != '"' {
		if s.B[end] == '\\' {
			end++
		}
		end++
	}
	var buf strings.Builder // its String does not copy
	buf.Grow(min(end, len(s.B)) - start)
	buf.Write(s.B[start:s.I])
	for s.I < len(s.B) {
		n := plainRun(s.B[s.I:])
		buf.Write(s.B[s.I : s.I+n])
		if s.I += n; s.I == len(s.B) {
			break
		}
		switch c := s.B[s.I]; {
		case c == '"':
			s.I++
			return buf.String(), true
		case c == '\\':
			if !s.escape(&buf) {
				return "", false
			}
		case c < 0x20:
			return "", false
		default:
			r, n := utf8.DecodeRune(s.B[s.I:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			buf.Write(s.B[s.I : s.I+n])
			s.I += n
		}
	}
	return "", false
}

// escape takes one escape (at i) into buf: not a \u of a surrogate half,
// which encoding/json pairs or replaces.
func (s *Scanner) escape(buf *strings.Builder) bool {
	if s.I+1 >= len(s.B) {
		return false
	}
	s.I += 2
	switch e := s.B[s.I-1]; e {
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
func (s *Scanner) hex4() (rune, bool) {
	if s.I+4 > len(s.B) {
		return 0, false
	}
	var r rune
	for _, c := range s.B[s.I : s.I+4] {
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
	s.I += 4
	return r, true
}

// Integer takes a JSON integer (no fraction or exponent) within [lo, hi].
// A number it refuses may still be valid JSON, whose error (a fraction,
// an overflow) encoding/json then gives.
func (s *Scanner) Integer(lo, hi int64) (int64, bool) {
	neg := s.Take('-')
	start := s.I
	var u uint64
	for s.I < len(s.B) && '0' <= s.B[s.I] && s.B[s.I] <= '9' {
		u = u*10 + uint64(s.B[s.I]-'0')
		s.I++
	}
	switch n := s.I - start; {
	case n == 0 || n > 19: // 19 digits cannot overflow u
		return 0, false
	case n > 1 && s.B[start] == '0':
		return 0, false // a leading zero: not JSON
	}
	if s.I < len(s.B) {
		switch s.B[s.I] {
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
