// Package console serves the web console at /ui on the node's HTTP
// listener: a single-page application built from web/console (make
// console) and embedded in the binary, so that nothing is fetched from
// elsewhere at run time.
//
// The console is a client of the public HTTP APIs like any other: its
// pages call /v1 (and /graphql) from the browser with the user's
// credentials, through the same authentication, ACLs and broker
// interface. Its files themselves hold no data and are served without
// authentication (Public), so that a node requiring authentication can
// show the console's login page; /ui/config.json tells the page whether
// it must.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// dist is the built console (web/console, `make console`).
//
//go:embed all:dist
var dist embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// Public reports whether a request path is one of the console's files,
// served to anyone: they are the same for every node and principal.
func Public(p string) bool { return p == "/ui" || strings.HasPrefix(p, Prefix) }

// contentTypes are the types of the files the build makes (never sniffed).
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// ContentType is the Content-Type the console serves a file name with
// ("" for a kind it does not serve).
func ContentType(name string) string { return contentTypes[path.Ext(name)] }

// policy is the console's Content-Security-Policy: its own scripts and
// styles only, and requests to its own origin only.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded file, ready to serve.
type file struct {
	name  string
	ctype string
	etag  string
	data  []byte
	gz    []byte // gzip of data, when that is smaller by a useful margin
	// immutable: a content-hashed name under assets/, cached for a year.
	immutable bool
}

type handler struct {
	b     broker.API
	files map[string]*file
	index *file
}

// Register mounts the console on mux: GET /ui (a redirect), /ui/ and its
// files, and /ui/config.json. It is a server.HTTPAdapter.
func Register(mux *http.ServeMux, b broker.API, log *slog.Logger) {
	h, err := load(b)
	if err != nil {
		panic("console: embedded files: " + err.Error())
	}
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /ui/config.json", h.config)
	mux.HandleFunc("GET /ui/", h.serve)
}

func load(b broker.API) (*handler, error) {
	h := &handler{b: b, files: make(map[string]*file)}
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype := ContentType(name)
		if ctype == "" || strings.HasPrefix(path.Base(name), ".") {
			return nil
		}
		data, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		f := &file{
			name: name, ctype: ctype, data: data,
			etag:      `"` + hex.EncodeToString(sum[:12]) + `"`,
			immutable: strings.HasPrefix(name, "assets/"),
		}
		if len(data) > 1024 && !strings.HasPrefix(ctype, "image/png") && !strings.HasPrefix(ctype, "font/") {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(data)
			zw.Close()
			if buf.Len() < len(data)*9/10 {
				f.gz = buf.Bytes()
			}
		}
		h.files[name] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.index = h.files["index.html"]
	if h.index == nil {
		h.index = &file{name: "index.html", ctype: contentTypes[".html"], etag: `"none"`,
			data: []byte("<!doctype html><title>Hermes</title><p>The console was not built into this binary (make console).</p>\n")}
	}
	return h, nil
}

// config serves /ui/config.json: what the page must know before it can
// call the APIs.
func (h *handler) config(w http.ResponseWriter, r *http.Request) {
	setCommon(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(struct {
		AuthRequired bool `json:"auth_required"`
	}{h.b.AuthRequired()})
}

// serve answers a file of the build, or index.html for /ui/ and for any
// path without a file of its own (the page's own routes).
func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/ui")
	name = strings.TrimPrefix(name, "/")
	f := h.files[name]
	if f == nil {
		if path.Ext(name) != "" && name != "" {
			setCommon(w.Header())
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		f = h.index
	}
	hd := w.Header()
	setCommon(hd)
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", f.etag)
	if f.immutable {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	data := f.data
	if f.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			hd.Set("Content-Encoding", "gzip")
			data = f.gz
		}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func setCommon(h http.Header) {
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return !strings.Contains(strings.ReplaceAll(q, " ", ""), "q=0") || strings.Contains(q, "q=0.")
		}
	}
	return false
}
