package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// env is a real broker behind the REST API, served on a loopback socket.
type env struct {
	t   *testing.T
	b   *broker.Broker
	api *API
	srv *httptest.Server
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEnv(t *testing.T, cfg broker.Config, opts Options) *env {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.Logger = quietLog()
	if cfg.GroupTick == 0 {
		cfg.GroupTick = 20 * time.Millisecond
	}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := New(b, quietLog(), opts)
	mux := http.NewServeMux()
	api.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		b.EndSubscriptions() // SSE streams end, so that srv.Close does not wait for them
		srv.CloseClientConnections()
		srv.Close()
		b.Close()
	})
	return &env{t: t, b: b, api: api, srv: srv}
}

func newDefaultEnv(t *testing.T) *env { return newEnv(t, broker.Config{}, Options{}) }

// do sends a request; body is sent as is when it is a string or []byte,
// else as its JSON.
func (e *env) do(method, path string, body any) *http.Response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// call sends a request, checks the status and decodes the JSON answer
// into out (when not nil).
func (e *env) call(method, path string, body any, status int, out any) {
	e.t.Helper()
	resp := e.do(method, path, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

// wantError sends a request that must fail with status and code; it
// returns the error and the answer's headers.
func (e *env) wantError(method, path string, body any, status int, code string) (errorInfo, http.Header) {
	e.t.Helper()
	resp := e.do(method, path, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb errorBody
	if err := json.Unmarshal(data, &eb); err != nil {
		e.t.Fatalf("%s %s: error body %q: %v", method, path, data, err)
	}
	if resp.StatusCode != status || eb.Error.Code != code {
		e.t.Fatalf("%s %s: %d %s, want %d %s; body %s", method, path, resp.StatusCode, eb.Error.Code, status, code, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: error Content-Type %q", method, path, ct)
	}
	return eb.Error, resp.Header
}

func (e *env) createTopic(name string, partitions int32) {
	e.t.Helper()
	e.call("POST", "/v1/topics", map[string]any{"name": name, "partitions": partitions}, http.StatusCreated, nil)
}

// publish publishes a body and returns the answer.
func (e *env) publish(topic string, body any) publishResponse {
	e.t.Helper()
	var out publishResponse
	e.call("POST", "/v1/topics/"+topic+"/records", body, http.StatusOK, &out)
	return out
}

func (e *env) fetch(topic string, partition int32, query string) fetchResponse {
	e.t.Helper()
	var out fetchResponse
	e.call("GET", "/v1/topics/"+topic+"/partitions/"+itoa(partition)+"/records?"+query, nil, http.StatusOK, &out)
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// sseEvent is one Server-Sent Event as a client sees it.
type sseEvent struct {
	name, id, data string
	comment        bool
}

// sseClient reads a stream's events on a goroutine.
type sseClient struct {
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

// subscribe opens an SSE stream; header may set Last-Event-ID.
func (e *env) subscribe(path string, header http.Header) *sseClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		cancel()
		e.t.Fatalf("subscribe %s: status %d: %s", path, resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("subscribe: Content-Type %q", ct)
	}
	c := &sseClient{resp: resp, events: make(chan sseEvent, 100000), cancel: cancel}
	e.t.Cleanup(c.close)
	go c.read()
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

func (c *sseClient) read() {
	defer close(c.events)
	sc := bufio.NewScanner(c.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				c.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			c.events <- sseEvent{comment: true, data: line}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// next returns the next event that is not a comment, failing after d.
func (c *sseClient) next(t *testing.T, d time.Duration) sseEvent {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatal("the event stream ended")
			}
			if ev.comment {
				continue
			}
			return ev
		case <-timeout:
			t.Fatalf("no event within %s", d)
		}
	}
}

// nextOf returns the next event of that name, skipping others.
func (c *sseClient) nextOf(t *testing.T, name string, d time.Duration) sseEvent {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev := c.next(t, time.Until(deadline))
		if ev.name == name {
			return ev
		}
	}
}

// records reads n record events.
func (c *sseClient) records(t *testing.T, n int, d time.Duration) []recordOut {
	t.Helper()
	out := make([]recordOut, 0, n)
	deadline := time.Now().Add(d)
	for len(out) < n {
		ev := c.nextOf(t, "record", time.Until(deadline))
		var r recordOut
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			t.Fatalf("record event %q: %v", ev.data, err)
		}
		if r.Mode == "" && ev.id != (eventID{r.Partition, r.Offset}).String() {
			t.Fatalf("record %d-%d has event id %q", r.Partition, r.Offset, ev.id)
		}
		out = append(out, r)
	}
	return out
}

// quiet checks that no event (other than comments) comes within d.
func (c *sseClient) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if ok && ev.comment {
				continue
			}
			t.Fatalf("unexpected event %+v", ev)
		case <-timeout:
			return
		}
	}
}

func payloads(recs []recordOut) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		if r.Payload != nil {
			out[i] = *r.Payload
		} else {
			out[i] = "b64:" + *r.PayloadBase64
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// eventually retries f until it reports true, failing after d.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
