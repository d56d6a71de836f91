package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/pkg/client"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// When a connection to the broker fails, gRPC says only that it is
// unavailable. The CLI then probes the address itself, with plain
// sockets, to say why: nothing listens, the host name does not resolve,
// the port speaks another protocol, or one side speaks TLS and the other
// not.

// Kinds of connection failure a connError names.
const (
	connRefused       = "refused"
	connUnknownHost   = "unknown-host"
	connTimeout       = "timeout"
	connWrongProtocol = "wrong-protocol"
	connNeedsTLS      = "server-needs-tls"   // plaintext client, TLS server
	connNotTLS        = "server-not-tls"     // TLS client, plaintext server
	connTLSVerify     = "tls-verify"         // the broker's certificate is not trusted
	connTLSHandshake  = "tls-handshake"      // the handshake failed otherwise
	connOther         = "connection-failure" // none of those
)

// probeTimeout bounds each probe of a diagnosis.
const probeTimeout = 3 * time.Second

// connError is a failed connection with the reason a probe found. It
// wraps the SDK's error, so errors.Is(err, client.ErrUnavailable) holds.
type connError struct {
	Addr string
	Kind string
	Msg  string
	err  error // the SDK's or gRPC's error
}

func (e *connError) Error() string { return e.Msg }
func (e *connError) Unwrap() error { return e.err }

// explain replaces a connection failure (UNAVAILABLE) by what a probe of
// the addresses finds; other errors, and failures no probe explains,
// are returned as they are.
func (f *brokerFlags) explain(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if !errors.Is(err, client.ErrUnavailable) && status.Code(err) != codes.Unavailable {
		return err
	}
	var ce *connError
	if errors.As(err, &ce) {
		return err
	}
	tc, terr := f.tlsConfig()
	if terr != nil {
		return err
	}
	addrs := splitAddrs(f.addr)
	var found []*connError
	for _, a := range addrs {
		if d := diagnose(ctx, a, tc); d != nil {
			found = append(found, d)
		} else {
			return err // one node answers gRPC: the failure is something else
		}
	}
	if len(found) == 0 {
		return err
	}
	d := found[0]
	if len(found) > 1 {
		msg := "no node of " + f.addr + " could be reached:"
		for _, x := range found {
			msg += "\n  " + x.Msg
		}
		d = &connError{Addr: f.addr, Kind: d.Kind, Msg: msg}
	}
	d.err = err
	return d
}

