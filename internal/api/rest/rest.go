// Package rest is the REST/JSON adapter of Hermes: resource-style routes
// under /v1/ on the node's HTTP server, Server-Sent Events for
// subscriptions, and the OpenAPI 3.1 document of it all at /openapi.json.
//
// Like every adapter it is thin: it decodes and validates requests, calls
// the broker and maps the broker's error kinds to HTTP statuses
// (errors.go holds the one table). Routes are listed once, in routes; the
// OpenAPI document is checked against that list by a test.
package rest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Options tune the adapter. Zero fields take the defaults named.
type Options struct {
	// KeepaliveInterval is how often an SSE stream sends a `: keepalive`
	// comment (default 15s), so that proxies and clients see it alive.
	KeepaliveInterval time.Duration
	// HeartbeatInterval is how often an open group stream heartbeats its
	// member (default: a third of the session timeout, at most 3s).
	HeartbeatInterval time.Duration
	// WriteTimeout is how long one SSE write may wait for a client that
	// does not read (default 60s); then the stream ends.
	WriteTimeout time.Duration
	// MaxPublishBytes bounds the publish bodies being decoded and
	// published at once (default 256 MiB; a body of unknown length counts
	// as MaxRecordsBody). Beyond it a publish gets a retriable 429.
	MaxPublishBytes int64
}

// API serves the REST routes over one broker.
type API struct {
	b            broker.API
	log          *slog.Logger
	opts         Options
	members      *registry
	publishBytes *byteBudget
}

// New returns the adapter.
func New(b broker.API, log *slog.Logger, opts Options) *API {
	if log == nil {
		log = slog.Default()
	}
	if opts.KeepaliveInterval == 0 {
		opts.KeepaliveInterval = 15 * time.Second
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 60 * time.Second
	}
	if opts.MaxPublishBytes == 0 {
		opts.MaxPublishBytes = 256 << 20
	}
	return &API{
		b: b, log: log, opts: opts, members: newRegistry(),
		publishBytes: &byteBudget{limit: opts.MaxPublishBytes},
	}
}

// Register mounts the REST API with default options on mux: the
// server.HTTPAdapter of this package.
func Register(mux *http.ServeMux, b broker.API, log *slog.Logger) {
	New(b, log, Options{}).Mount(mux)
}

// route is one operation: a method and a path pattern of http.ServeMux,
// which is also its OpenAPI path template, and the query parameters it
// takes (any other is refused).
type route struct {
	method string
	path   string
	query  []string
	handle handlerFunc
}

// handlerFunc serves a request whose query string was checked; an error
// it returns is answered with its status and JSON body.
type handlerFunc func(a *API, w http.ResponseWriter, r *http.Request, q url.Values) error

// routes lists every operation of the API, for Mount and for the test
// that holds the OpenAPI document to them.
var routes = []route{
	{"POST", "/v1/topics", nil, (*API).createTopic},
	{"GET", "/v1/topics", pageParams, (*API).listTopics},
	{"GET", "/v1/topics/{topic}", nil, (*API).getTopic},
	{"PATCH", "/v1/topics/{topic}", nil, (*API).alterTopic},
	{"DELETE", "/v1/topics/{topic}", nil, (*API).deleteTopic},
	{"POST", "/v1/topics/{topic}/records", nil, (*API).publish},
	{"GET", "/v1/topics/{topic}/partitions/{p}/records", fetchParams, (*API).fetch},
	{"GET", "/v1/topics/{topic}/subscribe", subscribeParams, (*API).subscribe},
	{"POST", "/v1/groups/{group}/commits", nil, (*API).commit},
	{"POST", "/v1/groups/{group}/acks", nil, (*API).ack},
	{"GET", "/v1/groups", pageParams, (*API).listGroups},
	{"GET", "/v1/groups/{group}", nil, (*API).describeGroup},
	{"GET", "/v1/cluster", nil, (*API).cluster},
	{"GET", "/v1/whoami", nil, (*API).whoami},
	{"POST", "/v1/users", nil, (*API).createUser},
	{"GET", "/v1/users", nil, (*API).listUsers},
	{"DELETE", "/v1/users/{user}", nil, (*API).deleteUser},
	{"PUT", "/v1/users/{user}/password", nil, (*API).setPassword},
	{"POST", "/v1/tokens", nil, (*API).createToken},
	{"GET", "/v1/tokens", nil, (*API).listTokens},
	{"DELETE", "/v1/tokens/{id}", nil, (*API).revokeToken},
	{"POST", "/v1/acls", nil, (*API).createACLs},
	{"GET", "/v1/acls", aclParams, (*API).listACLs},
	{"POST", "/v1/acls/delete", nil, (*API).deleteACLs},
	{"GET", "/v1/quotas", nil, (*API).listQuotas},
	{"PUT", "/v1/quotas/{principal}", nil, (*API).setQuota},
	{"GET", "/openapi.json", nil, (*API).openAPI},
}

// Mount registers the routes on mux, plus, with the same JSON error shape,
// 405 for the other methods of each path and 404 for unknown paths under /v1/.
func (a *API) Mount(mux *http.ServeMux) {
	allowed := make(map[string][]string)
	var paths []string
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+rt.path, a.handler(rt))
		if allowed[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
		if rt.method == http.MethodGet {
			allowed[rt.path] = append(allowed[rt.path], http.MethodHead)
		}
	}
	for _, p := range paths {
		methods := allowed[p]
		slices.Sort(methods)
		mux.HandleFunc(p, a.methodNotAllowed(strings.Join(methods, ", ")))
	}
	mux.HandleFunc("/v1/", a.noRoute)
}

// handler serves a route: it checks the query string, calls the route's
// function, and answers the error that returns, if any.
func (a *API) handler(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := query(r, rt.query...)
		if err == nil {
			err = rt.handle(a, w, r, q)
		}
		if err != nil {
			a.writeError(w, r, err)
		}
	}
}

// writeJSON answers v as JSON (HTML characters are not escaped: the
// answer is not meant to be embedded in a page).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("rest: cannot encode an answer: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
