package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermes-mq/hermes/internal/auth"
	"github.com/hermes-mq/hermes/internal/cluster"
	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// The access-control administration: users, API tokens, ACLs, quotas,
// all kept in the metadata group (so every node enforces the same) and
// changed only by principals that may alter the cluster (a user may also
// change its own password and manage its own tokens).

// UserInfo describes a user: never its credentials.
type UserInfo struct {
	Name       string
	Mechanisms []string
}

// TokenInfo describes an API token: never its secret.
type TokenInfo struct {
	ID          string
	Principal   string
	Created     time.Time
	Expires     time.Time // zero: never
	Description string
}

// ACL and ACLFilter are the auth package's.
type (
	ACL       = auth.ACL
	ACLFilter = auth.Filter
	Quota     = auth.Quota
)

// maxNameBytes bounds user and principal names.
const maxNameBytes = 255

func checkPrincipalName(name string) error {
	switch {
	case name == "" || len(name) > maxNameBytes || !utf8.ValidString(name):
		return errorf(ErrInvalidArgument, "a principal's name is 1 to %d bytes of UTF-8", maxNameBytes)
	case name == auth.Wildcard || strings.ContainsAny(name, ",\x00"):
		return errorf(ErrInvalidArgument, "principal name %q: '*', ',' and NUL are not allowed", name)
	}
	return nil
}

// minPasswordBytes is the shortest password accepted.
const minPasswordBytes = 8

func credentialsOf(password string) ([]*pb.ScramCredential, error) {
	if len(password) < minPasswordBytes {
		return nil, errorf(ErrInvalidArgument, "a password needs at least %d bytes", minPasswordBytes)
	}
	var out []*pb.ScramCredential
	for _, m := range auth.Mechanisms {
		c, err := auth.NewCredential(m, password, 0)
		if err != nil {
			return nil, errorf(ErrInvalidArgument, "%v", err)
		}
		out = append(out, cluster.CredentialProto(c))
	}
	return out, nil
}

// runSecurity runs an access-control command through the metadata group
// and logs it in the audit log.
func (b *Broker) runSecurity(ctx context.Context, what string, cmd *pb.Command, attrs ...any) (cluster.Change, error) {
	ch, err := b.cl.Meta().Run(ctx, cmd)
	b.auditChange(ctx, what, err, attrs...)
	switch {
	case err == nil:
		return ch, nil
	case errors.Is(err, cluster.ErrExists):
		return ch, errorf(ErrAlreadyExists, "%v", err)
	case errors.Is(err, cluster.ErrNotFound):
		return ch, errorf(ErrNotFound, "%v", err)
	case errors.Is(err, cluster.ErrBadCommand):
		return ch, errorf(ErrInvalidArgument, "%v", err)
	}
	return ch, &kindError{kind: ErrUnavailable, retryAfter: metadataRetry, msg: fmt.Sprintf("%s: %v", what, err)}
}

// auditChange logs an administrative change in the audit log.
func (b *Broker) auditChange(ctx context.Context, what string, err error, attrs ...any) {
	p := PrincipalFrom(ctx)
	result := "ok"
	if err != nil {
		result = "failed"
		attrs = append(attrs, "err", err.Error())
	}
	b.audit.Info(what, append([]any{"principal", p.Name, "addr", p.Addr, "result", result}, attrs...)...)
}

// CreateUser creates a user with a password (kept as SCRAM-SHA-256 and
// SCRAM-SHA-512 credentials). Errors: ErrInvalidArgument,
// ErrAlreadyExists.
func (b *Broker) CreateUser(ctx context.Context, name, password string) error {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return err
	}
	if err := checkPrincipalName(name); err != nil {
		return err
	}
	creds, err := credentialsOf(password)
	if err != nil {
		return err
	}
	_, err = b.runSecurity(ctx, "user created", &pb.Command{Kind: &pb.Command_PutUser{PutUser: &pb.PutUser{Name: name, Credentials: creds, Create: true}}}, "user", name)
	return err
}

