package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hermes-mq/hermes/internal/httpbody"
)

// Response content types of POST (graphql-over-http).
const (
	contentTypeJSON            = "application/json"
	contentTypeGraphQLResponse = "application/graphql-response+json"
)

// postTransport serves POST with a JSON body as gqlgen's transport.POST
// (with no options) does: the same content types, statuses, messages and
// response bytes. It differs in cost only: the body is read into a buffer
// of its announced size, decoded by decodeParams and the usual response
// (data, no errors or extensions) is written without reflection.
type postTransport struct{}

var _ graphql.Transport = postTransport{}

// paramsPool recycles RawParams, as transport.POST does.
var paramsPool = sync.Pool{New: func() any { return new(graphql.RawParams) }}

func (postTransport) Supports(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get("Upgrade") == "" && isJSON(r.Header.Get("Content-Type"))
}

// isJSON reports whether a Content-Type is application/json, with or
// without parameters.
func isJSON(contentType string) bool {
	if contentType == contentTypeJSON {
		return true // the common case, without parsing
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == contentTypeJSON
}

func (postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	contentType := responseContentType(r.Header.Get("Accept"))
	w.Header().Add("Content-Type", contentType)
	params := paramsPool.Get().(*graphql.RawParams)
	defer func() {
		*params = graphql.RawParams{}
		paramsPool.Put(params)
	}()
	start := graphql.Now()
	body, err := httpbody.Read(r.Body, r.ContentLength)
	if err != nil {
		gqlErr := gqlerror.Errorf("could not read request body: %+v", err)
		writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlErr}))
		return
	}
	if err := decodeParams(body, params); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		gqlErr := gqlerror.Errorf("json request body could not be decoded: %+v body:%s", err, string(body))
		writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlErr}))
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	oc, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		w.WriteHeader(operationErrorStatus(contentType, errs))
		writeResponse(w, exec.DispatchError(graphql.WithOperationContext(ctx, oc), errs))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, oc)
	writeResponse(w, responses(ctx))
}

// responseContentType chooses the response's content type from the
// Accept header, as transport.POST does without a default of its own.
func responseContentType(accept string) string {
	if accept == "" {
		return contentTypeJSON
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "*/*", "application/*", contentTypeJSON:
			return contentTypeJSON
		case contentTypeGraphQLResponse:
			return contentTypeGraphQLResponse
		}
	}
	return contentTypeGraphQLResponse
}

// operationErrorStatus is the status of a request refused before it ran:
// a request error (KindProtocol: it did not parse or validate) is 422, or
// 400 for application/graphql-response+json; any other is 200.
func operationErrorStatus(contentType string, errs gqlerror.List) int {
	if errcode.GetErrorKind(errs) != errcode.KindProtocol {
		return http.StatusOK
	}
	if contentType == contentTypeGraphQLResponse {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// writeResponse writes resp as json.Marshal would. A response of data
// alone, the usual one, is written by hand: {"data":...} with the data
// compacted, which is what json.Marshal makes of a RawMessage when it has
// nothing to escape for HTML.
func writeResponse(w io.Writer, resp *graphql.Response) {
	if b, ok := dataOnly(resp); ok {
		w.Write(b)
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		panic(fmt.Errorf("unable to marshal %s: %w", string(resp.Data), err)) // as transport.POST does
	}
	w.Write(b)
}

// dataOnly encodes a response that has data and nothing else, whose data
// has no character json.Marshal would escape for HTML (<, >, &, U+2028,
// U+2029, whose UTF-8 starts with 0xE2). It reports false for any other.
func dataOnly(resp *graphql.Response) ([]byte, bool) {
	if resp == nil || resp.Data == nil || len(resp.Errors) != 0 || resp.Label != "" || resp.Path != nil ||
		resp.HasNext != nil || len(resp.Extensions) != 0 {
		return nil, false
	}
	for _, c := range resp.Data {
		switch c {
		case '<', '>', '&', 0xE2:
			return nil, false
		}
	}
	var buf bytes.Buffer
	buf.Grow(len(`{"data":}`) + len(resp.Data))
	buf.WriteString(`{"data":`)
	if err := json.Compact(&buf, resp.Data); err != nil {
		return nil, false // json.Marshal fails on it too
	}
	buf.WriteByte('}')
	return buf.Bytes(), true
}
