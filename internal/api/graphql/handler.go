package graphql

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Endpoint bounds.
const (
	// MaxBodyBytes bounds a request body (as the gRPC API bounds a message).
	MaxBodyBytes = 32 << 20
	// wsReadLimit bounds one websocket message from the client.
	wsReadLimit = 1 << 20
	// wsPingInterval: the server pings every interval and drops a client
	// that has not answered within two (which ends its subscriptions).
	wsPingInterval = 15 * time.Second
	// wsInitTimeout: a websocket must send connection_init within it.
	wsInitTimeout = 10 * time.Second
	// queryCacheSize is how many parsed and validated queries are kept.
	queryCacheSize = 1000
)

// Register mounts the GraphQL API on mux: /graphql (POST and GET; websocket
// subscriptions, graphql-transport-ws) and a GraphiQL page at /graphql/ui
// (GraphiQL's files are embedded: graphiql.go). It is a
// server.HTTPAdapter.
func Register(mux *http.ServeMux, b broker.API, log *slog.Logger) {
	mux.Handle("/graphql", NewHandler(b, log))
	mux.HandleFunc("GET /graphql/ui", serveGraphiQL)
	mux.HandleFunc("GET /graphql/ui/", serveGraphiQL)
}

// NewHandler returns the /graphql handler over b.
func NewHandler(b broker.API, log *slog.Logger) http.Handler {
	return newHandler(b, log, handlerOptions{})
}

// handlerOptions replace the handler's fast paths by gqlgen's own, for the
// tests that hold the one to the other. The zero value is the handler
// served.
type handlerOptions struct {
	gqlgenPOST    bool // gqlgen's transport.POST for postTransport
	generatedExec bool // the generated Exec for every operation: no lean path
}

func newHandler(b broker.API, log *slog.Logger, o handlerOptions) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	r := &Resolver{b: b, log: log, members: newMembers()}
	cfg := Config{Resolvers: r, Complexity: complexity()}
	var es graphql.ExecutableSchema = newLeanSchema(cfg)
	if o.generatedExec {
		es = NewExecutableSchema(cfg)
	}
	var post graphql.Transport = postTransport{}
	if o.gqlgenPOST {
		post = transport.POST{}
	}
	srv := handler.New(es)
	srv.AddTransport(transport.Websocket{
		InitFunc: func(ctx context.Context, _ transport.InitPayload) (context.Context, *transport.InitPayload, error) {
			return context.WithValue(ctx, wsConnKey{}, &wsConn{}), nil, nil
		},
		ErrorFunc: func(ctx context.Context, err error) {
			log.Debug("GraphQL websocket error", "err", err)
		},
		InitTimeout:      wsInitTimeout,
		PingPongInterval: wsPingInterval,
		PayloadReadLimit: ptr(int64(wsReadLimit)),
	})
	srv.AddTransport(getTransport{})
	srv.AddTransport(post)
	srv.SetQueryCache(lru.New[*ast.QueryDocument](queryCacheSize))
	srv.SetParserTokenLimit(maxQueryTokens)
	srv.Use(introspectionGuard{b})
	srv.Use(oneStream{})
	srv.Use(newLimits())
	srv.AroundOperations(withStreamEnd)
	srv.AroundResponses(endStream(log))
	srv.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		return presentError(ctx, err, log)
	})
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.Error("GraphQL resolver panicked", "panic", v, "stack", string(debug.Stack()))
		return errors.New("internal error")
	})
	return guard(srv, log)
}

func ptr[T any](v T) *T { return &v }

// introspectionGuard allows introspection to everyone when the node does
// not require authentication, else to principals that may describe the
// cluster (the schema tells an attacker what to try).
type introspectionGuard struct{ b broker.API }

func (introspectionGuard) ExtensionName() string                   { return "Introspection" }
func (introspectionGuard) Validate(graphql.ExecutableSchema) error { return nil }

func (g introspectionGuard) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	oc.DisableIntrospection = g.b.AuthRequired() && introspects(oc.Doc) &&
		g.b.Authorize(ctx, broker.ActionDescribe, broker.Resource{Kind: broker.ResourceCluster}) != nil
	return nil
}

// introspects reports whether a document asks for __schema or __type
// (__typename is not introspection).
func introspects(doc *ast.QueryDocument) bool {
	if doc == nil {
		return false
	}
	var walk func(ast.SelectionSet) bool
	walk = func(set ast.SelectionSet) bool {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if s.Name == "__schema" || s.Name == "__type" || walk(s.SelectionSet) {
					return true
				}
			case *ast.InlineFragment:
				if walk(s.SelectionSet) {
					return true
				}
			}
		}
		return false
	}
	for _, op := range doc.Operations {
		if walk(op.SelectionSet) {
			return true
		}
	}
	for _, f := range doc.Fragments {
		if walk(f.SelectionSet) {
			return true
		}
	}
	return false
}
