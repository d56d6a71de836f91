package broker

import (
	"context"
	"fmt"
)

// Principal is who a request comes from, as its protocol adapter
// authenticated it. The zero Principal is an anonymous request.
type Principal struct {
	// Name identifies the principal ("" for an anonymous request).
	Name string
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

// Action is what a request does to a resource.
type Action uint8

// The actions, as Kafka's ACLs name them.
const (
	ActionRead Action = iota + 1
	ActionWrite
	ActionCreate
	ActionDelete
	ActionAlter
	ActionDescribe
)

func (a Action) String() string {
	switch a {
	case ActionRead:
		return "read"
	case ActionWrite:
		return "write"
	case ActionCreate:
		return "create"
	case ActionDelete:
		return "delete"
	case ActionAlter:
		return "alter"
	case ActionDescribe:
		return "describe"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// ResourceKind is the kind of thing a request acts on.
type ResourceKind uint8

// The kinds of resources.
const (
	ResourceTopic ResourceKind = iota + 1
	ResourceGroup
	ResourceCluster
)

func (k ResourceKind) String() string {
	switch k {
	case ResourceTopic:
		return "topic"
	case ResourceGroup:
		return "group"
	case ResourceCluster:
		return "cluster"
	}
	return fmt.Sprintf("resource(%d)", uint8(k))
}

// Resource is what a request acts on: a topic or group by name, or the
// cluster (Name "").
type Resource struct {
	Kind ResourceKind
	Name string
}

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

// authorize asks the node's authorizer whether the request's principal
// may do a on r: nil, or an ErrPermissionDenied.
func (b *Broker) authorize(ctx context.Context, a Action, r Resource) error {
	if err := b.cfg.Authorizer.Authorize(PrincipalFrom(ctx), a, r); err != nil {
		what := fmt.Sprintf("%s %q", r.Kind, r.Name)
		if r.Kind == ResourceCluster {
			what = "the cluster"
		}
		return errorf(ErrPermissionDenied, "%s may not %s %s: %v", principalName(ctx), a, what, err)
	}
	return nil
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
