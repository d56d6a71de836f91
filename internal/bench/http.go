package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// httpError is a failure the REST or GraphQL API reported, with its
// error code (the same codes as gRPC's), or the HTTP status when the
// answer had none.
type httpError struct {
	Code    string
	Message string
}

func (e *httpError) Error() string { return e.Code + ": " + e.Message }

// httpPublishers make REST and GraphQL publishers over one HTTP client;
// worker w uses HTTP address w mod n. Whether an address serves the API
// is probed once, so that a build without it fails with a clear message.
type httpPublishers struct {
	cfg *Config
	hc  *http.Client

	mu     sync.Mutex
	probed map[string]error // Lock: mu. "proto addr" -> outcome
}

func newHTTPPublishers(cfg *Config) *httpPublishers {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(cfg.Workers, 2)
	tr.TLSClientConfig = cfg.TLS
	return &httpPublishers{cfg: cfg, hc: &http.Client{Transport: tr, Timeout: closeTimeout}, probed: map[string]error{}}
}

func (hp *httpPublishers) close() { hp.hc.CloseIdleConnections() }

func (hp *httpPublishers) publisher(ctx context.Context, topic string, worker int, proto string) (Publisher, error) {
	if len(hp.cfg.HTTPTargets) == 0 {
		return nil, fmt.Errorf("protocol %s needs -http-targets", proto)
	}
	addr := hp.cfg.HTTPTargets[worker%len(hp.cfg.HTTPTargets)]
	if err := hp.probe(ctx, proto, addr); err != nil {
		return nil, err
	}
	p := &httpPublisher{hc: hp.hc, proto: proto, mode: hp.cfg.Mode, topic: topic}
	if proto == ProtoREST {
		p.url = hp.cfg.httpScheme() + addr + "/v1/topics/" + topic + "/records"
	} else {
		p.url = hp.cfg.httpScheme() + addr + "/graphql"
	}
	p.authz = hp.cfg.authorization()
	return p, nil
}

// probe checks once that addr serves proto's API: REST answers a
// GET /v1/topics with JSON, GraphQL answers {__typename}.
func (hp *httpPublishers) probe(ctx context.Context, proto, addr string) error {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	key := proto + " " + addr
	if err, ok := hp.probed[key]; ok {
		return err
	}
	var req *http.Request
	var err error
	if proto == ProtoREST {
		req, err = http.NewRequestWithContext(ctx, "GET", hp.cfg.httpScheme()+addr+"/v1/topics", nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, "POST", hp.cfg.httpScheme()+addr+"/graphql", strings.NewReader(`{"query":"{__typename}"}`))
		if req != nil {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if req != nil {
		if h := hp.cfg.authorization(); h != "" {
			req.Header.Set("Authorization", h)
		}
	}
	if err == nil {
		var resp *http.Response
		if resp, err = hp.hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				err = fmt.Errorf("protocol %s: %s answers HTTP %d: the %s API is %w", proto, addr, resp.StatusCode, proto, ErrNotAvailable)
			}
		} else {
			err = fmt.Errorf("protocol %s: %s: %w", proto, addr, err)
		}
	}
	hp.probed[key] = err
	return err
}

// httpPublisher publishes one record per request, synchronously.
type httpPublisher struct {
	hc    *http.Client
	authz string // authorization header ("": none)
	proto string
	url   string
	mode  string
	topic string
	buf   bytes.Buffer
}

type restRecord struct {
	PayloadBase64 string `json:"payload_base64"`
	MessageID     string `json:"message_id"`
}

type restBody struct {
	Records []restRecord `json:"records"`
	Mode    string       `json:"mode"`
}

const gqlPublish = `mutation($t: String!, $r: [RecordInput!]!, $m: DeliveryMode) { publishBatch(topic: $t, records: $r, mode: $m) { partition offset } }`

type gqlRecord struct {
	PayloadBase64 string `json:"payloadBase64"`
	MessageID     string `json:"messageId"`
}

type gqlBody struct {
	Query     string `json:"query"`
	Variables struct {
		Topic   string      `json:"t"`
		Records []gqlRecord `json:"r"`
		Mode    string      `json:"m"`
	} `json:"variables"`
}

func (p *httpPublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	done(p.publish(ctx, id, payload), time.Time{})
}

func (p *httpPublisher) publish(ctx context.Context, id [16]byte, payload []byte) error {
	p.buf.Reset()
	b64 := base64.StdEncoding.EncodeToString(payload)
	ids := uuid.UUID(id).String()
	var body any
	if p.proto == ProtoREST {
		body = restBody{Records: []restRecord{{b64, ids}}, Mode: p.mode}
	} else {
		g := gqlBody{Query: gqlPublish}
		g.Variables.Topic, g.Variables.Records, g.Variables.Mode = p.topic, []gqlRecord{{b64, ids}}, strings.ToUpper(p.mode)
		body = g
	}
	if err := json.NewEncoder(&p.buf).Encode(body); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", p.url, bytes.NewReader(p.buf.Bytes()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.authz != "" {
		req.Header.Set("Authorization", p.authz)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if p.proto == ProtoREST {
		return restOutcome(resp.StatusCode, ans)
	}
	return gqlOutcome(resp.StatusCode, ans)
}

// restOutcome reads a REST answer: 200 with one ack, or the JSON error.
func restOutcome(status int, ans []byte) error {
	if status == http.StatusOK {
		var ok struct {
			Records []json.RawMessage `json:"records"`
		}
		if err := json.Unmarshal(ans, &ok); err != nil || len(ok.Records) != 1 {
			return &httpError{"BAD_ANSWER", fmt.Sprintf("REST publish answered 200 with %.200q", ans)}
		}
		return nil
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(ans, &e) == nil && e.Error.Code != "" {
		return &httpError{e.Error.Code, e.Error.Message}
	}
	return &httpError{fmt.Sprintf("HTTP_%d", status), fmt.Sprintf("%.200q", ans)}
}

// gqlOutcome reads a GraphQL answer: data.publishBatch with one ack, or
// errors with extensions.code.
func gqlOutcome(status int, ans []byte) error {
	var r struct {
		Data struct {
			PublishBatch []json.RawMessage `json:"publishBatch"`
		} `json:"data"`
		Errors []struct {
			Message    string `json:"message"`
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(ans, &r); err != nil {
		return &httpError{fmt.Sprintf("HTTP_%d", status), fmt.Sprintf("%.200q", ans)}
	}
	if len(r.Errors) > 0 {
		code := r.Errors[0].Extensions.Code
		if code == "" {
			code = "GRAPHQL_ERROR"
		}
		return &httpError{code, r.Errors[0].Message}
	}
	if len(r.Data.PublishBatch) != 1 {
		return &httpError{"BAD_ANSWER", fmt.Sprintf("GraphQL publishBatch answered %.200q", ans)}
	}
	return nil
}

func (p *httpPublisher) Close(context.Context) error { return nil }
