package cluster

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/auth"
	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// Security is the cluster's access-control state, as the metadata group
// keeps it: users (their SCRAM credentials), API tokens (their secrets'
// hashes), ACLs and quotas. A Security is a copy: the metadata's own is
// changed only by applied commands.
type Security struct {
	Users  map[string][]auth.Credential
	Tokens map[string]auth.Token // by id
	ACLs   []auth.ACL
	Quotas map[string]auth.Quota // by principal ("*": the default)
}

// security is the metadata's access-control state (protobuf form, as in
// the log and snapshots).
type security struct {
	users  map[string]*pb.PutUser
	tokens map[string]*pb.PutToken
	acls   []*pb.Acl
	quotas map[string]*pb.SetQuota
}

func newSecurity() security {
	return security{users: map[string]*pb.PutUser{}, tokens: map[string]*pb.PutToken{}, quotas: map[string]*pb.SetQuota{}}
}

// applySecurity applies an access-control command; ok is false for other
// commands.
func (m *Metadata) applySecurity(cmd *pb.Command) (ch Change, err error, ok bool) {
	s := &m.sec
	ch.Security = true
	switch k := cmd.Kind.(type) {
	case *pb.Command_PutUser:
		u := k.PutUser
		if u.GetName() == "" || len(u.GetCredentials()) == 0 {
			return Change{}, fmt.Errorf("%w: a user needs a name and credentials", ErrBadCommand), true
		}
		_, exists := s.users[u.GetName()]
		if u.GetCreate() && exists {
			return Change{}, fmt.Errorf("%w: user %q", ErrExists, u.GetName()), true
		}
		if !u.GetCreate() && !exists {
			return Change{}, fmt.Errorf("%w: user %q", ErrNotFound, u.GetName()), true
		}
		s.users[u.GetName()] = proto.Clone(u).(*pb.PutUser)
		s.users[u.GetName()].Create = false
	case *pb.Command_DeleteUser:
		name := k.DeleteUser.GetName()
		if _, ok := s.users[name]; !ok {
			return Change{}, fmt.Errorf("%w: user %q", ErrNotFound, name), true
		}
		delete(s.users, name)
		for id, t := range s.tokens {
			if t.GetPrincipal() == name {
				delete(s.tokens, id)
			}
		}
	case *pb.Command_PutToken:
		t := k.PutToken
		if t.GetId() == "" || t.GetPrincipal() == "" || len(t.GetSecretSha256()) == 0 {
			return Change{}, fmt.Errorf("%w: a token needs an id, a principal and a hash", ErrBadCommand), true
		}
		if _, dup := s.tokens[t.GetId()]; dup {
			return Change{}, fmt.Errorf("%w: token %s", ErrExists, t.GetId()), true
		}
		s.tokens[t.GetId()] = proto.Clone(t).(*pb.PutToken)
	case *pb.Command_RevokeToken:
		if _, ok := s.tokens[k.RevokeToken.GetId()]; !ok {
			return Change{}, fmt.Errorf("%w: token %s", ErrNotFound, k.RevokeToken.GetId()), true
		}
		delete(s.tokens, k.RevokeToken.GetId())
	case *pb.Command_AddAcls:
		for _, a := range k.AddAcls.GetAcls() {
			if err := aclOf(a).Validate(); err != nil {
				return Change{}, fmt.Errorf("%w: %v", ErrBadCommand, err), true
			}
		}
		for _, a := range k.AddAcls.GetAcls() {
			if !slices.ContainsFunc(s.acls, func(b *pb.Acl) bool { return proto.Equal(a, b) }) {
				s.acls = append(s.acls, proto.Clone(a).(*pb.Acl))
			}
		}
	case *pb.Command_RemoveAcls:
		var removed []*pb.Acl
		s.acls = slices.DeleteFunc(s.acls, func(a *pb.Acl) bool {
			for _, f := range k.RemoveAcls.GetFilters() {
				if filterOf(f).Matches(aclOf(a)) {
					removed = append(removed, a)
					return true
				}
			}
			return false
		})
		ch.RemovedACLs = len(removed)
	case *pb.Command_SetQuota:
		q := k.SetQuota
		if q.GetPrincipal() == "" || q.GetProduceBytesPerSecond() < 0 || q.GetFetchBytesPerSecond() < 0 || q.GetRequestsPerSecond() < 0 {
			return Change{}, fmt.Errorf("%w: a quota needs a principal and rates of 0 or more", ErrBadCommand), true
		}
		if quotaOf(q).IsZero() {
			delete(s.quotas, q.GetPrincipal())
		} else {
			s.quotas[q.GetPrincipal()] = proto.Clone(q).(*pb.SetQuota)
		}
	default:
		return Change{}, nil, false
	}
	return ch, nil, true
}

