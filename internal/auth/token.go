package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// An API token is "hmt_<id>_<secret>": the id (16 hex digits) names it,
// for listing and revoking; the secret (32 random bytes, base64url) is
// shown once, at creation. Only the secret's SHA-256 is kept: 256 random
// bits need no salt or key stretching.
const tokenPrefix = "hmt_"

// Token is what is kept of an API token.
type Token struct {
	ID        string
	Principal string
	// Hash is the SHA-256 of the secret.
	Hash        []byte
	Created     time.Time
	Expires     time.Time // zero: never
	Description string
}

// NewToken makes a token for principal: what to keep, and the token
// string to hand to its user.
func NewToken(principal string, ttl time.Duration, description string, now time.Time) (Token, string) {
	id := make([]byte, 8)
	rand.Read(id)
	secret := make([]byte, 32)
	rand.Read(secret)
	t := Token{ID: hex.EncodeToString(id), Principal: principal, Created: now, Description: description}
	if ttl > 0 {
		t.Expires = now.Add(ttl)
	}
	s := base64.RawURLEncoding.EncodeToString(secret)
	sum := sha256.Sum256([]byte(s))
	t.Hash = sum[:]
	return t, tokenPrefix + t.ID + "_" + s
}

// ParseToken splits a token string into its id and secret.
func ParseToken(s string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return "", "", errors.New("not a Hermes API token")
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || len(id) != 16 || secret == "" {
		return "", "", errors.New("not a Hermes API token")
	}
	return id, secret, nil
}

// Check reports whether secret is t's and t is valid at now.
func (t *Token) Check(secret string, now time.Time) bool {
	sum := sha256.Sum256([]byte(secret))
	ok := subtle.ConstantTimeCompare(sum[:], t.Hash) == 1
	return ok && (t.Expires.IsZero() || now.Before(t.Expires))
}
