package grpcapi

import (
	"context"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hermes-mq/hermes/internal/broker"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Authentication: every call's credentials (the "authorization"
// metadata, or the TLS client certificate) become its principal through
// broker.Authenticate, before the handler runs. Health checks are exempt
// (probes and load balancers call them without credentials): Hermes's own
// Health and the standard grpc.health.v1 service. Server reflection is
// not: the API's description is no secret (the .proto files are
// published), but a listener that requires authentication answers only
// authenticated callers (grpcurl takes -H 'authorization: Bearer ...').

// exempt are the methods that run without authentication.
var exempt = map[string]bool{
	pb.Hermes_Health_FullMethodName: true,
	"/grpc.health.v1.Health/Check":  true,
	"/grpc.health.v1.Health/Watch":  true,
	"/grpc.health.v1.Health/List":   true,
}

// ServerOptions are the interceptors that authenticate every call.
func (s *Service) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if exempt[info.FullMethod] {
				return h(ctx, req)
			}
			ctx, err := s.authenticate(ctx)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if exempt[info.FullMethod] {
				return h(srv, ss)
			}
			ctx, err := s.authenticate(ss.Context())
			if err != nil {
				return err
			}
			return h(srv, &authedStream{ServerStream: ss, ctx: ctx})
		}),
	}
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a *authedStream) Context() context.Context { return a.ctx }

// authenticate returns ctx carrying the call's principal.
func (s *Service) authenticate(ctx context.Context) (context.Context, error) {
	c, err := Credentials(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	p, err := s.b.Authenticate(ctx, c)
	if err != nil {
		return nil, toStatus(err)
	}
	return broker.WithPrincipal(ctx, p), nil
}

// Credentials reads what a gRPC call presented: its authorization
// metadata and the TLS client certificate the listener verified.
func Credentials(ctx context.Context) (broker.Credentials, error) {
	var c broker.Credentials
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			c.Addr = p.Addr.String()
		}
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			c.CertName = info.State.VerifiedChains[0][0].Subject.CommonName
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return c, nil
	}
	if len(vals) > 1 {
		return c, broker.Errorf(broker.ErrUnauthenticated, "more than one authorization header")
	}
	return broker.ParseAuthorization(vals[0], c)
}

// The access-control administration.

func (s *Service) WhoAmI(ctx context.Context, _ *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	p := s.b.WhoAmI(ctx)
	return &pb.WhoAmIResponse{Principal: p.Name, Via: p.Via, AuthRequired: s.b.AuthRequired()}, nil
}

func (s *Service) CreateUser(ctx context.Context, req *pb.CreateUserRequest) (*pb.CreateUserResponse, error) {
	return &pb.CreateUserResponse{}, toStatus(s.b.CreateUser(ctx, req.GetName(), req.GetPassword()))
}

func (s *Service) SetPassword(ctx context.Context, req *pb.SetPasswordRequest) (*pb.SetPasswordResponse, error) {
	return &pb.SetPasswordResponse{}, toStatus(s.b.SetPassword(ctx, req.GetName(), req.GetPassword()))
}

func (s *Service) DeleteUser(ctx context.Context, req *pb.DeleteUserRequest) (*pb.DeleteUserResponse, error) {
	return &pb.DeleteUserResponse{}, toStatus(s.b.DeleteUser(ctx, req.GetName()))
}

