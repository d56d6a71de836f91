// Package tlsconf builds the TLS configurations of Hermes' listeners and
// dialers from PEM files, and reloads the files when they change, so
// certificates rotate without a restart: a handshake checks the files'
// modification times at most once per reloadCheck and loads them again
// when one changed (a failed reload keeps the previous certificate and is
// logged). TLS 1.2 is the oldest version offered.
//
// Nodes identify each other by certificate: a node's certificate carries
// the URI hermes://node/<id> among its subject alternative names, and is
// signed by the cluster's CA. A client certificate names its principal in
// its subject's common name.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Files are where a TLS configuration's PEM files are.
type Files struct {
	// Cert and Key are this side's certificate (chain) and private key.
	Cert, Key string
	// CA holds the certificates that sign the other side's: clients'
	// certificates for a listener, the server's for a dialer (empty: the
	// system's roots).
	CA string
}

// Enabled reports whether f names a certificate (a listener serves TLS
// only with one).
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" }

func (f Files) check(needCert bool) error {
	if (f.Cert == "") != (f.Key == "") {
		return errors.New("tls: a certificate needs its key and a key its certificate")
	}
	if needCert && f.Cert == "" {
		return errors.New("tls: a certificate and key are needed")
	}
	return nil
}

// reloadCheck is how often a handshake may look at the files again.
const reloadCheck = time.Second

// source holds the loaded files and reloads them when they change.
type source struct {
	files Files
	log   *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   string // the files' sizes and modification times when loaded
	cert    *tls.Certificate
	pool    *x509.CertPool
}

func newSource(f Files, log *slog.Logger) (*source, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &source{files: f, log: log}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.checked = time.Now()
	return s, nil
}

// stampOf summarises the files' sizes and modification times.
func (s *source) stampOf() string {
	var b strings.Builder
	for _, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// load reads the files (s.mu held, or s not shared yet).
func (s *source) load() error {
	stamp := s.stampOf()
	var cert *tls.Certificate
	if s.files.Cert != "" {
		c, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
		if err != nil {
			return fmt.Errorf("tls: load %s and %s: %w", s.files.Cert, s.files.Key, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if s.files.CA != "" {
		pem, err := os.ReadFile(s.files.CA)
		if err != nil {
			return fmt.Errorf("tls: read CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: %s holds no PEM certificate", s.files.CA)
		}
	}
	s.cert, s.pool, s.stamp = cert, pool, stamp
	return nil
}

// current returns the certificate and CA pool, reloaded first when the
// files changed.
func (s *source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.checked) >= reloadCheck {
		s.checked = now
		if stamp := s.stampOf(); stamp != s.stamp {
			if err := s.load(); err != nil {
				s.log.Error("tls: reloading the certificate files failed; the previous ones stay in use", "err", err)
				s.stamp = stamp // not again until they change again
			} else {
				s.log.Info("tls: certificate files reloaded", "cert", s.files.Cert, "ca", s.files.CA)
			}
		}
	}
	return s.cert, s.pool
}

// ClientAuth says what a listener asks of its clients' certificates.
type ClientAuth int

const (
	// NoClientCert: clients present none (authentication, if any, is by
	// password or token).
	NoClientCert ClientAuth = iota
	// VerifyClientCertIfGiven: a certificate a client presents must be
	// signed by Files.CA; clients may present none.
	VerifyClientCertIfGiven
	// RequireClientCert: every client presents a certificate signed by
	// Files.CA (node-to-node).
	RequireClientCert
)

// Server returns the configuration of a listener serving f's
// certificate. With a CA in f, client certificates are verified against
// it as auth says.
func Server(f Files, auth ClientAuth, log *slog.Logger) (*tls.Config, error) {
	if err := f.check(true); err != nil {
		return nil, err
	}
	if auth != NoClientCert && f.CA == "" {
		return nil, errors.New("tls: verifying client certificates needs the CA that signs them")
	}
	src, err := newSource(f, log)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	switch auth {
	case VerifyClientCertIfGiven:
		base.ClientAuth = tls.VerifyClientCertIfGiven
	case RequireClientCert:
		base.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := src.current()
			c := base.Clone()
			c.Certificates = []tls.Certificate{*cert}
			c.ClientCAs = pool
			return c, nil
		},
	}, nil
}

// Client returns the configuration of a dialer: it verifies the server's
// certificate against f.CA (the system's roots when empty) for the name
// dialled, then with verify when not nil, and presents f's certificate
// when f names one.
func Client(f Files, verify func(leaf *x509.Certificate) error, log *slog.Logger) (*tls.Config, error) {
	if err := f.check(false); err != nil {
		return nil, err
	}
	src, err := newSource(f, log)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is verified in VerifyConnection, against the CA as
		// currently loaded (crypto/tls would use a fixed RootCAs).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server presented no certificate")
			}
			_, pool := src.current()
			opts := x509.VerifyOptions{Roots: pool, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
			for _, ic := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("tls: server certificate: %w", err)
			}
			if verify != nil {
				return verify(cs.PeerCertificates[0])
			}
			return nil
		},
	}
	if f.Cert != "" {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := src.current()
			return cert, nil
		}
	}
	return c, nil
}

// nodeURIScheme and nodeURIHost form a node's identity in its
// certificate: hermes://node/<id>.
const (
	nodeURIScheme = "hermes"
	nodeURIHost   = "node"
)

// NodeURI is the subject alternative name that makes a certificate node
// id's.
func NodeURI(id uint64) *url.URL {
	return &url.URL{Scheme: nodeURIScheme, Host: nodeURIHost, Path: "/" + strconv.FormatUint(id, 10)}
}

// NodeID returns the node id c's subject alternative names give (false
// when c is not a node's certificate, or names more than one node).
func NodeID(c *x509.Certificate) (uint64, bool) {
	var id uint64
	for _, u := range c.URIs {
		if u.Scheme != nodeURIScheme || u.Host != nodeURIHost {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(u.Path, "/"), 10, 64)
		if err != nil || n == 0 || (id != 0 && id != n) {
			return 0, false
		}
		id = n
	}
	return id, id != 0
}

// Principal is the principal a client certificate names: its subject's
// common name ("" when none).
func Principal(c *x509.Certificate) string { return c.Subject.CommonName }
