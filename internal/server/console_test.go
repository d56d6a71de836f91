package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// With authentication required, the console's files are served to
// anyone (its login page must load), while the APIs it calls are not.
func TestConsolePublicUnderAuth(t *testing.T) {
	s := startNode(t, func(c *Config) { c.Broker.Auth.Required = true })
	base := "http://" + s.HTTPAddr()
	get := func(p string) (int, string, string) {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	if code, ctype, body := get("/ui/"); code != 200 || ctype != "text/html; charset=utf-8" || !strings.Contains(body, "/ui/assets/") {
		t.Fatalf("/ui/: %d %s %.200s", code, ctype, body)
	}
	code, _, body := get("/ui/config.json")
	var c struct {
		AuthRequired bool `json:"auth_required"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &c) != nil || !c.AuthRequired {
		t.Fatalf("/ui/config.json: %d %s", code, body)
	}
	for _, p := range []string{"/v1/topics", "/metrics", "/graphql/ui", "/uix"} {
		if code, _, _ := get(p); code != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d", p, code)
		}
	}
}