func (s *Service) ListUsers(ctx context.Context, _ *pb.ListUsersRequest) (*pb.ListUsersResponse, error) {
	users, err := s.b.Users(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListUsersResponse{}
	for _, u := range users {
		out.Users = append(out.Users, &pb.UserInfo{Name: u.Name, Mechanisms: u.Mechanisms})
	}
	return out, nil
}

func tokenToPB(t broker.TokenInfo) *pb.TokenInfo {
	out := &pb.TokenInfo{Id: t.ID, Principal: t.Principal, CreatedUnixMs: t.Created.UnixMilli(), Description: t.Description}
	if !t.Expires.IsZero() {
		out.ExpiresUnixMs = t.Expires.UnixMilli()
	}
	return out
}

func (s *Service) CreateToken(ctx context.Context, req *pb.CreateTokenRequest) (*pb.CreateTokenResponse, error) {
	if req.GetTtlMs() < 0 {
		return nil, invalid("ttl_ms must not be negative")
	}
	info, token, err := s.b.CreateToken(ctx, req.GetPrincipal(), time.Duration(req.GetTtlMs())*time.Millisecond, req.GetDescription())
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CreateTokenResponse{Info: tokenToPB(info), Token: token}, nil
}

func (s *Service) RevokeToken(ctx context.Context, req *pb.RevokeTokenRequest) (*pb.RevokeTokenResponse, error) {
	return &pb.RevokeTokenResponse{}, toStatus(s.b.RevokeToken(ctx, req.GetId()))
}

func (s *Service) ListTokens(ctx context.Context, _ *pb.ListTokensRequest) (*pb.ListTokensResponse, error) {
	tokens, err := s.b.Tokens(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListTokensResponse{}
	for _, t := range tokens {
		out.Tokens = append(out.Tokens, tokenToPB(t))
	}
	return out, nil
}

// aclFromPB converts an ACL (filter: ANY values allowed).
func aclFromPB(a *pb.Acl, filter bool) (broker.ACL, broker.ACLFilter, error) {
	if a == nil {
		a = &pb.Acl{}
	}
	acl := broker.ACL{Principal: a.GetPrincipal(), Kind: broker.ResourceKind(a.GetResourceType()), Name: a.GetName(),
		Action: broker.Action(a.GetOperation()), Host: a.GetHost()}
	f := broker.ACLFilter{Principal: acl.Principal, Kind: acl.Kind, Name: acl.Name, Action: acl.Action, Host: acl.Host}
	switch a.GetPattern() {
	case pb.PatternType_PATTERN_TYPE_LITERAL:
		f.PatternSet = true
	case pb.PatternType_PATTERN_TYPE_PREFIX:
		acl.Prefix, f.Prefix, f.PatternSet = true, true, true
	case pb.PatternType_PATTERN_TYPE_ANY:
		if !filter {
			acl.Prefix = false // literal by default
		}
	default:
		return acl, f, invalid("unknown pattern type %d", a.GetPattern())
	}
	switch a.GetPermission() {
	case pb.Permission_PERMISSION_ALLOW:
		f.PermissionSet = true
	case pb.Permission_PERMISSION_DENY:
		acl.Deny, f.Deny, f.PermissionSet = true, true, true
	case pb.Permission_PERMISSION_ANY:
		if !filter {
			return acl, f, invalid("an ACL needs a permission: allow or deny")
		}
	default:
		return acl, f, invalid("unknown permission %d", a.GetPermission())
	}
	return acl, f, nil
}

func aclToPB(a broker.ACL) *pb.Acl {
	out := &pb.Acl{Principal: a.Principal, ResourceType: pb.ResourceType(a.Kind), Name: a.Name,
		Pattern: pb.PatternType_PATTERN_TYPE_LITERAL, Operation: pb.Operation(a.Action), Permission: pb.Permission_PERMISSION_ALLOW, Host: a.Host}
	if a.Prefix {
		out.Pattern = pb.PatternType_PATTERN_TYPE_PREFIX
	}
	if a.Deny {
		out.Permission = pb.Permission_PERMISSION_DENY
	}
	return out
}

func (s *Service) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	var acls []broker.ACL
	for _, a := range req.GetAcls() {
		acl, _, err := aclFromPB(a, false)
		if err != nil {
			return nil, err
		}
		acls = append(acls, acl)
	}
	return &pb.CreateAclsResponse{}, toStatus(s.b.AddACLs(ctx, acls))
}

func (s *Service) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	var filters []broker.ACLFilter
	for _, a := range req.GetFilters() {
		_, f, err := aclFromPB(a, true)
		if err != nil {
			return nil, err
		}
		filters = append(filters, f)
	}
	n, err := s.b.RemoveACLs(ctx, filters)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteAclsResponse{Deleted: int32(n)}, nil
}

func (s *Service) ListAcls(ctx context.Context, req *pb.ListAclsRequest) (*pb.ListAclsResponse, error) {
	_, f, err := aclFromPB(req.GetFilter(), true)
	if err != nil {
		return nil, err
	}
	acls, err := s.b.ACLs(ctx, f)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListAclsResponse{}
	for _, a := range acls {
		out.Acls = append(out.Acls, aclToPB(a))
	}
	return out, nil
}

func (s *Service) SetQuota(ctx context.Context, req *pb.SetQuotaRequest) (*pb.SetQuotaResponse, error) {
	q := req.GetQuota()
	return &pb.SetQuotaResponse{}, toStatus(s.b.SetQuota(ctx, q.GetPrincipal(), broker.Quota{
		ProduceBytes: q.GetProduceBytesPerSecond(), FetchBytes: q.GetFetchBytesPerSecond(), Requests: q.GetRequestsPerSecond()}))
}

func (s *Service) ListQuotas(ctx context.Context, _ *pb.ListQuotasRequest) (*pb.ListQuotasResponse, error) {
	qs, err := s.b.Quotas(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListQuotasResponse{}
	for _, p := range sortedKeys(qs) {
		q := qs[p]
		out.Quotas = append(out.Quotas, &pb.Quota{Principal: p, ProduceBytesPerSecond: q.ProduceBytes,
			FetchBytesPerSecond: q.FetchBytes, RequestsPerSecond: q.Requests})
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
