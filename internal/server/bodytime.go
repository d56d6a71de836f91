package server

import (
	"io"
	"net/http"
	"time"
)

// DefaultHTTPBodyTimeout is Config.HTTPBodyTimeout's default: a body of
// the largest size the HTTP APIs take (32 MiB) arrives in it at 3.2 MB/s.
const DefaultHTTPBodyTimeout = 10 * time.Second

// bodyDeadline gives a request with a body d to send all of it (the
// header has its own ReadHeaderTimeout): a read past the deadline fails,
// the handler answers with the error, and the connection is closed. The
// deadline is lifted once the body is read, so a response that streams
// (server-sent events) is not cut.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline when the whole body
// has been read.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done { // after a timeout the deadline stays: the connection is closed
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
