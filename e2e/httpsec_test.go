package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// A web page of another site cannot change anything on a node: a
// "simple" cross-site POST (text/plain or a form, which a browser sends
// without asking) creates no topic and publishes nothing, and a JSON
// request carrying another site's Origin is refused. An origin listed in
// --http-cors-origins may, and gets the CORS headers.
func TestHTTPCrossSiteRequests(t *testing.T) {
	n := testcluster.StartNode(t, "--http-cors-origins", "https://console.example")
	c, _ := dial(t, n)
	createTopic(t, c, "guarded", 1)
	base := "http://" + n.HTTPAddr
	post := func(path, ctype, origin, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		if r := post("/v1/topics", ct, "https://evil.example", `{"name":"csrf"}`); r.StatusCode < 400 {
			t.Errorf("cross-site %q POST creating a topic: %s", ct, r.Status)
		}
		if r := post("/v1/topics/guarded/records", ct, "", `{"payload":"csrf"}`); r.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("%q POST publishing: %s, want 415", ct, r.Status)
		}
		if r := post("/graphql", ct, "https://evil.example", `{"query":"mutation { createTopic(name: \"csrf2\") { name } }"}`); r.StatusCode < 400 {
			t.Errorf("cross-site %q POST to GraphQL: %s", ct, r.Status)
		}
	}
	if r := post("/v1/topics/guarded/records", "application/json", "https://evil.example", `{"payload":"csrf"}`); r.StatusCode != http.StatusForbidden {
		t.Errorf("JSON POST from another origin: %s, want 403", r.Status)
	}
	topics, err := c.ListTopics(ctxT(t, 5*time.Second), &pb.ListTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(topics.Topics) != 1 {
		t.Errorf("topics after the cross-site requests: %v", topics.Topics)
	}
	if got := readAll(t, c, "guarded", 0); len(got) != 0 {
		t.Errorf("%d records published by cross-site requests", len(got))
	}
	// The node's own origin, and the allowed one, may.
	if r := post("/v1/topics/guarded/records", "application/json", "http://"+n.HTTPAddr, `{"payload":"same origin"}`); r.StatusCode != http.StatusOK {
		t.Errorf("same-origin publish: %s", r.Status)
	}
	r := post("/v1/topics/guarded/records", "application/json; charset=utf-8", "https://console.example", `{"payload":"allowed origin"}`)
	if r.StatusCode != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "https://console.example" {
		t.Errorf("allowed origin: %s, CORS %q", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
	pre, _ := http.NewRequest("OPTIONS", base+"/v1/topics/guarded/records", nil)
	pre.Header.Set("Origin", "https://console.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight of the allowed origin: %s %v", resp.Status, resp.Header)
	}
	pre.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %s %v", resp.Status, resp.Header)
	}
	if got := readAll(t, c, "guarded", 0); len(got) != 2 {
		t.Errorf("%d records, want the 2 allowed publishes", len(got))
	}
}

// With authentication on, GraphQL introspection and the profiler are
// for principals that may describe (introspection) or alter (profiles)
// the cluster; health probes stay open.
func TestIntrospectionAndProfilesNeedRights(t *testing.T) {
	n := startAuthNode(t, "--pprof")
	admin := authDriver(t, "grpc", n, basic("admin", "adminpass1")).(*grpcDriver)
	if _, err := admin.c.CreateUser(ctxT(t, 10*time.Second), &pb.CreateUserRequest{Name: "alice", Password: "alicepass1"}); err != nil {
		t.Fatal(err)
	}
	get := func(path, authz string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+n.HTTPAddr+path, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	introspect := func(authz string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+n.HTTPAddr+"/graphql", strings.NewReader(`{"query":"{ __schema { queryType { name } } }"}`))
		req.Header.Set("Content-Type", "application/json")
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := introspect(""); code != http.StatusUnauthorized {
		t.Errorf("anonymous introspection: %d, want 401", code)
	}
	if _, body := introspect(basic("alice", "alicepass1")); !strings.Contains(body, "introspection disabled") {
		t.Errorf("introspection as alice: %s", body)
	}
	if _, body := introspect(basic("admin", "adminpass1")); !strings.Contains(body, `"queryType":{"name":"Query"}`) {
		t.Errorf("introspection as the superuser: %s", body)
	}
	if code, _ := get("/debug/pprof/", basic("alice", "alicepass1")); code != http.StatusForbidden {
		t.Errorf("pprof as alice: %d, want 403", code)
	}
	if code, _ := get("/debug/pprof/", ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous pprof: %d, want 401", code)
	}
	if code, _ := get("/debug/pprof/", basic("admin", "adminpass1")); code != http.StatusOK {
		t.Errorf("pprof as the superuser: %d", code)
	}
	if code, _ := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz without credentials: %d", code)
	}
}
