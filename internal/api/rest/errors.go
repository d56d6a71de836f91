package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// statusOf maps each API error code (broker.Code) to its HTTP status: the
// one table of this protocol. Retriability comes from the broker.
//
// OFFSET_OUT_OF_RANGE is 400, not 416: 416 is defined for the Range
// header (RFC 9110 §15.5.17), which this API does not use; the code in the
// body tells it apart from other 400s.
var statusOf = map[string]int{
	"INVALID_ARGUMENT":    http.StatusBadRequest,
	"INVALID_TOPIC_NAME":  http.StatusBadRequest,
	"CORRUPT_BATCH":       http.StatusBadRequest,
	"CORRUPT_DATA":        http.StatusInternalServerError,
	"OFFSET_OUT_OF_RANGE": http.StatusBadRequest,
	"MESSAGE_TOO_LARGE":   http.StatusRequestEntityTooLarge,
	"TOPIC_NOT_FOUND":     http.StatusNotFound,
	"PARTITION_NOT_FOUND": http.StatusNotFound,
	"GROUP_NOT_FOUND":     http.StatusNotFound,
	"TOPIC_EXISTS":        http.StatusConflict,
	"NOT_ASSIGNED":        http.StatusConflict,
	"UNKNOWN_MEMBER":      http.StatusConflict,
	"GROUP_NOT_EMPTY":     http.StatusConflict,
	"PERMISSION_DENIED":   http.StatusForbidden,
	"UNAUTHENTICATED":     http.StatusUnauthorized,
	"ALREADY_EXISTS":      http.StatusConflict,
	"NOT_FOUND":           http.StatusNotFound,
	"RESOURCE_EXHAUSTED":  http.StatusTooManyRequests,
	"UNAVAILABLE":         http.StatusServiceUnavailable,
	"INTERNAL":            http.StatusInternalServerError,
}

// errorBody is the JSON of every error answer (and of an SSE `error` event).
type errorBody struct {
	Error errorInfo `json:"error"`
}

type errorInfo struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retriable    bool   `json:"retriable"`
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`
}

// describe returns the API error of err and its HTTP status. A request
// cut short (its context ended) counts as UNAVAILABLE, as in the gRPC API.
func describe(err error) (errorBody, int) {
	code := broker.Code(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code = "UNAVAILABLE"
	}
	info := errorInfo{
		Code: code, Message: err.Error(),
		Retriable:    broker.Retriable(err) || code == "UNAVAILABLE",
		RetryAfterMs: retryAfter(err).Milliseconds(),
	}
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	return errorBody{Error: info}, status
}

// writeError answers err with its status and JSON body. A 429, and any
// error with a retry hint, carries Retry-After (whole seconds, at least 1).
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client is gone: nobody reads the answer
	}
	body, status := describe(err)
	a.writeErrorStatus(w, r, status, body, retryAfter(err))
}

func (a *API) writeErrorStatus(w http.ResponseWriter, r *http.Request, status int, body errorBody, retryAfter time.Duration) {
	if status == http.StatusTooManyRequests || retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", fmt.Sprint(max(secs, 1)))
	}
	if status >= 500 {
		a.log.Warn("REST request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", body.Error.Message)
	} else {
		a.log.Debug("REST request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", body.Error.Message)
	}
	writeJSON(w, status, body)
}

// kindError is an error of a broker kind made by this adapter.
type kindError struct {
	kind       error
	msg        string
	retryAfter time.Duration
}

func (e *kindError) Error() string { return e.kind.Error() + ": " + e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// retryAfter is the retry hint of an error of this adapter or the broker.
func retryAfter(err error) time.Duration {
	var ke *kindError
	if errors.As(err, &ke) && ke.retryAfter > 0 {
		return ke.retryAfter
	}
	return broker.RetryAfter(err)
}

func invalid(format string, args ...any) error {
	return errorf(broker.ErrInvalidArgument, format, args...)
}

// Errors of the HTTP layer itself, which have no broker kind: the code
// stays INVALID_ARGUMENT (the API's codes are the same in every protocol)
// and the status says what is wrong.
func (a *API) methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		body, _ := describe(invalid("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		a.writeErrorStatus(w, r, http.StatusMethodNotAllowed, body, 0)
	}
}

func (a *API) noRoute(w http.ResponseWriter, r *http.Request) {
	body, _ := describe(invalid("no route %s %s; the routes are listed in /openapi.json", r.Method, r.URL.Path))
	a.writeErrorStatus(w, r, http.StatusNotFound, body, 0)
}
