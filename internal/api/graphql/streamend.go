package graphql

import (
	"context"
	"log/slog"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
)

// A subscription the broker ends (its topic deleted, the member expired,
// the broker shutting down) ends with a graphql-transport-ws "error"
// message carrying the error's code. gqlgen reports such an error if it was
// added (transport.AddSubscriptionError) by its own goroutine, which sends
// the operation's responses; from the stream goroutine that would race
// with the transport reading it when the client completes meanwhile. So
// the stream hands the error over: it records the error and the index of
// the response that replaces it, then sends one last (empty) event; the
// response interceptor, in the transport goroutine, swaps that response
// for the error and ends the operation.
type streamEnd struct {
	mu  sync.Mutex
	err error // guarded by mu
	at  int   // guarded by mu: the index of the response to replace

	seen int // responses so far; used by the transport goroutine only
}

type streamEndKey struct{}

func endFrom(ctx context.Context) *streamEnd {
	e, _ := ctx.Value(streamEndKey{}).(*streamEnd)
	return e
}

// set records err to replace response number at (0-based).
func (e *streamEnd) set(err error, at int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err, e.at = err, at
}

// next counts a response and returns the error it is replaced by, if any.
// Only the transport goroutine calls it.
func (e *streamEnd) next() error {
	n := e.seen
	e.seen++
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil && e.at == n {
		return e.err
	}
	return nil
}

// withStreamEnd gives every subscription operation its streamEnd.
func withStreamEnd(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if isSubscription(ctx) {
		ctx = context.WithValue(ctx, streamEndKey{}, &streamEnd{})
	}
	return next(ctx)
}

// isSubscription reports whether ctx is that of a subscription operation
// (a response to a request refused before it ran may have none).
func isSubscription(ctx context.Context) bool {
	if !graphql.HasOperationContext(ctx) {
		return false
	}
	op := graphql.GetOperationContext(ctx).Operation
	return op != nil && op.Operation == ast.Subscription
}

// endStream is the response interceptor that swaps the response chosen by
// the stream for its error (see streamEnd).
func endStream(log *slog.Logger) graphql.ResponseMiddleware {
	return func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		if !isSubscription(ctx) {
			// Only subscriptions have a streamEnd, and looking for one in
			// another operation's context would walk all of it.
			return next(ctx)
		}
		resp := next(ctx)
		end := endFrom(ctx)
		if resp == nil || end == nil {
			return resp
		}
		if err := end.next(); err != nil {
			transport.AddSubscriptionError(ctx, presentError(ctx, err, log))
			return nil // the transport sends the error and ends the operation
		}
		return resp
	}
}
