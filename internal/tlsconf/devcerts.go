package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// DevOptions says which certificates WriteDev writes.
type DevOptions struct {
	// Dir receives the files (created if missing). A CA already there
	// (ca.crt, ca.key) signs the new certificates; else one is made.
	Dir string
	// Nodes: node-1 ... node-N certificates (node identity, server and
	// client use).
	Nodes int
	// Clients: a client-<name> certificate for each principal name.
	Clients []string
	// Hosts are the names and addresses the node certificates are valid
	// for (default localhost and 127.0.0.1).
	Hosts []string
	// Validity of the new certificates (default one year).
	Validity time.Duration
}

// CAFile is the CA certificate in dir.
func CAFile(dir string) string { return filepath.Join(dir, "ca.crt") }

// NodeFiles are node id's certificate and key (and the CA) in dir.
func NodeFiles(dir string, id uint64) Files {
	base := filepath.Join(dir, fmt.Sprintf("node-%d", id))
	return Files{Cert: base + ".crt", Key: base + ".key", CA: CAFile(dir)}
}

// ClientFiles are principal name's client certificate and key (and the
// CA) in dir.
func ClientFiles(dir, name string) Files {
	base := filepath.Join(dir, "client-"+name)
	return Files{Cert: base + ".crt", Key: base + ".key", CA: CAFile(dir)}
}

// WriteDev writes a CA and node and client certificates for local use and
// tests: ECDSA P-256 keys, readable by the owner only. They are not for
// production, where the operator's PKI issues them (see docs/SECURITY.md
// for what a node's certificate must carry).
func WriteDev(o DevOptions) error {
	if o.Validity == 0 {
		o.Validity = 365 * 24 * time.Hour
	}
	if len(o.Hosts) == 0 {
		o.Hosts = []string{"localhost", "127.0.0.1"}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	ca, caKey, err := loadOrMakeCA(o.Dir, o.Validity)
	if err != nil {
		return err
	}
	for id := 1; id <= o.Nodes; id++ {
		tmpl := leafTemplate(fmt.Sprintf("hermes node %d", id), o.Validity)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.URIs = []*url.URL{NodeURI(uint64(id))}
		addHosts(tmpl, o.Hosts)
		if err := writeLeaf(NodeFiles(o.Dir, uint64(id)), tmpl, ca, caKey); err != nil {
			return err
		}
	}
	for _, name := range o.Clients {
		if name == "" {
			return errors.New("tls: a client certificate needs a principal name")
		}
		tmpl := leafTemplate(name, o.Validity)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		if err := writeLeaf(ClientFiles(o.Dir, name), tmpl, ca, caKey); err != nil {
			return err
		}
	}
	return nil
}

func addHosts(t *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // the system's random source failed
	}
	return n
}

func leafTemplate(cn string, validity time.Duration) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Hermes development"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func loadOrMakeCA(dir string, validity time.Duration) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := CAFile(dir), filepath.Join(dir, "ca.key")
	if certPEM, err := os.ReadFile(certPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: %s exists but its key does not: %w", certPath, err)
		}
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, fmt.Errorf("tls: %s or %s is not PEM", certPath, keyPath)
		}
		cert, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, nil, err
		}
		key, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: %s: %w", keyPath, err)
		}
		return cert, key, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Hermes development CA", Organization: []string{"Hermes development"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	if err := writePEM(keyPath, "EC PRIVATE KEY", mustEC(key), 0o600); err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func mustEC(k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return b
}

func writeLeaf(f Files, tmpl, ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writePEM(f.Key, "EC PRIVATE KEY", mustEC(key), 0o600); err != nil {
		return err
	}
	return writePEM(f.Cert, "CERTIFICATE", der, 0o644)
}

// writePEM replaces path atomically (a listener reloading it never reads
// half a file).
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
