package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Every broker error kind has its status; the rest is 500 INTERNAL.
func TestErrorTable(t *testing.T) {
	cases := []struct {
		err       error
		status    int
		code      string
		retriable bool
	}{
		{broker.ErrInvalidArgument, 400, "INVALID_ARGUMENT", false},
		{broker.ErrInvalidTopicName, 400, "INVALID_TOPIC_NAME", false},
		{broker.ErrCorruptBatch, 400, "CORRUPT_BATCH", false},
		{broker.ErrOffsetOutOfRange, 400, "OFFSET_OUT_OF_RANGE", false},
		{broker.ErrMessageTooLarge, 413, "MESSAGE_TOO_LARGE", false},
		{broker.ErrTopicNotFound, 404, "TOPIC_NOT_FOUND", false},
		{broker.ErrPartitionNotFound, 404, "PARTITION_NOT_FOUND", false},
		{broker.ErrGroupNotFound, 404, "GROUP_NOT_FOUND", false},
		{broker.ErrTopicExists, 409, "TOPIC_EXISTS", false},
		{broker.ErrNotAssigned, 409, "NOT_ASSIGNED", false},
		{broker.ErrUnknownMember, 409, "UNKNOWN_MEMBER", false},
		{broker.ErrGroupNotEmpty, 409, "GROUP_NOT_EMPTY", false},
		{broker.ErrPermissionDenied, 403, "PERMISSION_DENIED", false},
		{broker.ErrUnauthenticated, 401, "UNAUTHENTICATED", false},
		{broker.ErrAlreadyExists, 409, "ALREADY_EXISTS", false},
		{broker.ErrNotFound, 404, "NOT_FOUND", false},
		{broker.ErrResourceExhausted, 429, "RESOURCE_EXHAUSTED", true},
		{broker.ErrUnavailable, 503, "UNAVAILABLE", true},
		{broker.ErrCorruptData, 500, "CORRUPT_DATA", false},
		{context.Canceled, 503, "UNAVAILABLE", true},
		{errors.New("surprise"), 500, "INTERNAL", false},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("context: %w", c.err)
		body, status := describe(wrapped)
		if status != c.status || body.Error.Code != c.code || body.Error.Retriable != c.retriable || body.Error.Message != wrapped.Error() {
			t.Errorf("%v: %d %+v, want %d %s retriable=%v", c.err, status, body.Error, c.status, c.code, c.retriable)
		}
	}
	codes := map[string]bool{}
	for _, c := range cases {
		codes[c.code] = true
	}
	if len(statusOf) != len(codes) {
		t.Errorf("the table has %d codes; the test covers %d", len(statusOf), len(codes))
	}
}

// The JSON of an error answer, exactly.
func TestErrorJSON(t *testing.T) {
	e := newDefaultEnv(t)
	resp := e.do("GET", "/v1/topics/nope", nil)
	defer resp.Body.Close()
	var raw map[string]map[string]any
	json.NewDecoder(resp.Body).Decode(&raw)
	want := map[string]any{"code": "TOPIC_NOT_FOUND", "message": `topic not found: topic "nope" does not exist`, "retriable": false}
	if fmt.Sprint(raw["error"]) != fmt.Sprint(want) || len(raw) != 1 {
		t.Fatalf("error body %v, want {error: %v}", raw, want)
	}
}

// encoding/json reports unknown fields by text only; asFieldError relies
// on that text, so a change of it must fail here.
func TestUnknownFieldTextOfEncodingJSON(t *testing.T) {
	var v struct{ A int }
	dec := json.NewDecoder(strings.NewReader(`{"B": 1}`))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	if fe := asFieldError(err, "x"); fe == nil || !fe.unknown || fe.path != "x.B" {
		t.Fatalf("encoding/json's error %q is not recognized: %+v", err, fe)
	}
}

func TestMethodNotAllowedAndUnknownRoutes(t *testing.T) {
	e := newDefaultEnv(t)
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"PUT", "/v1/topics", 405, "GET, HEAD, POST"},
		{"POST", "/v1/topics/t", 405, "DELETE, GET, HEAD, PATCH"},
		{"GET", "/v1/topics/t/records", 405, "POST"},
		{"DELETE", "/v1/groups", 405, "GET, HEAD"},
		{"POST", "/openapi.json", 405, "GET, HEAD"},
		{"GET", "/v1/nothing", 404, ""},
		{"GET", "/v1/topics/t/partitions/0", 404, ""},
		{"GET", "/v1/", 404, ""},
	}
	for _, c := range cases {
		info, hdr := e.wantError(c.method, c.path, nil, c.status, "INVALID_ARGUMENT")
		if hdr.Get("Allow") != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, hdr.Get("Allow"), c.allow)
		}
		if !strings.Contains(info.Message, c.path) {
			t.Errorf("%s %s: message %q", c.method, c.path, info.Message)
		}
	}
	resp := e.do("HEAD", "/v1/topics", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD /v1/topics: %d", resp.StatusCode)
	}
}
