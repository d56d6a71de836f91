package broker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/internal/auth"
	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// Principal is who a request comes from, as Authenticate established it.
// The zero Principal is an anonymous request.
type Principal struct {
	// Name identifies the principal ("" for an anonymous request).
	Name string
	// Via says how it authenticated: "password", "token", "certificate"
	// ("" when anonymous).
	Via string
	// Addr is the client's address as the adapter saw it (host:port), for
	// ACLs by host and the audit log.
	Addr string
}

func (p Principal) host() string {
	if h, _, err := net.SplitHostPort(p.Addr); err == nil {
		return h
	}
	return p.Addr
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p: the adapter that authenticated a
// request puts its principal on the context it calls the broker with.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries (the zero Principal
// when none).
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// The authorization vocabulary is the auth package's.
type (
	Action       = auth.Action
	ResourceKind = auth.ResourceKind
	Resource     = auth.Resource
)

// The actions and resource kinds.
const (
	ActionRead     = auth.ActionRead
	ActionWrite    = auth.ActionWrite
	ActionCreate   = auth.ActionCreate
	ActionDelete   = auth.ActionDelete
	ActionAlter    = auth.ActionAlter
	ActionDescribe = auth.ActionDescribe
	ActionAll      = auth.ActionAll // in an ACL: every action

	ResourceTopic   = auth.ResourceTopic
	ResourceGroup   = auth.ResourceGroup
	ResourceCluster = auth.ResourceCluster
	// ResourceTransactionalID is a Kafka transactional id.
	ResourceTransactionalID = auth.ResourceTransactionalID

	// Wildcard, as an ACL's principal, name or host, matches every one.
	Wildcard = auth.Wildcard
)

// Authorizer decides whether a principal may do an action on a resource.
// The broker asks it before it acts on every request, whatever protocol
// the request came by; requests other nodes relay were authorized where
// they arrived.
type Authorizer interface {
	// Authorize returns nil when p may do a on r, else why not. It is
	// called on every request: it must be fast, safe for concurrent use,
	// and do no I/O.
	Authorize(p Principal, a Action, r Resource) error
}

// AllowAll is the Authorizer of a node without access control: it allows
// everything.
type AllowAll struct{}

// Authorize allows.
func (AllowAll) Authorize(Principal, Action, Resource) error { return nil }

// AuthConfig turns on access control.
type AuthConfig struct {
	// Required: every request must come from an authenticated principal
	// (a password, an API token or a client certificate), and the
	// cluster's ACLs decide what it may do. Off (the default), every
	// request is allowed, authenticated or not.
	Required bool
	// Superusers may do anything, whatever the ACLs say.
	Superusers []string
	// BootstrapUser, with BootstrapPassword, is created at start if it
	// does not exist yet (someone must be able to log in the first time;
	// name it a superuser too).
	BootstrapUser, BootstrapPassword string
}

// Credentials are what a client presented to authenticate.
type Credentials struct {
	// User and Password: a user's password (checked against its SCRAM
	// credential).
	User, Password string
	// Token is an API token.
	Token string
	// CertName is the principal a client certificate, verified by the
	// listener against its client CA, names ("" without one).
	CertName string
	// Addr is the client's address.
	Addr string
}

// ParseAuthorization reads an authorization header ("Basic
// base64(user:password)" or "Bearer <API token>", as HTTP and gRPC
// metadata carry it) into c.
func ParseAuthorization(h string, c Credentials) (Credentials, error) {
	scheme, value, _ := strings.Cut(strings.TrimSpace(h), " ")
	value = strings.TrimSpace(value)
	switch strings.ToLower(scheme) {
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return c, errorf(ErrUnauthenticated, "malformed basic credentials")
		}
		user, pw, ok := strings.Cut(string(raw), ":")
		if !ok || user == "" {
			return c, errorf(ErrUnauthenticated, "malformed basic credentials: user:password expected")
		}
		c.User, c.Password = user, pw
	case "bearer":
		if value == "" {
			return c, errorf(ErrUnauthenticated, "empty bearer token")
		}
		c.Token = value
	default:
		return c, errorf(ErrUnauthenticated, "authorization scheme %q: Basic or Bearer expected", scheme)
	}
	return c, nil
}

// Authorize asks whether the request's principal may do a on r (for
// what the adapters and the server guard themselves: introspection,
// metrics, profiles). Errors: ErrUnauthenticated, ErrPermissionDenied.
func (b *Broker) Authorize(ctx context.Context, a Action, r Resource) error {
	return b.authorize(ctx, a, r)
}

// secState is the access-control state in force: rules from the
// metadata's ACLs, users, tokens. Rebuilt on every change (immutable).
type secState struct {
	rules  *auth.Rules
	users  map[string][]auth.Credential
	tokens map[string]auth.Token
	gen    uint64
}

