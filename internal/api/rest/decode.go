package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Request body limits. A larger body is refused with 413
// MESSAGE_TOO_LARGE before it is decoded.
const (
	// MaxRecordsBody bounds a publish body: the broker takes at most 16 MiB
	// of records per partition and request, and base64 makes them 4/3 larger.
	MaxRecordsBody = 32 << 20
	// MaxBody bounds every other body.
	MaxBody = 1 << 20
)

// publishBytesRetry is the retry hint of a publish refused because the
// publish bodies being handled hold the node's byte budget.
const publishBytesRetry = 100 * time.Millisecond

// fieldError is a body error naming the field at fault, as a path from
// the body's root: `records[2].headers[0].value_base64`.
type fieldError struct {
	path    string
	msg     string
	unknown bool // the field itself is not part of the API
}

func (e *fieldError) Error() string {
	if e.unknown {
		return fmt.Sprintf("unknown field %q", e.path)
	}
	return fmt.Sprintf("field %q %s", e.path, e.msg)
}

// fieldErrorf makes a fieldError; msg reads after the field's name.
func fieldErrorf(path, format string, args ...any) *fieldError {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

func joinPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

// decodeJSON decodes a body that is one JSON object into a T, refusing
// unknown fields, null and anything after the object, and turns every
// failure into an INVALID_ARGUMENT that names the field
// (MESSAGE_TOO_LARGE when r is an http.MaxBytesReader whose limit was hit).
func decodeJSON[T any](r io.Reader) (*T, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var v *T // stays nil for a body of null, which Decode takes as a no-op
	if err := dec.Decode(&v); err != nil {
		return nil, bodyError(err, "")
	}
	if v == nil {
		return nil, invalid("the request body must be a JSON object, not null")
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyError(err, "")
		}
		return nil, invalid("the body must hold one JSON value; more data follows it")
	}
	return v, nil
}

// decodeElement decodes one element of a JSON array (whose bytes are in
// memory and already known to be valid JSON) with the same rules,
// reporting errors under prefix.
func decodeElement(dec *json.Decoder, v any, prefix string) error {
	if err := dec.Decode(v); err != nil {
		if fe := asFieldError(err, prefix); fe != nil {
			return fe
		}
		return fieldErrorf(prefix, "is malformed: %v", err)
	}
	return nil
}

// bodyError turns a decoding error into the adapter's error.
func bodyError(err error, prefix string) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return errorf(broker.ErrMessageTooLarge, "the request body exceeds %d bytes", mbe.Limit)
	case errors.As(err, &se):
		return invalid("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF):
		return invalid("the request body is empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("the request body ends in the middle of a JSON value")
	}
	if fe := asFieldError(err, prefix); fe != nil {
		return invalid("%v", fe)
	}
	return invalid("malformed JSON: %v", err)
}

// asFieldError recognizes the errors of encoding/json that concern one
// field (and this package's own fieldError), or returns nil.
func asFieldError(err error, prefix string) *fieldError {
	var fe *fieldError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &fe):
		return &fieldError{path: joinPath(prefix, fe.path), msg: fe.msg, unknown: fe.unknown}
	case errors.As(err, &te):
		path := joinPath(prefix, te.Field)
		if path == "" {
			return &fieldError{path: "(body)", msg: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value)}
		}
		return fieldErrorf(path, "must be %s, not %s", jsonKind(te.Type), te.Value)
	}
	// encoding/json has no type for this one; its text is stable (and
	// tested here), so it is recognized by its prefix.
	const unknown = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		name, e := strconv.Unquote(strings.TrimPrefix(msg, unknown))
		if e != nil {
			name = strings.TrimPrefix(msg, unknown)
		}
		return &fieldError{path: joinPath(prefix, name), unknown: true}
	}
	return nil
}

// jsonKind names what JSON a Go type takes.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return "an integer (32-bit)"
	case reflect.Int, reflect.Int64:
		return "an integer (64-bit)"
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a JSON value"
}

// isNull reports whether a raw JSON value (as UnmarshalJSON gets it) is null.
func isNull(data []byte) bool { return string(bytes.TrimSpace(data)) == "null" }

// query checks a request's query string: only the parameters named are
// allowed, each at most once, so that a misspelt one is an error rather
// than silently ignored.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	if r.URL.RawQuery == "" {
		return nil, nil // the usual case; a nil url.Values reads as empty
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalid("malformed query string: %v", err)
	}
	for name, vals := range q {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return nil, invalid("unknown query parameter %q; this route takes none", name)
			}
			return nil, invalid("unknown query parameter %q; allowed: %s", name, strings.Join(allowed, ", "))
		}
		if len(vals) > 1 {
			return nil, invalid("query parameter %q is given %d times", name, len(vals))
		}
	}
	return q, nil
}

// intParam parses an integer query parameter within [lo, hi]; def when
// it is absent or empty.
func intParam(q url.Values, name string, def, lo, hi int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid("query parameter %q must be an integer from %d to %d, got %q", name, lo, hi, s)
	}
	return n, nil
}

// pageParams are the query parameters of a list answered by pages: at
// most limit items (1 to maxPage; absent: all), those whose names sort
// after after.
var pageParams = []string{"limit", "after"}

// maxPage bounds a page.
const maxPage = 10_000

// page returns the items (sorted by name) after q's "after", at most q's
// "limit", and the name to ask for the next page after ("" when this is
// the last).
func page[T any](q url.Values, items []T, name func(T) string) ([]T, string, error) {
	limit, err := intParam(q, "limit", 0, 1, maxPage)
	if err != nil {
		return nil, "", err
	}
	if after := q.Get("after"); after != "" {
		items = items[sort.Search(len(items), func(i int) bool { return name(items[i]) > after }):]
	}
	if limit > 0 && len(items) > int(limit) {
		return items[:limit], name(items[limit-1]), nil
	}
	return items, "", nil
}

// boolParam parses true/false (also 1/0); false when absent.
func boolParam(q url.Values, name string) (bool, error) {
	s := q.Get(name)
	if s == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, invalid("query parameter %q must be true or false, got %q", name, s)
	}
	return v, nil
}

// partitionValue parses the {p} of a path.
func partitionValue(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, invalid("partition must be a non-negative integer, got %q", s)
	}
	return int32(n), nil
}
