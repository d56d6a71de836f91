package graphql

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// graphiqlFiles are GraphiQL and React (their npm packages' browser
// builds) and the page that starts them, copied here by `make console`
// (web/console/scripts/vendor-graphiql.mjs): /graphql/ui needs nothing
// but this node.
//
//go:embed graphiql
var graphiqlFiles embed.FS

// graphiqlPolicy lets the page load its own files only and talk to this
// node only (GraphiQL sets inline styles).
const graphiqlPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var graphiqlTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// serveGraphiQL answers GET /graphql/ui (the page) and /graphql/ui/{file}.
func serveGraphiQL(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/graphql/ui"), "/")
	if name == "" {
		name = "index.html"
	}
	ctype := graphiqlTypes[path.Ext(name)]
	data, err := graphiqlFiles.ReadFile("graphiql/" + name)
	if ctype == "" || strings.Contains(name, "/") || err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", graphiqlPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", graphiqlETag(name, data))
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// graphiqlETags are the files' ETags (a revalidation of the 1.6 MB of
// GraphiQL and React is then a 304).
var graphiqlETags sync.Map

func graphiqlETag(name string, data []byte) string {
	if e, ok := graphiqlETags.Load(name); ok {
		return e.(string)
	}
	sum := sha256.Sum256(data)
	e := `"` + hex.EncodeToString(sum[:12]) + `"`
	graphiqlETags.Store(name, e)
	return e
}