// authn is the broker's authentication state.
type authn struct {
	state atomic.Pointer[secState]
	// quotas meters principals (rates from the metadata).
	quotas *auth.Quotas

	// verified caches passwords proven right (SCRAM key stretching costs
	// milliseconds; a REST client authenticates every request): keyed by
	// an HMAC of user and password under a key of this process, valid for
	// the state's generation it was proven in.
	mu       sync.Mutex
	cacheKey []byte
	verified map[[32]byte]uint64
}

// maxVerified bounds the cache of proven passwords.
const maxVerified = 10000

func newAuthn() *authn {
	a := &authn{quotas: auth.NewQuotas(), cacheKey: make([]byte, 32), verified: map[[32]byte]uint64{}}
	rand.Read(a.cacheKey)
	a.state.Store(&secState{rules: auth.New(nil, nil)})
	return a
}

// refreshSecurity rebuilds the access-control state from the metadata.
func (b *Broker) refreshSecurity() {
	s := b.cl.Meta().Security()
	old := b.authn.state.Load()
	b.authn.state.Store(&secState{
		rules: auth.New(b.cfg.Auth.Superusers, s.ACLs), users: s.Users, tokens: s.Tokens, gen: old.gen + 1,
	})
	b.authn.quotas.Set(s.Quotas)
}

// bootstrapUser creates Config.Auth.BootstrapUser if it does not exist,
// retrying until the metadata group takes the command or the broker
// stops.
func (b *Broker) bootstrapUser() {
	defer b.wg.Done()
	name := b.cfg.Auth.BootstrapUser
	creds, err := credentialsOf(b.cfg.Auth.BootstrapPassword)
	if err != nil {
		b.log.Error("the bootstrap user cannot be created", "user", name, "err", err)
		return
	}
	for {
		if _, ok := b.authn.state.Load().users[name]; ok {
			b.userReady.Store(true)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := b.runSecurity(WithPrincipal(ctx, Principal{Name: "(bootstrap)"}), "user created",
			&pb.Command{Kind: &pb.Command_PutUser{PutUser: &pb.PutUser{Name: name, Credentials: creds, Create: true}}}, "user", name)
		cancel()
		if err == nil || errors.Is(err, ErrAlreadyExists) {
			b.userReady.Store(true)
			return
		}
		select {
		case <-b.stop:
			return
		case <-time.After(metadataRetry):
		}
	}
}

// AuthRequired reports whether requests must be authenticated.
func (b *Broker) AuthRequired() bool { return b.cfg.Auth.Required }

// Authenticate establishes who presented c: a token, else a user's
// password, else a client certificate's name. Without any, the principal
// is anonymous, which is an error (ErrUnauthenticated) when
// authentication is required. Wrong credentials are an error whether or
// not it is required.
func (b *Broker) Authenticate(ctx context.Context, c Credentials) (Principal, error) {
	p, err := b.authenticate(c)
	if err != nil {
		b.m.authFailures.Inc()
		b.audit.Warn("authentication failed", "addr", c.Addr, "user", c.User, "token", tokenID(c.Token), "result", "denied", "err", err)
		return Principal{Addr: c.Addr}, err
	}
	return p, nil
}

func tokenID(t string) string {
	if t == "" {
		return ""
	}
	id, _, err := auth.ParseToken(t)
	if err != nil {
		return "(malformed)"
	}
	return id
}

func (b *Broker) authenticate(c Credentials) (Principal, error) {
	st := b.authn.state.Load()
	switch {
	case c.Token != "":
		id, secret, err := auth.ParseToken(c.Token)
		if err != nil {
			return Principal{}, errorf(ErrUnauthenticated, "%v", err)
		}
		t, ok := st.tokens[id]
		if !ok || !t.Check(secret, time.Now()) {
			return Principal{}, errorf(ErrUnauthenticated, "the API token is unknown, revoked or expired")
		}
		return Principal{Name: t.Principal, Via: "token", Addr: c.Addr}, nil
	case c.User != "":
		if !b.checkPassword(st, c.User, c.Password) {
			return Principal{}, errorf(ErrUnauthenticated, "unknown user or wrong password")
		}
		return Principal{Name: c.User, Via: "password", Addr: c.Addr}, nil
	case c.CertName != "":
		return Principal{Name: c.CertName, Via: "certificate", Addr: c.Addr}, nil
	case b.cfg.Auth.Required:
		return Principal{}, errorf(ErrUnauthenticated, "authentication required: a user and password, an API token or a client certificate")
	}
	return Principal{Addr: c.Addr}, nil
}

// checkPassword checks a password against the user's first credential,
// through the cache of proven ones.
func (b *Broker) checkPassword(st *secState, user, password string) bool {
	creds := st.users[user]
	if len(creds) == 0 {
		// Spend the same work as for a real user: timing does not tell
		// whether a user exists.
		dummy.Verify(password)
		return false
	}
	m := hmac.New(sha256.New, b.authn.cacheKey)
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(password))
	var key [32]byte
	copy(key[:], m.Sum(nil))
	a := b.authn
	a.mu.Lock()
	gen, ok := a.verified[key]
	a.mu.Unlock()
	if ok && gen == st.gen {
		return true
	}
	if !creds[0].Verify(password) {
		return false
	}
	a.mu.Lock()
	if len(a.verified) >= maxVerified {
		clear(a.verified)
	}
	a.verified[key] = st.gen
	a.mu.Unlock()
	return true
}

