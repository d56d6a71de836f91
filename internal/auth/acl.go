// Package auth holds Hermes' access control as data and rules, with no
// I/O: principals' credentials (SCRAM, API tokens), access control lists
// and their evaluation, and quota buckets. The broker keeps the state in
// the metadata group and asks this package to decide; every protocol
// adapter gets the same answers.
package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Action is what a request does to a resource (Kafka's ACL operations).
type Action uint8

// The actions. ActionAll in an ACL matches every action.
const (
	ActionRead Action = iota + 1
	ActionWrite
	ActionCreate
	ActionDelete
	ActionAlter
	ActionDescribe
	ActionAll
)

var actionNames = map[Action]string{
	ActionRead: "read", ActionWrite: "write", ActionCreate: "create", ActionDelete: "delete",
	ActionAlter: "alter", ActionDescribe: "describe", ActionAll: "all",
}

func (a Action) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// ParseAction parses an action's name (case-insensitive).
func ParseAction(s string) (Action, error) {
	for a, n := range actionNames {
		if strings.EqualFold(s, n) {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown operation %q (read, write, create, delete, alter, describe or all)", s)
}

// ResourceKind is the kind of thing a request acts on.
type ResourceKind uint8

// The kinds of resources.
const (
	ResourceTopic ResourceKind = iota + 1
	ResourceGroup
	ResourceCluster
	// ResourceTransactionalID is a Kafka transactional id.
	ResourceTransactionalID
)

var kindNames = map[ResourceKind]string{
	ResourceTopic: "topic", ResourceGroup: "group", ResourceCluster: "cluster", ResourceTransactionalID: "transactional-id",
}

func (k ResourceKind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("resource(%d)", uint8(k))
}

// ParseResourceKind parses a resource kind's name.
func ParseResourceKind(s string) (ResourceKind, error) {
	for k, n := range kindNames {
		if strings.EqualFold(s, n) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown resource type %q (topic, group, cluster or transactional-id)", s)
}

// Resource is what a request acts on: a topic or group by name, or the
// cluster (Name "").
type Resource struct {
	Kind ResourceKind
	Name string
}

// Wildcard, as an ACL's principal or literal resource name, matches
// every principal or name.
const Wildcard = "*"

// ACL allows or denies a principal an action on resources.
type ACL struct {
	// Principal is a principal's name, or Wildcard.
	Principal string
	// Kind and Name select the resources: Name literally (Wildcard: all
	// of the kind), or, with Prefix, every name starting with it. The
	// cluster resource has the name "" (or Wildcard).
	Kind   ResourceKind
	Name   string
	Prefix bool
	Action Action
	// Deny: the ACL denies; a matching denial wins over any allowance.
	Deny bool
	// Host is the client address the ACL applies to (Wildcard or "":
	// any).
	Host string
}

func (a ACL) String() string {
	verb := "allow"
	if a.Deny {
		verb = "deny"
	}
	pattern := "literal"
	if a.Prefix {
		pattern = "prefix"
	}
	host := a.Host
	if host == "" {
		host = Wildcard
	}
	return fmt.Sprintf("%s %s %s on %s %q (%s) from %s", verb, a.Principal, a.Action, a.Kind, a.Name, pattern, host)
}

// Validate checks a's fields.
func (a ACL) Validate() error {
	switch {
	case a.Principal == "":
		return errors.New("an ACL needs a principal (a name, or * for every principal)")
	case kindNames[a.Kind] == "":
		return fmt.Errorf("an ACL needs a resource type (topic, group, cluster or transactional-id)")
	case actionNames[a.Action] == "":
		return fmt.Errorf("an ACL needs an operation")
	case a.Kind != ResourceCluster && a.Name == "":
		return fmt.Errorf("an ACL on a %s needs a name (or * for all)", a.Kind)
	case a.Prefix && a.Name == Wildcard:
		return errors.New("a prefix ACL's name is a prefix, not *")
	}
	return nil
}

// matches reports whether a applies to principal p doing act on r from
// host.
func (a *ACL) matches(p string, act Action, r Resource, host string) bool {
	if a.Principal != Wildcard && a.Principal != p {
		return false
	}
	if a.Host != "" && a.Host != Wildcard && a.Host != host {
		return false
	}
	if a.Kind != r.Kind {
		return false
	}
	switch {
	case r.Kind == ResourceCluster:
	case a.Prefix:
		if !strings.HasPrefix(r.Name, a.Name) {
			return false
		}
	case a.Name != Wildcard && a.Name != r.Name:
		return false
	}
	if a.Action == ActionAll || a.Action == act {
		return true
	}
	// As in Kafka: the right to read, write, delete or alter a resource
	// includes describing it (an allowance only: a denial of read does not
	// deny describe).
	return !a.Deny && act == ActionDescribe &&
		(a.Action == ActionRead || a.Action == ActionWrite || a.Action == ActionDelete || a.Action == ActionAlter)
}

// ErrDenied is why Rules.Authorize refuses.
var ErrDenied = errors.New("no ACL allows it")

// Rules decide requests from ACLs and superusers. A Rules is immutable:
// a change builds a new one (New).
type Rules struct {
	superusers map[string]bool
	acls       []ACL
}

// New returns the rules of acls with superusers (who may do anything).
func New(superusers []string, acls []ACL) *Rules {
	r := &Rules{superusers: make(map[string]bool, len(superusers)), acls: acls}
	for _, s := range superusers {
		r.superusers[s] = true
	}
	return r
}

// ACLs returns the rules' ACLs (shared: do not modify).
func (r *Rules) ACLs() []ACL { return r.acls }

// Superuser reports whether principal p is a superuser.
func (r *Rules) Superuser(p string) bool { return p != "" && r.superusers[p] }

// Authorize returns nil when principal p (authenticated: not "") may do
// act on res from host: p is a superuser, or an ACL allows it and none
// denies it. Everything not allowed is denied.
func (r *Rules) Authorize(p string, act Action, res Resource, host string) error {
	if p == "" {
		return errors.New("not authenticated")
	}
	if r.superusers[p] {
		return nil
	}
	allowed := false
	for i := range r.acls {
		a := &r.acls[i]
		if !a.matches(p, act, res, host) {
			continue
		}
		if a.Deny {
			return fmt.Errorf("denied by ACL: %s", a)
		}
		allowed = true
	}
	if !allowed {
		return ErrDenied
	}
	return nil
}

// Filter selects ACLs to list or remove: zero fields match anything.
type Filter struct {
	Principal string
	Kind      ResourceKind
	Name      string
	// Prefix, when PatternSet, selects prefix (true) or literal ACLs.
	Prefix     bool
	PatternSet bool
	Action     Action
	// Deny, when PermissionSet, selects denials (true) or allowances.
	Deny          bool
	PermissionSet bool
	Host          string
}

// Matches reports whether f selects a.
func (f Filter) Matches(a ACL) bool {
	return (f.Principal == "" || f.Principal == a.Principal) &&
		(f.Kind == 0 || f.Kind == a.Kind) &&
		(f.Name == "" || f.Name == a.Name) &&
		(!f.PatternSet || f.Prefix == a.Prefix) &&
		(f.Action == 0 || f.Action == a.Action) &&
		(!f.PermissionSet || f.Deny == a.Deny) &&
		(f.Host == "" || f.Host == a.Host)
}
