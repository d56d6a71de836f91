package brokertest

import (
	"context"
	"sort"
	"time"

	"github.com/hermes-mq/hermes/internal/auth"
	"github.com/hermes-mq/hermes/internal/broker"
)

// The Fake's access control: users with passwords in clear, tokens by
// their string, ACLs and quotas kept as given. It authenticates as the
// real broker does (token, else password, else certificate name) and
// does not authorize: adapters' tests check what they pass and map.

// fakeSec is the Fake's access-control state. Lock: Fake.mu.
type fakeSec struct {
	required  bool
	passwords map[string]string
	tokens    map[string]broker.TokenInfo // by token string
	acls      []broker.ACL
	quotas    map[string]broker.Quota
}

func (f *Fake) sec() *fakeSec {
	if f.security == nil {
		f.security = &fakeSec{passwords: map[string]string{}, tokens: map[string]broker.TokenInfo{}, quotas: map[string]broker.Quota{}}
	}
	return f.security
}

// RequireAuth makes the Fake refuse anonymous requests to Authenticate.
func (f *Fake) RequireAuth(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sec().required = on
}

func (f *Fake) Authenticate(ctx context.Context, c broker.Credentials) (broker.Principal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Authenticate"); err != nil {
		return broker.Principal{}, err
	}
	s := f.sec()
	switch {
	case c.Token != "":
		t, ok := s.tokens[c.Token]
		if !ok {
			return broker.Principal{}, broker.Errorf(broker.ErrUnauthenticated, "unknown token")
		}
		return broker.Principal{Name: t.Principal, Via: "token", Addr: c.Addr}, nil
	case c.User != "":
		if pw, ok := s.passwords[c.User]; !ok || pw != c.Password {
			return broker.Principal{}, broker.Errorf(broker.ErrUnauthenticated, "unknown user or wrong password")
		}
		return broker.Principal{Name: c.User, Via: "password", Addr: c.Addr}, nil
	case c.CertName != "":
		return broker.Principal{Name: c.CertName, Via: "certificate", Addr: c.Addr}, nil
	case s.required:
		return broker.Principal{}, broker.Errorf(broker.ErrUnauthenticated, "authentication required")
	}
	return broker.Principal{Addr: c.Addr}, nil
}

func (f *Fake) AuthRequired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sec().required
}

// Authorize allows authenticated principals when authentication is
// required, everyone otherwise (Errs["Authorize"] overrides).
func (f *Fake) Authorize(ctx context.Context, a broker.Action, r broker.Resource) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Authorize"); err != nil {
		return err
	}
	if f.sec().required && broker.PrincipalFrom(ctx).Name == "" {
		return broker.Errorf(broker.ErrUnauthenticated, "authentication required")
	}
	return nil
}

func (f *Fake) WhoAmI(ctx context.Context) broker.Principal { return broker.PrincipalFrom(ctx) }

func (f *Fake) CreateUser(ctx context.Context, name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "CreateUser"); err != nil {
		return err
	}
	if _, ok := f.sec().passwords[name]; ok {
		return broker.Errorf(broker.ErrAlreadyExists, "user %q", name)
	}
	f.sec().passwords[name] = password
	return nil
}

func (f *Fake) SetPassword(ctx context.Context, name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "SetPassword"); err != nil {
		return err
	}
	if _, ok := f.sec().passwords[name]; !ok {
		return broker.Errorf(broker.ErrNotFound, "user %q", name)
	}
	f.sec().passwords[name] = password
	return nil
}

func (f *Fake) DeleteUser(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "DeleteUser"); err != nil {
		return err
	}
	if _, ok := f.sec().passwords[name]; !ok {
		return broker.Errorf(broker.ErrNotFound, "user %q", name)
	}
	delete(f.sec().passwords, name)
	return nil
}