// dummy is a credential no password matches, verified for unknown users.
var dummy, _ = auth.NewCredential(auth.ScramSHA256, "", 0)

// authorize asks whether the request's principal may do a on r: nil, or
// an ErrPermissionDenied (ErrUnauthenticated for an anonymous request when
// authentication is required).
func (b *Broker) authorize(ctx context.Context, a Action, r Resource) error {
	p := PrincipalFrom(ctx)
	var err error
	if b.cfg.Auth.Required {
		if p.Name == "" {
			return errorf(ErrUnauthenticated, "authentication required")
		}
		err = b.authn.state.Load().rules.Authorize(p.Name, a, r, p.host())
	} else {
		err = b.cfg.Authorizer.Authorize(p, a, r)
	}
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("%s %q", r.Kind, r.Name)
	if r.Kind == ResourceCluster {
		what = "the cluster"
	}
	b.m.authDenials.Inc()
	b.audit.Warn("request denied", "principal", p.Name, "addr", p.Addr, "action", a.String(), "resource", r.Kind.String(), "name", r.Name, "result", "denied", "why", err.Error())
	return errorf(ErrPermissionDenied, "%s may not %s %s: %v", principalName(ctx), a, what, err)
}

// requireAuthenticated refuses an anonymous request when authentication
// is required.
func (b *Broker) requireAuthenticated(ctx context.Context) error {
	if b.cfg.Auth.Required && PrincipalFrom(ctx).Name == "" {
		return errorf(ErrUnauthenticated, "authentication required")
	}
	return nil
}

// allowed is authorize without the error and its audit line (to filter
// lists: what a principal may not describe is left out, not refused).
func (b *Broker) allowed(ctx context.Context, a Action, r Resource) bool {
	p := PrincipalFrom(ctx)
	if b.cfg.Auth.Required {
		return p.Name != "" && b.authn.state.Load().rules.Authorize(p.Name, a, r, p.host()) == nil
	}
	return b.cfg.Authorizer.Authorize(p, a, r) == nil
}

func principalName(ctx context.Context) string {
	if n := PrincipalFrom(ctx).Name; n != "" {
		return fmt.Sprintf("principal %q", n)
	}
	return "an anonymous client"
}

func topicResource(name string) Resource { return Resource{Kind: ResourceTopic, Name: name} }
func groupResource(name string) Resource { return Resource{Kind: ResourceGroup, Name: name} }

var clusterResource = Resource{Kind: ResourceCluster}

// SCRAMExchange is the server side of one SASL SCRAM exchange (RFC
// 5802): client-first → server-first, client-final → server-final and
// the authenticated principal.
type SCRAMExchange interface {
	First(clientFirst []byte) ([]byte, error)
	// Final checks the client's proof. Errors: ErrUnauthenticated.
	Final(clientFinal []byte) ([]byte, Principal, error)
}

// StartSCRAM begins a SCRAM exchange of mechanism ("SCRAM-SHA-256" or
// "SCRAM-SHA-512") against the users' stored credentials, for a client
// at addr. Errors: ErrInvalidArgument for another mechanism.
func (b *Broker) StartSCRAM(mechanism, addr string) (SCRAMExchange, error) {
	m := auth.Mechanism(mechanism)
	st := b.authn.state.Load()
	srv, err := auth.NewScramServer(m, func(user string) (auth.Credential, bool) {
		for _, c := range st.users[user] {
			if c.Mechanism == m {
				return c, true
			}
		}
		return auth.Credential{}, false
	})
	if err != nil {
		return nil, errorf(ErrInvalidArgument, "%v", err)
	}
	return &scramExchange{b: b, srv: srv, addr: addr}, nil
}

type scramExchange struct {
	b    *Broker
	srv  *auth.ScramServer
	addr string
	user string
}

func (x *scramExchange) First(clientFirst []byte) ([]byte, error) {
	out, err := x.srv.First(clientFirst)
	if err != nil {
		x.fail(err)
		return nil, errorf(ErrUnauthenticated, "%v", err)
	}
	return out, nil
}

func (x *scramExchange) Final(clientFinal []byte) ([]byte, Principal, error) {
	out, user, err := x.srv.Final(clientFinal)
	if err != nil {
		x.fail(err)
		return nil, Principal{Addr: x.addr}, errorf(ErrUnauthenticated, "%v", err)
	}
	return out, Principal{Name: user, Via: "scram", Addr: x.addr}, nil
}

func (x *scramExchange) fail(err error) {
	x.b.m.authFailures.Inc()
	x.b.audit.Warn("authentication failed", "addr", x.addr, "mechanism", "SCRAM", "result", "denied", "err", err)
}
