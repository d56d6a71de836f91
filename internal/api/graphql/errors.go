package graphql

import (
	"context"
	"errors"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hermes-mq/hermes/internal/broker"
)

// maxMessageBytes bounds an error's message (gqlgen quotes a whole
// undecodable request body in its message).
const maxMessageBytes = 1024

// errorf makes an error of a broker kind (see broker.Errorf).
var errorf = broker.Errorf

// invalid is bad input this adapter rejects itself.
func invalid(format string, args ...any) error {
	return errorf(broker.ErrInvalidArgument, format, args...)
}

// presentError is gqlgen's error presenter, the one place where errors get
// their extensions: code (broker.Code: the names every protocol uses),
// retriable, and retryAfterMs when the broker gave a hint. Errors gqlgen
// makes itself about the request (it could not parse or validate it, or a
// limit refused it) are INVALID_ARGUMENT, with gqlgen's own code as
// extensions.reason. The error is changed in place as well as returned:
// gqlgen's websocket transport sends validation errors it passed here.
func presentError(ctx context.Context, err error, log *slog.Logger) *gqlerror.Error {
	gqlErr := graphql.DefaultErrorPresenter(ctx, err)
	ext := make(map[string]any, len(gqlErr.Extensions)+3)
	for k, v := range gqlErr.Extensions {
		ext[k] = v
	}
	cause := gqlErr.Err
	switch {
	case cause == nil:
		if reason, ok := ext["code"].(string); ok && reason != "" && reason != "INVALID_ARGUMENT" {
			ext["reason"] = reason
		}
		ext["code"], ext["retriable"] = broker.Code(broker.ErrInvalidArgument), false
	case broker.Code(cause) == "INTERNAL" && inArgument(ctx, gqlErr.Path):
		// gqlgen could not decode an argument (an enum value spelled
		// in another case passes its validation, then fails to decode).
		ext["code"], ext["retriable"] = broker.Code(broker.ErrInvalidArgument), false
	case errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded):
		ext["code"], ext["retriable"] = broker.Code(broker.ErrUnavailable), true
	default:
		code := broker.Code(cause)
		ext["code"], ext["retriable"] = code, broker.Retriable(cause)
		if after := broker.RetryAfter(cause); after > 0 {
			ext["retryAfterMs"] = after.Milliseconds()
		}
		if code == "INTERNAL" {
			log.Error("GraphQL request failed", "path", gqlErr.Path.String(), "err", cause)
		}
	}
	if len(gqlErr.Message) > maxMessageBytes {
		gqlErr.Message = truncate(gqlErr.Message, maxMessageBytes) + "…"
	}
	gqlErr.Extensions = ext
	return gqlErr
}

// inArgument reports whether path points into an argument of the field
// being resolved (where gqlgen reports a value it could not decode), not
// at the field or its result.
func inArgument(ctx context.Context, path ast.Path) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil {
		return false
	}
	at := len(fc.Path())
	if len(path) <= at {
		return false
	}
	name, ok := path[at].(ast.PathName)
	return ok && fc.Field.Arguments.ForName(string(name)) != nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