func aclOf(a *pb.Acl) auth.ACL {
	return auth.ACL{Principal: a.GetPrincipal(), Kind: auth.ResourceKind(a.GetResourceType()), Name: a.GetName(),
		Prefix: a.GetPrefix(), Action: auth.Action(a.GetOperation()), Deny: a.GetDeny(), Host: a.GetHost()}
}

// ACLProto is a's form in metadata commands.
func ACLProto(a auth.ACL) *pb.Acl {
	return &pb.Acl{Principal: a.Principal, ResourceType: int32(a.Kind), Name: a.Name, Prefix: a.Prefix,
		Operation: int32(a.Action), Deny: a.Deny, Host: a.Host}
}

func filterOf(f *pb.AclFilter) auth.Filter {
	a := aclOf(f.GetAcl())
	return auth.Filter{Principal: a.Principal, Kind: a.Kind, Name: a.Name, Prefix: a.Prefix, PatternSet: f.GetPatternSet(),
		Action: a.Action, Deny: a.Deny, PermissionSet: f.GetPermissionSet(), Host: a.Host}
}

// FilterProto is f's form in metadata commands.
func FilterProto(f auth.Filter) *pb.AclFilter {
	return &pb.AclFilter{Acl: ACLProto(auth.ACL{Principal: f.Principal, Kind: f.Kind, Name: f.Name, Prefix: f.Prefix,
		Action: f.Action, Deny: f.Deny, Host: f.Host}), PatternSet: f.PatternSet, PermissionSet: f.PermissionSet}
}

func quotaOf(q *pb.SetQuota) auth.Quota {
	return auth.Quota{ProduceBytes: q.GetProduceBytesPerSecond(), FetchBytes: q.GetFetchBytesPerSecond(), Requests: q.GetRequestsPerSecond()}
}

// CredentialProto and TokenProto are the metadata forms of a credential
// and a token.
func CredentialProto(c auth.Credential) *pb.ScramCredential {
	return &pb.ScramCredential{Mechanism: string(c.Mechanism), Salt: c.Salt, Iterations: int32(c.Iterations),
		StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}

func TokenProto(t auth.Token) *pb.PutToken {
	p := &pb.PutToken{Id: t.ID, Principal: t.Principal, SecretSha256: t.Hash, CreatedUnixMs: t.Created.UnixMilli(), Description: t.Description}
	if !t.Expires.IsZero() {
		p.ExpiresUnixMs = t.Expires.UnixMilli()
	}
	return p
}

// Security returns a copy of the access-control state.
func (m *Metadata) Security() Security {
	s := &m.sec
	out := Security{Users: map[string][]auth.Credential{}, Tokens: map[string]auth.Token{}, Quotas: map[string]auth.Quota{}}
	for name, u := range s.users {
		for _, c := range u.GetCredentials() {
			out.Users[name] = append(out.Users[name], auth.Credential{Mechanism: auth.Mechanism(c.GetMechanism()),
				Salt: c.GetSalt(), Iterations: int(c.GetIterations()), StoredKey: c.GetStoredKey(), ServerKey: c.GetServerKey()})
		}
	}
	for id, t := range s.tokens {
		tok := auth.Token{ID: id, Principal: t.GetPrincipal(), Hash: t.GetSecretSha256(),
			Created: time.UnixMilli(t.GetCreatedUnixMs()), Description: t.GetDescription()}
		if t.GetExpiresUnixMs() != 0 {
			tok.Expires = time.UnixMilli(t.GetExpiresUnixMs())
		}
		out.Tokens[id] = tok
	}
	for _, a := range s.acls {
		out.ACLs = append(out.ACLs, aclOf(a))
	}
	for p, q := range s.quotas {
		out.Quotas[p] = quotaOf(q)
	}
	return out
}

// snapshotSecurity and restoreSecurity carry the state in snapshots.
func (m *Metadata) snapshotSecurity(snap *pb.Snapshot) {
	s := &m.sec
	for _, name := range sortedKeys(s.users) {
		snap.Users = append(snap.Users, s.users[name])
	}
	for _, id := range sortedKeys(s.tokens) {
		snap.Tokens = append(snap.Tokens, s.tokens[id])
	}
	snap.Acls = append(snap.Acls, s.acls...)
	for _, p := range sortedKeys(s.quotas) {
		snap.Quotas = append(snap.Quotas, s.quotas[p])
	}
}

func (m *Metadata) restoreSecurity(snap *pb.Snapshot) {
	m.sec = newSecurity()
	for _, u := range snap.GetUsers() {
		m.sec.users[u.GetName()] = u
	}
	for _, t := range snap.GetTokens() {
		m.sec.tokens[t.GetId()] = t
	}
	m.sec.acls = snap.GetAcls()
	for _, q := range snap.GetQuotas() {
		m.sec.quotas[q.GetPrincipal()] = q
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