func (f *Fake) Users(ctx context.Context) ([]broker.UserInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Users"); err != nil {
		return nil, err
	}
	var out []broker.UserInfo
	for n := range f.sec().passwords {
		out = append(out, broker.UserInfo{Name: n, Mechanisms: []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) CreateToken(ctx context.Context, principal string, ttl time.Duration, description string) (broker.TokenInfo, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "CreateToken"); err != nil {
		return broker.TokenInfo{}, "", err
	}
	if principal == "" {
		principal = broker.PrincipalFrom(ctx).Name
	}
	id := time.Now().Format("150405.000000000")
	t := broker.TokenInfo{ID: id, Principal: principal, Created: time.Now(), Description: description}
	if ttl > 0 {
		t.Expires = t.Created.Add(ttl)
	}
	secret := "hmt_fake_" + id
	f.sec().tokens[secret] = t
	return t, secret, nil
}

func (f *Fake) RevokeToken(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "RevokeToken"); err != nil {
		return err
	}
	for s, t := range f.sec().tokens {
		if t.ID == id {
			delete(f.sec().tokens, s)
			return nil
		}
	}
	return broker.Errorf(broker.ErrNotFound, "token %s", id)
}

func (f *Fake) Tokens(ctx context.Context) ([]broker.TokenInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Tokens"); err != nil {
		return nil, err
	}
	var out []broker.TokenInfo
	for _, t := range f.sec().tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *Fake) AddACLs(ctx context.Context, acls []broker.ACL) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "AddACLs"); err != nil {
		return err
	}
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return broker.Errorf(broker.ErrInvalidArgument, "%v", err)
		}
	}
	f.sec().acls = append(f.sec().acls, acls...)
	return nil
}

func (f *Fake) RemoveACLs(ctx context.Context, filters []broker.ACLFilter) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "RemoveACLs"); err != nil {
		return 0, err
	}
	s := f.sec()
	kept, n := s.acls[:0], 0
	for _, a := range s.acls {
		matched := false
		for _, flt := range filters {
			matched = matched || flt.Matches(a)
		}
		if matched {
			n++
		} else {
			kept = append(kept, a)
		}
	}
	s.acls = kept
	return n, nil
}

func (f *Fake) ACLs(ctx context.Context, filter broker.ACLFilter) ([]broker.ACL, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "ACLs"); err != nil {
		return nil, err
	}
	var out []broker.ACL
	for _, a := range f.sec().acls {
		if filter.Matches(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (f *Fake) SetQuota(ctx context.Context, principal string, q broker.Quota) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "SetQuota"); err != nil {
		return err
	}
	if q.IsZero() {
		delete(f.sec().quotas, principal)
	} else {
		f.sec().quotas[principal] = q
	}
	return nil
}

func (f *Fake) Quotas(ctx context.Context) (map[string]broker.Quota, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Quotas"); err != nil {
		return nil, err
	}
	out := map[string]broker.Quota{}
	for p, q := range f.sec().quotas {
		out[p] = q
	}
	return out, nil
}

// StartSCRAM runs a real SCRAM exchange against the Fake's passwords.
func (f *Fake) StartSCRAM(mechanism, addr string) (broker.SCRAMExchange, error) {
	m := auth.Mechanism(mechanism)
	srv, err := auth.NewScramServer(m, func(user string) (auth.Credential, bool) {
		f.mu.Lock()
		pw, ok := f.sec().passwords[user]
		f.mu.Unlock()
		if !ok {
			return auth.Credential{}, false
		}
		c, err := auth.NewCredential(m, pw, 4096)
		return c, err == nil
	})
	if err != nil {
		return nil, broker.Errorf(broker.ErrInvalidArgument, "%v", err)
	}
	return &fakeSCRAM{srv: srv, addr: addr}, nil
}

type fakeSCRAM struct {
	srv  *auth.ScramServer
	addr string
}

func (x *fakeSCRAM) First(b []byte) ([]byte, error) {
	out, err := x.srv.First(b)
	if err != nil {
		return nil, broker.Errorf(broker.ErrUnauthenticated, "%v", err)
	}
	return out, nil
}

func (x *fakeSCRAM) Final(b []byte) ([]byte, broker.Principal, error) {
	out, user, err := x.srv.Final(b)
	if err != nil {
		return nil, broker.Principal{}, broker.Errorf(broker.ErrUnauthenticated, "%v", err)
	}
	return out, broker.Principal{Name: user, Via: "scram", Addr: x.addr}, nil
}
