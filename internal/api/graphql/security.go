package graphql

import (
	"maps"
	"slices"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Conversions of the access-control types.

func ok(err error) (bool, error) { return err == nil, err }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func tokenOut(t broker.TokenInfo) *Token {
	out := &Token{ID: t.ID, Principal: t.Principal, CreatedUnixMs: t.Created.UnixMilli(), Description: t.Description}
	if !t.Expires.IsZero() {
		out.ExpiresUnixMs = t.Expires.UnixMilli()
	}
	return out
}

var (
	kindIn = map[ResourceType]broker.ResourceKind{ResourceTypeTopic: broker.ResourceTopic, ResourceTypeGroup: broker.ResourceGroup,
		ResourceTypeCluster: broker.ResourceCluster, ResourceTypeTransactionalID: broker.ResourceKind(4)}
	opIn = map[Operation]broker.Action{OperationRead: broker.ActionRead, OperationWrite: broker.ActionWrite,
		OperationCreate: broker.ActionCreate, OperationDelete: broker.ActionDelete, OperationAlter: broker.ActionAlter,
		OperationDescribe: broker.ActionDescribe, OperationAll: broker.Action(7)}
)

// aclsInput are converted ACL inputs: as ACLs, and as filters.
type aclsInput struct {
	acls    []broker.ACL
	filters []broker.ACLFilter
}

// aclsIn converts inputs; as filters, absent fields match anything.
func aclsIn(in []*ACLInput, filter bool) (aclsInput, error) {
	var out aclsInput
	for _, a := range in {
		if a == nil {
			a = &ACLInput{}
		}
		acl := broker.ACL{Principal: deref(a.Principal), Name: deref(a.Name), Host: deref(a.Host)}
		f := broker.ACLFilter{}
		if a.ResourceType != nil {
			acl.Kind = kindIn[*a.ResourceType]
		} else if !filter {
			return out, invalid("an ACL needs a resourceType")
		}
		if a.Operation != nil {
			acl.Action = opIn[*a.Operation]
		} else if !filter {
			return out, invalid("an ACL needs an operation")
		}
		if a.Pattern != nil {
			f.PatternSet = true
			acl.Prefix = *a.Pattern == PatternTypePrefix
		}
		if a.Permission != nil {
			f.PermissionSet = true
			acl.Deny = *a.Permission == PermissionDeny
		} else if !filter {
			return out, invalid("an ACL needs a permission: ALLOW or DENY")
		}
		f.Principal, f.Kind, f.Name, f.Prefix, f.Action, f.Deny, f.Host = acl.Principal, acl.Kind, acl.Name, acl.Prefix, acl.Action, acl.Deny, acl.Host
		out.acls = append(out.acls, acl)
		out.filters = append(out.filters, f)
	}
	return out, nil
}

func aclOut(a broker.ACL) *ACL {
	out := &ACL{Principal: a.Principal, Name: a.Name, Host: a.Host, Pattern: PatternTypeLiteral, Permission: PermissionAllow}
	for k, v := range kindIn {
		if v == a.Kind {
			out.ResourceType = k
		}
	}
	for k, v := range opIn {
		if v == a.Action {
			out.Operation = k
		}
	}
	if a.Prefix {
		out.Pattern = PatternTypePrefix
	}
	if a.Deny {
		out.Permission = PermissionDeny
	}
	return out
}

func quotaIn(produce, fetch, requests *int64) broker.Quota {
	return broker.Quota{ProduceBytes: deref(produce), FetchBytes: deref(fetch), Requests: deref(requests)}
}