// diagnose probes addr as a gRPC client would (with TLS when tc is not
// nil) and returns why it cannot be used, or nil when it answers the
// Hermes gRPC API.
func diagnose(ctx context.Context, addr string, tc *tls.Config) *connError {
	fail := func(kind, format string, a ...any) *connError {
		return &connError{Addr: addr, Kind: kind, Msg: fmt.Sprintf(format, a...)}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fail(connOther, "%q is not a HOST:PORT address (--addr): %v", addr, err)
	}
	conn, err := dialProbe(ctx, addr)
	if err != nil {
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr):
			return fail(connUnknownHost, "unknown host %q: the name does not resolve (%s) — check the host in --addr", host, dnsErr.Err)
		case errors.Is(err, syscall.ECONNREFUSED):
			return fail(connRefused, "nothing listens on %s — is the broker running? (--addr)", addr)
		case isTimeout(err):
			return fail(connTimeout, "no answer from %s within %s — wrong host, or a firewall drops the connection? (--addr)", addr, probeTimeout)
		}
		return fail(connOther, "cannot connect to %s: %v (--addr)", addr, err)
	}
	defer conn.Close()
	if tc != nil {
		c := tc.Clone()
		if c.ServerName == "" {
			c.ServerName = host
		}
		c.NextProtos = []string{"h2"}
		tconn := tls.Client(conn, c)
		_ = tconn.SetDeadline(time.Now().Add(probeTimeout))
		err := tconn.HandshakeContext(ctx)
		var rh tls.RecordHeaderError
		var unknownCA x509.UnknownAuthorityError
		var hostErr x509.HostnameError
		var invalid x509.CertificateInvalidError
		var verify *tls.CertificateVerificationError
		switch {
		case err == nil:
			conn = tconn
		case errors.As(err, &rh):
			what := "plaintext"
			if bytes.HasPrefix(rh.RecordHeader[:], []byte("HTTP")) {
				what = "plaintext HTTP/1"
			}
			return fail(connNotTLS, "%s does not speak TLS (it answered a TLS handshake in %s) — drop --tls/--tls-ca/--tls-cert, or give the broker's TLS address", addr, what)
		case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verify):
			return fail(connTLSVerify, "TLS: the certificate of %s is not trusted: %v — give the CA that signed it with --tls-ca", addr, err)
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			return fail(connTLSHandshake, "%s closed the connection during the TLS handshake — not a TLS port, or it requires a client certificate (--tls-cert, --tls-key)", addr)
		default:
			return fail(connTLSHandshake, "TLS handshake with %s failed: %v", addr, err)
		}
	}
	got, err := http2Probe(conn)
	switch {
	case looksLikeTLS(got):
		return fail(connNeedsTLS, "%s speaks TLS and this connection is plaintext — add --tls-ca CA.pem (or --tls for a publicly trusted certificate)", addr)
	case bytes.HasPrefix(got, []byte("HTTP/")):
		return fail(connWrongProtocol, "%s is an HTTP/1 server, not the broker's gRPC port — the REST/GraphQL (--http-addr) port? The gRPC port is --grpc-addr (default %s)", addr, client.DefaultAddr)
	case len(got) >= 9 && got[3] == 0x4: // an HTTP/2 SETTINGS frame
		if grpcAnswers(ctx, addr, tc) {
			return nil
		}
		return fail(connWrongProtocol, "%s speaks HTTP/2 but is not the Hermes gRPC API — check --addr (the gRPC port is --grpc-addr, default %s)", addr, client.DefaultAddr)
	case len(got) > 0:
		return fail(connWrongProtocol, "%s does not speak gRPC (it answered the HTTP/2 preface with %q) — a Kafka or wire-protocol port? The gRPC port is --grpc-addr (default %s)", addr, printable(got), client.DefaultAddr)
	}
	// Closed without a word: a TLS server does that to plaintext, and so
	// do the Kafka and wire ports. Ask in TLS to tell them apart.
	if tc == nil && speaksTLS(ctx, addr) {
		return fail(connNeedsTLS, "%s speaks TLS and this connection is plaintext — add --tls-ca CA.pem (or --tls for a publicly trusted certificate)", addr)
	}
	return fail(connWrongProtocol, "%s closed the connection at the gRPC (HTTP/2) handshake (%v) — not the broker's gRPC port? (a Kafka or wire-protocol port; the gRPC port is --grpc-addr, default %s)", addr, err, client.DefaultAddr)
}

func dialProbe(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: probeTimeout}
	return d.DialContext(ctx, "tcp", addr)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// http2Probe sends the HTTP/2 client preface and an empty SETTINGS frame
// and returns the first bytes answered (a gRPC server answers with its
// SETTINGS frame).
func http2Probe(conn net.Conn) ([]byte, error) {
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)
	if _, err := conn.Write(preface); err != nil {
		return nil, err
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(conn, buf, 9)
	if n > 0 {
		err = nil
	}
	return buf[:n], err
}

// looksLikeTLS reports whether b starts with a TLS record (alert or
// handshake, TLS 1.x).
func looksLikeTLS(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03
}

// speaksTLS reports whether addr completes a TLS handshake (whatever its
// certificate).
func speaksTLS(ctx context.Context, addr string) bool {
	conn, err := dialProbe(ctx, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	tconn := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a probe: nothing is sent
	_ = tconn.SetDeadline(time.Now().Add(probeTimeout))
	err = tconn.HandshakeContext(ctx)
	var alert tls.AlertError
	// A server that wants a client certificate may end the handshake
	// with an alert: it speaks TLS all the same.
	return err == nil || errors.As(err, &alert)
}

// grpcAnswers reports whether addr answers the Hermes Health call (any
// answer but UNAVAILABLE, UNIMPLEMENTED or an HTTP-level failure counts).
func grpcAnswers(ctx context.Context, addr string, tc *tls.Config) bool {
	creds := insecure.NewCredentials()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if tc != nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return false
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = pb.NewHermesClient(conn).Health(cctx, &pb.HealthRequest{})
	switch status.Code(err) {
	case codes.OK, codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return false
}

func printable(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			out = append(out, c)
		} else {
			out = append(out, '.')
		}
	}
	return string(out)
}
