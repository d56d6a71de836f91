package server

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/hermes-mq/hermes/internal/broker"
)

// The HTTP listener's guard, in front of REST, GraphQL, the console,
// /metrics and profiles:
//
//   - authentication: the Authorization header (Basic or Bearer) or the
//     TLS client certificate become the request's principal; /healthz and
//     /readyz are exempt (probes);
//   - cross-site requests: a browser on another site may not change
//     anything. A request that is not GET, HEAD or OPTIONS and carries an
//     Origin must come from the node's own origin or one of
//     Config.CORSOrigins, and a request with a body must say
//     application/json (a "simple" cross-site form or text/plain POST is
//     refused before it reaches an API);
//   - CORS, off by default: Config.CORSOrigins may call the APIs from
//     pages of theirs (preflights are answered here).

// openPaths need no authentication (nor do the console's files: openPath).
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// guard wraps the HTTP handler with authentication and the cross-site
// checks.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := origin != "" && slices.Contains(s.cfg.CORSOrigins, origin)
		if allowed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if !allowed {
				httpError(w, http.StatusForbidden, "PERMISSION_DENIED", "cross-origin requests from "+origin+" are not allowed (--http-cors-origins)")
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if changes(r.Method) {
			if origin != "" && !allowed && !sameOrigin(origin, r) {
				s.log.Warn("cross-site request refused", "log", "audit", "origin", origin, "method", r.Method, "path", r.URL.Path, "addr", r.RemoteAddr, "result", "denied")
				errorFor(r)(w, http.StatusForbidden, "PERMISSION_DENIED", "cross-site request from "+origin+" refused")
				return
			}
			if r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
				errorFor(r)(w, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", "request bodies must be application/json")
				return
			}
		}
		if openPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c := broker.Credentials{Addr: r.RemoteAddr}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			c.CertName = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		var err error
		if h := r.Header.Get("Authorization"); h != "" {
			c, err = broker.ParseAuthorization(h, c)
		}
		var p broker.Principal
		if err == nil {
			p, err = s.broker.Authenticate(r.Context(), c)
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="hermes", Bearer`)
			if strings.HasPrefix(r.URL.Path, "/graphql") {
				graphqlError(w, http.StatusUnauthorized, "UNAUTHENTICATED", err.Error())
				return
			}
			httpError(w, http.StatusUnauthorized, "UNAUTHENTICATED", err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(broker.WithPrincipal(r.Context(), p)))
	})
}

// changes reports whether a method may change state.
func changes(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// sameOrigin reports whether origin is the node's own (the host the
// request was sent to).
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// httpError writes the APIs' error shape.
func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "retriable": false}})
}

// graphqlError writes a GraphQL error answer (the shape GraphQL clients
// read), with the same codes as the API's.
func graphqlError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{"message": msg,
		"extensions": map[string]any{"code": code, "retriable": false}}}})
}

// errorFor is the error writer of r's API: GraphQL's shape under
// /graphql, the REST shape elsewhere.
func errorFor(r *http.Request) func(http.ResponseWriter, int, string, string) {
	if strings.HasPrefix(r.URL.Path, "/graphql") {
		return graphqlError
	}
	return httpError
}

// requireHTTP guards a handler of the server's own (metrics, profiles)
// with an authorization check when authentication is required.
func (s *Server) requireHTTP(a broker.Action, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.broker.AuthRequired() {
			if err := s.broker.Authorize(r.Context(), a, broker.Resource{Kind: broker.ResourceCluster}); err != nil {
				httpError(w, http.StatusForbidden, broker.Code(err), err.Error())
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
