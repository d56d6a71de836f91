package console

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker/brokertest"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	Register(mux, brokertest.New(), nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// No transparent gzip: the test sees what is sent.
	tr := &http.Transport{DisableCompression: true}
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// The console is built into the binary: index.html and its assets.
func TestBuilt(t *testing.T) {
	data, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		t.Fatalf("dist/index.html is not embedded (make console): %v", err)
	}
	if !bytes.Contains(data, []byte(`src="/ui/assets/`)) {
		t.Fatalf("index.html loads no script from /ui/assets/:\n%s", data)
	}
}

// Every embedded file is served with the Content-Type of its kind, never
// sniffed, with the security headers, and compressed when asked.
func TestContentTypes(t *testing.T) {
	srv := newServer(t)
	n := 0
	fs.WalkDir(dist, "dist", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(name, "dist/")
		want := ContentType(rel)
		if want == "" {
			t.Errorf("%s: a kind of file the console does not serve", rel)
			return nil
		}
		resp, body := get(t, srv.URL+"/ui/"+rel)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", rel, resp.StatusCode)
			return nil
		}
		if got := resp.Header.Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", rel, got, want)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s: security headers %v", rel, resp.Header)
		}
		orig, _ := fs.ReadFile(dist, name)
		if !bytes.Equal(body, orig) {
			t.Errorf("%s: body differs from the embedded file", rel)
		}
		immutable := strings.Contains(resp.Header.Get("Cache-Control"), "immutable")
		if immutable != strings.HasPrefix(rel, "assets/") {
			t.Errorf("%s: Cache-Control %q", rel, resp.Header.Get("Cache-Control"))
		}
		resp, body = get(t, srv.URL+"/ui/"+rel, "Accept-Encoding", "gzip")
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
			plain, _ := io.ReadAll(zr)
			if !bytes.Equal(plain, orig) {
				t.Errorf("%s: gzip body differs", rel)
			}
		}
		if etag := resp.Header.Get("ETag"); etag != "" {
			if r, _ := get(t, srv.URL+"/ui/"+rel, "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
				t.Errorf("%s: If-None-Match: %d", rel, r.StatusCode)
			}
		}
		n++
		return nil
	})
	if n < 3 {
		t.Fatalf("only %d files served", n)
	}
}

// The console needs no network: every script, style and other URL in the
// embedded files is the node's own (no scheme and host), and every file
// index.html names is served.
func TestNoNetwork(t *testing.T) {
	srv := newServer(t)
	external := regexp.MustCompile(`(?:src|href)\s*=\s*["']?(?:https?:)?//|@import\s+url\(["']?https?:|url\(["']?(?:https?:)?//`)
	fs.WalkDir(dist, "dist", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := fs.ReadFile(dist, name)
		if loc := external.FindIndex(data); loc != nil {
			t.Errorf("%s loads from another host: %q", name, data[max(0, loc[0]-40):min(len(data), loc[1]+60)])
		}
		return nil
	})
	resp, page := get(t, srv.URL+"/ui/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/ui/: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllSubmatch(page, -1)
	if len(refs) == 0 {
		t.Fatalf("index.html names no file:\n%s", page)
	}
	for _, m := range refs {
		ref := string(m[1])
		if strings.HasPrefix(ref, "data:") || strings.HasPrefix(ref, "#") {
			continue
		}
		if !strings.HasPrefix(ref, "/ui/") {
			t.Errorf("index.html names %q, outside /ui/", ref)
			continue
		}
		if r, _ := get(t, srv.URL+ref); r.StatusCode != 200 || r.Header.Get("Content-Type") != ContentType(path.Base(ref)) {
			t.Errorf("%s: %d %s", ref, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}
}

func TestRoutes(t *testing.T) {
	srv := newServer(t)
	if resp, _ := get(t, srv.URL+"/ui"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	index, _ := fs.ReadFile(dist, "dist/index.html")
	for _, p := range []string{"/ui/", "/ui/topics", "/ui/groups/g"} {
		resp, body := get(t, srv.URL+p)
		if resp.StatusCode != 200 || !bytes.Equal(body, index) || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: %d, %d bytes, %s", p, resp.StatusCode, len(body), resp.Header.Get("Cache-Control"))
		}
	}
	for _, p := range []string{"/ui/assets/nope.js", "/ui/nope.css"} {
		if resp, _ := get(t, srv.URL+p); resp.StatusCode != 404 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	resp, body := get(t, srv.URL+"/ui/config.json")
	var cfg struct {
		AuthRequired *bool `json:"auth_required"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil || resp.Header.Get("Content-Type") != "application/json" || cfg.AuthRequired == nil || *cfg.AuthRequired {
		t.Errorf("config.json: %s %s %v", resp.Header.Get("Content-Type"), body, err)
	}
	for _, p := range []string{"/ui", "/ui/", "/ui/assets/x.js", "/ui/config.json"} {
		if !Public(p) {
			t.Errorf("Public(%q) = false", p)
		}
	}
	for _, p := range []string{"/uix", "/v1/topics", "/metrics", "/graphql/ui"} {
		if Public(p) {
			t.Errorf("Public(%q) = true", p)
		}
	}
}