// SetPassword changes a user's password: the user itself, or a principal
// that may alter the cluster. Errors: ErrInvalidArgument, ErrNotFound.
func (b *Broker) SetPassword(ctx context.Context, name, password string) error {
	if PrincipalFrom(ctx).Name != name {
		if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
			return err
		}
	}
	creds, err := credentialsOf(password)
	if err != nil {
		return err
	}
	_, err = b.runSecurity(ctx, "user password changed", &pb.Command{Kind: &pb.Command_PutUser{PutUser: &pb.PutUser{Name: name, Credentials: creds}}}, "user", name)
	return err
}

// DeleteUser deletes a user and revokes its API tokens. Errors:
// ErrNotFound.
func (b *Broker) DeleteUser(ctx context.Context, name string) error {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return err
	}
	_, err := b.runSecurity(ctx, "user deleted", &pb.Command{Kind: &pb.Command_DeleteUser{DeleteUser: &pb.DeleteUser{Name: name}}}, "user", name)
	return err
}

// Users lists the users, sorted by name.
func (b *Broker) Users(ctx context.Context) ([]UserInfo, error) {
	if err := b.authorize(ctx, ActionDescribe, clusterResource); err != nil {
		return nil, err
	}
	st := b.authn.state.Load()
	out := make([]UserInfo, 0, len(st.users))
	for name, creds := range st.users {
		u := UserInfo{Name: name}
		for _, c := range creds {
			u.Mechanisms = append(u.Mechanisms, string(c.Mechanism))
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b UserInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// maxTokenTTL bounds an API token's life (0: no expiry is allowed too).
const maxTokenTTL = 10 * 365 * 24 * time.Hour

// CreateToken creates an API token for principal (the caller's own, or
// anyone's for a principal that may alter the cluster); ttl 0 never
// expires. It returns the token's description and the token itself,
// which is shown only now. Errors: ErrInvalidArgument.
func (b *Broker) CreateToken(ctx context.Context, principal string, ttl time.Duration, description string) (TokenInfo, string, error) {
	caller := PrincipalFrom(ctx).Name
	if principal == "" {
		principal = caller
	}
	if principal != caller || caller == "" {
		if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
			return TokenInfo{}, "", err
		}
	}
	if err := checkPrincipalName(principal); err != nil {
		return TokenInfo{}, "", err
	}
	if ttl < 0 || ttl > maxTokenTTL {
		return TokenInfo{}, "", errorf(ErrInvalidArgument, "a token's time to live is 0 (none) to %v", maxTokenTTL)
	}
	if len(description) > 1024 {
		return TokenInfo{}, "", errorf(ErrInvalidArgument, "a token's description is at most 1024 bytes")
	}
	t, secret := auth.NewToken(principal, ttl, description, time.Now())
	_, err := b.runSecurity(ctx, "token created", &pb.Command{Kind: &pb.Command_PutToken{PutToken: cluster.TokenProto(t)}}, "token", t.ID, "for", principal)
	if err != nil {
		return TokenInfo{}, "", err
	}
	return tokenInfo(t), secret, nil
}

func tokenInfo(t auth.Token) TokenInfo {
	return TokenInfo{ID: t.ID, Principal: t.Principal, Created: t.Created, Expires: t.Expires, Description: t.Description}
}

// RevokeToken revokes an API token: the caller's own, or any for a
// principal that may alter the cluster. Errors: ErrNotFound.
func (b *Broker) RevokeToken(ctx context.Context, id string) error {
	t, ok := b.authn.state.Load().tokens[id]
	if !ok || t.Principal != PrincipalFrom(ctx).Name || t.Principal == "" {
		if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
			return err
		}
	}
	_, err := b.runSecurity(ctx, "token revoked", &pb.Command{Kind: &pb.Command_RevokeToken{RevokeToken: &pb.RevokeToken{Id: id}}}, "token", id)
	return err
}

// Tokens lists the API tokens: all of them for a principal that may
// describe the cluster, else the caller's own; sorted by creation.
func (b *Broker) Tokens(ctx context.Context) ([]TokenInfo, error) {
	all := b.allowed(ctx, ActionDescribe, clusterResource)
	me := PrincipalFrom(ctx).Name
	if !all && me == "" {
		return nil, b.authorize(ctx, ActionDescribe, clusterResource)
	}
	var out []TokenInfo
	for _, t := range b.authn.state.Load().tokens {
		if all || t.Principal == me {
			out = append(out, tokenInfo(t))
		}
	}
	slices.SortFunc(out, func(a, b TokenInfo) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// AddACLs adds ACLs (those already there are kept once). Errors:
// ErrInvalidArgument.
func (b *Broker) AddACLs(ctx context.Context, acls []ACL) error {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return err
	}
	if len(acls) == 0 {
		return errorf(ErrInvalidArgument, "no ACL to add")
	}
	cmd := &pb.AddAcls{}
	var what []string
	for _, a := range acls {
		if a.Kind == ResourceCluster && a.Name == "" {
			a.Name = auth.Wildcard
		}
		if err := a.Validate(); err != nil {
			return errorf(ErrInvalidArgument, "%v", err)
		}
		cmd.Acls = append(cmd.Acls, cluster.ACLProto(a))
		what = append(what, a.String())
	}
	_, err := b.runSecurity(ctx, "acls added", &pb.Command{Kind: &pb.Command_AddAcls{AddAcls: cmd}}, "acls", strings.Join(what, "; "))
	return err
}

// RemoveACLs removes every ACL one of filters matches and returns how
// many it removed.
func (b *Broker) RemoveACLs(ctx context.Context, filters []ACLFilter) (int, error) {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return 0, err
	}
	if len(filters) == 0 {
		return 0, errorf(ErrInvalidArgument, "no filter: to remove every ACL, give an empty filter")
	}
	cmd := &pb.RemoveAcls{}
	for _, f := range filters {
		cmd.Filters = append(cmd.Filters, cluster.FilterProto(f))
	}
	ch, err := b.runSecurity(ctx, "acls removed", &pb.Command{Kind: &pb.Command_RemoveAcls{RemoveAcls: cmd}}, "filters", len(filters))
	return ch.RemovedACLs, err
}

// ACLs lists the ACLs filter matches.
func (b *Broker) ACLs(ctx context.Context, filter ACLFilter) ([]ACL, error) {
	if err := b.authorize(ctx, ActionDescribe, clusterResource); err != nil {
		return nil, err
	}
	var out []ACL
	for _, a := range b.authn.state.Load().rules.ACLs() {
		if filter.Matches(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// SetQuota sets principal's quota ("*": principals without their own);
// a zero Quota removes it. Errors: ErrInvalidArgument.
func (b *Broker) SetQuota(ctx context.Context, principal string, q Quota) error {
	if err := b.authorize(ctx, ActionAlter, clusterResource); err != nil {
		return err
	}
	if principal != auth.Wildcard {
		if err := checkPrincipalName(principal); err != nil {
			return err
		}
	}
	if q.ProduceBytes < 0 || q.FetchBytes < 0 || q.Requests < 0 {
		return errorf(ErrInvalidArgument, "quota rates are 0 (none) or more")
	}
	_, err := b.runSecurity(ctx, "quota set", &pb.Command{Kind: &pb.Command_SetQuota{SetQuota: &pb.SetQuota{
		Principal: principal, ProduceBytesPerSecond: q.ProduceBytes, FetchBytesPerSecond: q.FetchBytes, RequestsPerSecond: q.Requests}}},
		"for", principal, "produce_bps", q.ProduceBytes, "fetch_bps", q.FetchBytes, "requests_ps", q.Requests)
	return err
}

// Quotas lists the quotas by principal.
func (b *Broker) Quotas(ctx context.Context) (map[string]Quota, error) {
	if err := b.authorize(ctx, ActionDescribe, clusterResource); err != nil {
		return nil, err
	}
	return b.cl.Meta().Security().Quotas, nil
}

// WhoAmI returns the request's principal.
func (b *Broker) WhoAmI(ctx context.Context) Principal { return PrincipalFrom(ctx) }
