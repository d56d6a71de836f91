package graphql

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker/brokertest"
)

// /graphql/ui is served from the binary: the page names only files of
// its own, each served with its Content-Type, and none of them loads
// anything from another host.
func TestGraphiQLEmbedded(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, brokertest.New(), nil)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(p string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get("/graphql/ui")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/graphql/ui: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 5 {
		t.Fatalf("page names %d files:\n%s", len(refs), page)
	}
	external := regexp.MustCompile(`(?:src|href)\s*=\s*["']?(?:https?:)?//|@import\s+url\(["']?https?:|url\(["']?(?:https?:)?//`)
	for _, m := range refs {
		ref := m[1]
		if !strings.HasPrefix(ref, "/graphql/ui/") {
			t.Errorf("page names %q", ref)
			continue
		}
		resp, body := get(ref)
		want := "text/javascript; charset=utf-8"
		if strings.HasSuffix(ref, ".css") {
			want = "text/css; charset=utf-8"
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != want || len(body) == 0 {
			t.Errorf("%s: %d %s, %d bytes", ref, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		req, _ := http.NewRequest("GET", srv.URL+ref, nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		if r2, err := http.DefaultClient.Do(req); err != nil || r2.StatusCode != http.StatusNotModified {
			t.Errorf("%s: revalidation with its ETag: %v %v", ref, err, r2)
		} else {
			r2.Body.Close()
		}
		if loc := external.FindStringIndex(body); loc != nil {
			t.Errorf("%s loads from another host: %q", ref, body[max(0, loc[0]-40):min(len(body), loc[1]+60)])
		}
	}
	for _, p := range []string{"/graphql/ui/nope.js", "/graphql/ui/THIRD_PARTY_LICENSES.txt", "/graphql/ui/../graphql"} {
		if resp, _ := get(p); resp.StatusCode != 404 && resp.StatusCode != 301 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}
