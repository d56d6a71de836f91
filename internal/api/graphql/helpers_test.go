package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-mq/hermes/internal/broker"
)

// env is a broker on a temporary directory served by the GraphQL adapter
// on a real loopback socket.
type env struct {
	t   testing.TB
	b   *broker.Broker
	srv *httptest.Server
}

func newEnv(t testing.TB, cfg broker.Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, handlerOptions{})
}

// newEnvWith is newEnv with the handler's fast paths chosen by o.
func newEnvWith(t testing.TB, cfg broker.Config, o handlerOptions) *env {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if o == (handlerOptions{}) {
		Register(mux, b, cfg.Logger) // the handler served, and the UI
	} else {
		mux.Handle("/graphql", newHandler(b, cfg.Logger, o))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		b.EndSubscriptions()
		srv.Close()
		b.Close()
	})
	return &env{t: t, b: b, srv: srv}
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
	status int
}

// post sends one operation and decodes the answer, whatever its status.
func (e *env) post(query string, vars map[string]any) gqlResponse {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return e.postRaw("application/json", body)
}

func (e *env) postRaw(contentType string, body []byte) gqlResponse {
	e.t.Helper()
	resp, err := http.Post(e.srv.URL+"/graphql", contentType, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	return decodeResponse(e.t, resp)
}

func decodeResponse(t testing.TB, resp *http.Response) gqlResponse {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out gqlResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("status %d, undecodable answer %.300q: %v", resp.StatusCode, raw, err)
	}
	out.status = resp.StatusCode
	return out
}

// do runs an operation that must succeed and decodes its data into out.
func (e *env) do(query string, vars map[string]any, out any) {
	e.t.Helper()
	r := e.post(query, vars)
	if len(r.Errors) > 0 || r.status != http.StatusOK {
		e.t.Fatalf("%s: status %d, errors %+v", firstLine(query), r.status, r.Errors)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			e.t.Fatalf("decode %s: %v", r.Data, err)
		}
	}
}

// fail runs an operation that must fail with one error and returns it.
func (e *env) fail(query string, vars map[string]any) gqlError {
	e.t.Helper()
	r := e.post(query, vars)
	if len(r.Errors) != 1 {
		e.t.Fatalf("%s: want one error, got status %d, data %s, errors %+v", firstLine(query), r.status, r.Data, r.Errors)
	}
	return r.Errors[0]
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}

func (e *env) createTopic(name string, partitions int) {
	e.t.Helper()
	e.do(`mutation($n: String!, $p: Int) { createTopic(name: $n, config: {partitions: $p}) { name } }`,
		map[string]any{"n": name, "p": partitions}, nil)
}

// wsClient speaks graphql-transport-ws over a real websocket.
type wsClient struct {
	t    testing.TB
	c    *websocket.Conn
	ctx  context.Context
	sent int
}

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (e *env) dial() *wsClient {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/graphql"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	e.t.Cleanup(func() { c.CloseNow() })
	w := &wsClient{t: e.t, c: c, ctx: ctx}
	w.send(wsMessage{Type: "connection_init"})
	if m := w.read(); m.Type != "connection_ack" {
		e.t.Fatalf("want connection_ack, got %+v", m)
	}
	return w
}

func (w *wsClient) send(m wsMessage) {
	w.t.Helper()
	b, _ := json.Marshal(m)
	if err := w.c.Write(w.ctx, websocket.MessageText, b); err != nil {
		w.t.Fatal(err)
	}
}

// read returns the next message, answering pings on the way.
func (w *wsClient) read() wsMessage {
	w.t.Helper()
	for {
		_, b, err := w.c.Read(w.ctx)
		if err != nil {
			w.t.Fatalf("websocket read: %v", err)
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			w.t.Fatalf("websocket message %q: %v", b, err)
		}
		if m.Type == "ping" {
			w.send(wsMessage{Type: "pong"})
			continue
		}
		return m
	}
}

// subscribe starts an operation and returns its id.
func (w *wsClient) subscribe(query string, vars map[string]any) string {
	w.t.Helper()
	w.sent++
	id := fmt.Sprintf("op%d", w.sent)
	payload, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	w.send(wsMessage{ID: id, Type: "subscribe", Payload: payload})
	return id
}

// event is one SubscriptionEvent as the tests select it.
type event struct {
	Subscribed *struct {
		MemberID         *string `json:"memberId"`
		SessionTimeoutMs int64   `json:"sessionTimeoutMs"`
	} `json:"subscribed"`
	Assignment *struct {
		Topic      string  `json:"topic"`
		Partitions []int32 `json:"partitions"`
		Generation int64   `json:"generation"`
	} `json:"assignment"`
	Record *testRecord `json:"record"`
	Missed *int64      `json:"missed"`
}

// next reads the next "next" message of operation id and returns its event;
// any other message fails the test.
func (w *wsClient) next(id string) event {
	w.t.Helper()
	m := w.read()
	if m.Type != "next" || m.ID != id {
		w.t.Fatalf("want next for %s, got %s %s %s", id, m.Type, m.ID, m.Payload)
	}
	var p struct {
		Data   struct{ Records event } `json:"data"`
		Errors []gqlError              `json:"errors"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		w.t.Fatal(err)
	}
	if len(p.Errors) > 0 {
		w.t.Fatalf("next with errors: %+v", p.Errors)
	}
	return p.Data.Records
}

// operationError reads messages of operation id until it ends with errors
// (an "error" message, or a "next" carrying errors) and returns the first.
func (w *wsClient) operationError(id string) gqlError {
	w.t.Helper()
	for {
		m := w.read()
		if m.ID != id {
			continue
		}
		var errs []gqlError
		switch m.Type {
		case "error":
			if err := json.Unmarshal(m.Payload, &errs); err != nil {
				w.t.Fatal(err)
			}
		case "next": // an error before the stream started: complete follows
			var p struct {
				Errors []gqlError `json:"errors"`
			}
			json.Unmarshal(m.Payload, &p)
			errs = p.Errors
			if end := w.read(); end.ID != id || end.Type != "complete" {
				w.t.Fatalf("operation %s: want complete after its errors, got %+v", id, end)
			}
		default:
			w.t.Fatalf("operation %s ended with %s and no error", id, m.Type)
		}
		if len(errs) > 0 {
			return errs[0]
		}
	}
}

// testRecord is a Record with every field selected (recordFields).
type testRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	MessageID string  `json:"messageId"`
	Key       *string `json:"key"`
	KeyBase64 *string `json:"keyBase64"`
	Headers   []struct {
		Key         string  `json:"key"`
		Value       *string `json:"value"`
		ValueBase64 string  `json:"valueBase64"`
	} `json:"headers"`
	Payload       *string `json:"payload"`
	PayloadBase64 string  `json:"payloadBase64"`
	Timestamp     string  `json:"timestamp"`
	Mode          string  `json:"mode"`
	DeliveryCount int     `json:"deliveryCount"`
}

const recordFields = `partition offset messageId key keyBase64 headers { key value valueBase64 }
	payload payloadBase64 timestamp mode deliveryCount`

// code returns an error's extensions.code.
func code(e gqlError) string {
	s, _ := e.Extensions["code"].(string)
	return s
}
