package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Mechanism is a SCRAM variant (RFC 5802, RFC 7677).
type Mechanism string

// The mechanisms, named as in SASL (and Kafka).
const (
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	ScramSHA512 Mechanism = "SCRAM-SHA-512"
)

// Mechanisms are the SCRAM mechanisms a user's password is kept for.
var Mechanisms = []Mechanism{ScramSHA256, ScramSHA512}

func (m Mechanism) hash() (func() hash.Hash, error) {
	switch m {
	case ScramSHA256:
		return sha256.New, nil
	case ScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("unknown SCRAM mechanism %q", string(m))
}

// DefaultIterations is the PBKDF2 iteration count of new credentials
// (Kafka's minimum, 4096, is RFC 7677's recommendation too).
const DefaultIterations = 4096

// Credential is what is kept of a password for one mechanism: never the
// password, only what SCRAM needs to check a proof of it (RFC 5802).
type Credential struct {
	Mechanism  Mechanism
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// NewCredential derives m's credential of password with a fresh salt.
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if iterations < DefaultIterations {
		return Credential{}, fmt.Errorf("SCRAM iterations must be at least %d", DefaultIterations)
	}
	salt := make([]byte, 24)
	rand.Read(salt)
	return deriveCredential(m, password, salt, iterations)
}

func deriveCredential(m Mechanism, password string, salt []byte, iterations int) (Credential, error) {
	h, err := m.hash()
	if err != nil {
		return Credential{}, err
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return Credential{}, err
	}
	clientKey := hmacOf(h, salted, "Client Key")
	return Credential{
		Mechanism: m, Salt: salt, Iterations: iterations,
		StoredKey: hashOf(h, clientKey), ServerKey: hmacOf(h, salted, "Server Key"),
	}, nil
}

// Verify reports whether password is the one c was derived from (for
// protocols that carry the password itself: HTTP basic, gRPC, SASL
// PLAIN). It costs c.Iterations rounds of PBKDF2.
func (c Credential) Verify(password string) bool {
	d, err := deriveCredential(c.Mechanism, password, c.Salt, c.Iterations)
	return err == nil && subtle.ConstantTimeCompare(d.StoredKey, c.StoredKey) == 1
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func hashOf(h func() hash.Hash, b []byte) []byte {
	d := h()
	d.Write(b)
	return d.Sum(nil)
}

// ScramServer is the server side of one SCRAM exchange (SASL, as Kafka's
// SaslAuthenticate carries it): client-first → server-first →
// client-final → server-final.
type ScramServer struct {
	mech   Mechanism
	lookup func(user string) (Credential, bool)

	user        string
	cred        Credential
	known       bool
	clientFirst string // client-first-message-bare
	serverFirst string
	nonce       string
	done        bool
}

// NewScramServer starts an exchange of mechanism m; lookup finds a user's
// credential for m.
func NewScramServer(m Mechanism, lookup func(user string) (Credential, bool)) (*ScramServer, error) {
	if _, err := m.hash(); err != nil {
		return nil, err
	}
	return &ScramServer{mech: m, lookup: lookup}, nil
}

// ErrAuthFailed is every failed authentication's error: which part was
// wrong (user, password, proof) is not told to the client.
var ErrAuthFailed = errors.New("authentication failed: unknown user or wrong credentials")

// First answers the client-first message.
func (s *ScramServer) First(clientFirst []byte) ([]byte, error) {
	msg := string(clientFirst)
	// gs2-header: n,, (no channel binding, no authzid) or y,,
	gs2, bare, ok := cutN(msg, ",", 2)
	if !ok || (gs2[0] != "n" && gs2[0] != "y") || gs2[1] != "" {
		return nil, errors.New("SCRAM: client-first message: channel binding and authorization ids are not supported")
	}
	attrs, err := scramAttrs(bare)
	if err != nil {
		return nil, err
	}
	if attrs["m"] != "" {
		return nil, errors.New("SCRAM: mandatory extensions are not supported")
	}
	user, err := unescapeUser(attrs["n"])
	if err != nil || user == "" || attrs["r"] == "" {
		return nil, errors.New("SCRAM: client-first message needs a user name and a nonce")
	}
	s.user, s.clientFirst = user, bare
	s.cred, s.known = s.lookup(user)
	if !s.known {
		// Go on with a made-up credential: the exchange fails at the
		// proof, as for a wrong password, so user names cannot be probed.
		salt := make([]byte, 24)
		rand.Read(salt)
		s.cred = Credential{Mechanism: s.mech, Salt: salt, Iterations: DefaultIterations}
	}
	nonce := make([]byte, 24)
	rand.Read(nonce)
	s.nonce = attrs["r"] + base64.RawStdEncoding.EncodeToString(nonce)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

// Final checks the client-final message's proof and returns the
// server-final message and the authenticated user.
func (s *ScramServer) Final(clientFinal []byte) ([]byte, string, error) {
	if s.serverFirst == "" || s.done {
		return nil, "", errors.New("SCRAM: client-final message out of order")
	}
	s.done = true
	msg := string(clientFinal)
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, "", errors.New("SCRAM: client-final message has no proof")
	}
	withoutProof := msg[:i]
	attrs, err := scramAttrs(msg)
	if err != nil {
		return nil, "", err
	}
	if attrs["r"] != s.nonce {
		return nil, "", errors.New("SCRAM: nonce mismatch")
	}
	if attrs["c"] != "biws" && attrs["c"] != "eSws" { // base64 of "n,," and "y,,"
		return nil, "", errors.New("SCRAM: channel binding is not supported")
	}
	proof, err := base64.StdEncoding.DecodeString(attrs["p"])
	if err != nil {
		return nil, "", errors.New("SCRAM: bad proof encoding")
	}
	h, _ := s.mech.hash()
	authMessage := s.clientFirst + "," + s.serverFirst + "," + withoutProof
	sig := hmacOf(h, s.cred.StoredKey, authMessage)
	if !s.known || len(proof) != len(sig) || len(s.cred.StoredKey) != len(sig) {
		return nil, "", ErrAuthFailed
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if subtle.ConstantTimeCompare(hashOf(h, clientKey), s.cred.StoredKey) != 1 {
		return nil, "", ErrAuthFailed
	}
	serverSig := hmacOf(h, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), s.user, nil
}

// cutN splits s at its first n separators: n parts and the rest.
func cutN(s, sep string, n int) ([]string, string, bool) {
	var parts []string
	for range n {
		before, after, ok := strings.Cut(s, sep)
		if !ok {
			return nil, "", false
		}
		parts = append(parts, before)
		s = after
	}
	return parts, s, true
}

// scramAttrs parses "a=v,b=w" (values may contain '=').
func scramAttrs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if len(kv) < 2 || kv[1] != '=' {
			return nil, fmt.Errorf("SCRAM: malformed attribute %q", kv)
		}
		out[kv[:1]] = kv[2:]
	}
	return out, nil
}

// unescapeUser undoes SCRAM's saslname escaping (=2C is ',', =3D '=').
func unescapeUser(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("SCRAM: bad escape in the user name")
		}
		i += 2
	}
	return b.String(), nil
}
