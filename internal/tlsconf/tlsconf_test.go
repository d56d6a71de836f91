package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
	"time"
)

func leaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDevCertsIdentities(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDev(DevOptions{Dir: dir, Nodes: 2, Clients: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 2; id++ {
		c := leaf(t, NodeFiles(dir, id).Cert)
		if got, ok := NodeID(c); !ok || got != id {
			t.Errorf("node %d's certificate names node %d (%v)", id, got, ok)
		}
		if err := c.VerifyHostname("127.0.0.1"); err != nil {
			t.Errorf("node %d: %v", id, err)
		}
	}
	a := leaf(t, ClientFiles(dir, "alice").Cert)
	if _, ok := NodeID(a); ok {
		t.Error("a client certificate names a node")
	}
	if Principal(a) != "alice" {
		t.Errorf("principal %q, want alice", Principal(a))
	}
	if fi, _ := os.Stat(NodeFiles(dir, 1).Key); fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
	}
	// A second run keeps the CA: the first certificates stay valid.
	if err := WriteDev(DevOptions{Dir: dir, Clients: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(CAFile(dir))
	pool.AppendCertsFromPEM(b)
	for _, p := range []string{NodeFiles(dir, 1).Cert, ClientFiles(dir, "bob").Cert} {
		if _, err := leaf(t, p).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// handshake runs one TLS handshake between server and client configs
// over loopback and returns the client's error and what the server saw.
func handshake(t *testing.T, server, client *tls.Config) (error, tls.ConnectionState) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			seen <- tls.ConnectionState{}
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		tc.Handshake()
		tc.Write([]byte{1}) // the client learns of a refusal on its first read
		seen <- tc.ConnectionState()
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client = client.Clone()
	client.ServerName = "127.0.0.1"
	tc := tls.Client(c, client)
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	err = tc.Handshake()
	if err == nil {
		_, err = tc.Read(make([]byte, 1))
	}
	return err, <-seen
}

func TestServerAndClient(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if err := WriteDev(DevOptions{Dir: d, Nodes: 1, Clients: []string{"alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := Server(NodeFiles(dir, 1), VerifyClientCertIfGiven, nil)
	if err != nil {
		t.Fatal(err)
	}
	trusting, _ := Client(Files{CA: CAFile(dir)}, nil, nil)
	if err, st := handshake(t, srv, trusting); err != nil || len(st.PeerCertificates) != 0 {
		t.Fatalf("anonymous client: %v, %d client certificates", err, len(st.PeerCertificates))
	}
	alice, _ := Client(ClientFiles(dir, "alice"), nil, nil)
	if err, st := handshake(t, srv, alice); err != nil || len(st.PeerCertificates) != 1 || Principal(st.PeerCertificates[0]) != "alice" {
		t.Fatalf("alice: %v, %+v", err, st.PeerCertificates)
	}
	stranger, _ := Client(Files{CA: CAFile(other)}, nil, nil)
	if err, _ := handshake(t, srv, stranger); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
	mallory := ClientFiles(other, "alice")
	mallory.CA = CAFile(dir)
	mc, _ := Client(mallory, nil, nil)
	if err, _ := handshake(t, srv, mc); err == nil {
		t.Fatal("the server accepted a client certificate of another CA")
	}
	// Required client certificates (node-to-node).
	strict, err := Server(NodeFiles(dir, 1), RequireClientCert, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := handshake(t, strict, trusting); err == nil {
		t.Fatal("a client without a certificate passed RequireClientCert")
	}
	// TLS 1.1 is not offered.
	old := trusting.Clone()
	old.MaxVersion = tls.VersionTLS11
	old.MinVersion = tls.VersionTLS10
	if err, _ := handshake(t, srv, old); err == nil {
		t.Fatal("TLS 1.1 was accepted")
	}
	if _, err := Server(Files{Cert: NodeFiles(dir, 1).Cert}, NoClientCert, nil); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
	if _, err := Server(Files{Cert: NodeFiles(dir, 1).Cert, Key: NodeFiles(dir, 1).Key}, RequireClientCert, nil); err == nil {
		t.Fatal("requiring client certificates without a CA was accepted")
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDev(DevOptions{Dir: dir, Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := Server(NodeFiles(dir, 1), NoClientCert, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := Client(Files{CA: CAFile(dir)}, nil, nil)
	probe := func() string {
		cc := c.Clone()
		var serial string
		verify := cc.VerifyConnection
		cc.VerifyConnection = func(cs tls.ConnectionState) error {
			serial = cs.PeerCertificates[0].SerialNumber.String()
			return verify(cs)
		}
		if err, _ := handshake(t, srv, cc); err != nil {
			t.Fatal(err)
		}
		return serial
	}
	before := probe()
	time.Sleep(10 * time.Millisecond) // a different modification time
	if err := WriteDev(DevOptions{Dir: dir, Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reloadCheck)
	if got := probe(); got == before {
		t.Fatal("the new certificate was not served after the files changed")
	}
	// A broken file keeps the last good certificate.
	after := probe()
	os.WriteFile(NodeFiles(dir, 1).Cert, []byte("garbage"), 0o644)
	time.Sleep(reloadCheck)
	if got := probe(); got != after {
		t.Fatalf("serving %s after a broken reload, want the last good %s", got, after)
	}
}
