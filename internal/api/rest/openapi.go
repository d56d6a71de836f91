package rest

import (
	_ "embed"
	"net/http"
	"net/url"
)

// openAPIDoc is the OpenAPI 3.1 document of this API, written by hand.
//
//go:embed openapi.json
var openAPIDoc []byte

func (a *API) openAPI(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
	return nil
}
