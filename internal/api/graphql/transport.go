package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hermes-mq/hermes/internal/broker"
)

// guard answers what gqlgen's transports would answer without error
// codes (a method or content type no transport takes, a body over
// MaxBodyBytes), and bounds the body of the rest.
func guard(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, kind error, msg string) {
			writeError(w, status, presentError(r.Context(), errorf(kind, "%s", msg), log))
		}
		switch {
		case r.Header.Get("Upgrade") != "", r.Method == http.MethodGet:
			next.ServeHTTP(w, r)
			return
		case r.Method != http.MethodPost:
			w.Header().Set("Allow", "GET, POST")
			fail(http.StatusMethodNotAllowed, broker.ErrInvalidArgument, "/graphql takes GET (queries), POST and websockets, not "+r.Method)
			return
		}
		if !isJSON(r.Header.Get("Content-Type")) {
			fail(http.StatusUnsupportedMediaType, broker.ErrInvalidArgument, "POST a JSON body (Content-Type: application/json)")
			return
		}
		if r.ContentLength > MaxBodyBytes {
			fail(http.StatusRequestEntityTooLarge, broker.ErrMessageTooLarge, bodyTooLarge)
			return
		}
		body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		if r.ContentLength < 0 {
			// Unknown length: read it here, so that too much is a 413 too.
			data, err := io.ReadAll(body)
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				fail(http.StatusRequestEntityTooLarge, broker.ErrMessageTooLarge, bodyTooLarge)
				return
			}
			body = io.NopCloser(bytes.NewReader(data))
		}
		r.Body = body
		next.ServeHTTP(w, r)
	})
}

const bodyTooLarge = "the request body is over 32 MiB"

// writeError answers one error in GraphQL's format.
func writeError(w http.ResponseWriter, status int, err *gqlerror.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(graphql.Response{Errors: gqlerror.List{err}})
}

// getTransport serves queries by GET (?query=&operationName=&variables=
// &extensions=). Unlike gqlgen's transport.GET it passes every error it
// answers through the error presenter, so each has its code.
type getTransport struct{}

var _ graphql.Transport = getTransport{}

func (getTransport) Supports(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") == ""
}

func (getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "application/json")
	answer := func(status int, resp *graphql.Response) {
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(resp)
	}
	fail := func(status int, format string, args ...any) {
		answer(status, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf(format, args...)}))
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail(http.StatusBadRequest, "query string: %v", err)
		return
	}
	raw := &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName"), Headers: r.Header}
	raw.ReadTime.Start = graphql.Now()
	if err := decodeParam(q.Get("variables"), &raw.Variables); err != nil {
		fail(http.StatusBadRequest, "variables: %v", err)
		return
	}
	if err := decodeParam(q.Get("extensions"), &raw.Extensions); err != nil {
		fail(http.StatusBadRequest, "extensions: %v", err)
		return
	}
	raw.ReadTime.End = graphql.Now()
	oc, errs := exec.CreateOperationContext(ctx, raw)
	if errs != nil {
		status := http.StatusUnprocessableEntity
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			status = http.StatusBadRequest
		}
		answer(status, exec.DispatchError(graphql.WithOperationContext(ctx, oc), errs))
		return
	}
	if oc.Operation.Operation != ast.Query {
		w.Header().Set("Allow", "POST")
		fail(http.StatusMethodNotAllowed, "GET serves queries only (a link must change nothing); send a %s by POST", oc.Operation.Operation)
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, oc)
	answer(http.StatusOK, responses(ctx))
}

// decodeParam decodes a JSON object parameter, if there is one.
func decodeParam(s string, out *map[string]any) error {
	if s == "" {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	return d.Decode(out)
}
