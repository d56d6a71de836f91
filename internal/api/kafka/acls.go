package kafka

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// DescribeAcls, CreateAcls and DeleteAcls (v0–3) read and change the
// cluster's ACLs, the same ones `hermes acl` and every other API use.
// Kafka names principals "User:<name>"; Hermes principals are those
// names ("User:*" is every principal). The cluster resource is named
// "kafka-cluster". Hermes' operations are read, write, create, delete,
// alter, describe and all; Kafka's others (CLUSTER_ACTION,
// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, the token ones) are
// refused with INVALID_REQUEST and a message saying what to use instead.
// Listing needs describe on the cluster, changing alter on it.
func init() {
	register(kmsg.DescribeACLs, 0, 3, now(describeACLs))
	register(kmsg.CreateACLs, 0, 3, now(createACLs))
	register(kmsg.DeleteACLs, 0, 3, now(deleteACLs))
}

// kafkaCluster is the name of the cluster resource in Kafka's ACLs.
const kafkaCluster = "kafka-cluster"

// aclFilter is a Kafka ACL filter, checked: it selects ACLs as Kafka
// does, including the MATCH pattern type (every ACL that applies to the
// named resource: literal, wildcard or prefix).
type aclFilter struct {
	kind       broker.ResourceKind // 0: any
	name       *string
	pattern    kmsg.ACLResourcePatternType
	principal  *string // a Hermes principal
	host       *string
	action     broker.Action // 0: any
	permission kmsg.ACLPermissionType
}

func (f *aclFilter) coarse() broker.ACLFilter { return broker.ACLFilter{Kind: f.kind} }

func (f *aclFilter) matches(a broker.ACL) bool {
	if f.kind != 0 && a.Kind != f.kind {
		return false
	}
	if f.principal != nil && *f.principal != a.Principal {
		return false
	}
	if f.host != nil && *f.host != aclHost(a) {
		return false
	}
	if f.action != 0 && f.action != a.Action {
		return false
	}
	switch f.permission {
	case kmsg.ACLPermissionTypeAllow:
		if a.Deny {
			return false
		}
	case kmsg.ACLPermissionTypeDeny:
		if !a.Deny {
			return false
		}
	}
	name := aclName(a)
	switch f.pattern {
	case kmsg.ACLResourcePatternTypeLiteral:
		return !a.Prefix && (f.name == nil || *f.name == name)
	case kmsg.ACLResourcePatternTypePrefixed:
		return a.Prefix && (f.name == nil || *f.name == name)
	case kmsg.ACLResourcePatternTypeMatch:
		if f.name == nil {
			return true
		}
		switch {
		case a.Kind == broker.ResourceCluster:
			return *f.name == kafkaCluster
		case a.Prefix:
			return strings.HasPrefix(*f.name, a.Name)
		}
		return a.Name == broker.Wildcard || a.Name == *f.name
	}
	return f.name == nil || *f.name == name // ANY
}

// aclName and aclHost are an ACL's resource name and host as Kafka
// shows them.
func aclName(a broker.ACL) string {
	if a.Kind == broker.ResourceCluster {
		return kafkaCluster
	}
	return a.Name
}

func aclHost(a broker.ACL) string {
	if a.Host == "" {
		return broker.Wildcard
	}
	return a.Host
}

func parseFilter(typ kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) (*aclFilter, error) {
	f := &aclFilter{name: name, host: host, permission: perm}
	var err error
	if typ != kmsg.ACLResourceTypeAny {
		if f.kind, err = resourceKind(typ); err != nil {
			return nil, err
		}
	}
	switch pattern {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
		f.pattern = pattern
	default:
		return nil, fmt.Errorf("unknown resource pattern type %d", pattern)
	}
	switch perm {
	case kmsg.ACLPermissionTypeAny, kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny:
	default:
		return nil, fmt.Errorf("unknown permission type %d", perm)
	}
	if principal != nil {
		p, err := hermesPrincipal(*principal)
		if err != nil {
			return nil, err
		}
		f.principal = &p
	}
	if op != kmsg.ACLOperationAny {
		if f.action, err = action(op); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func resourceKind(t kmsg.ACLResourceType) (broker.ResourceKind, error) {
	switch t {
	case kmsg.ACLResourceTypeTopic:
		return broker.ResourceTopic, nil
	case kmsg.ACLResourceTypeGroup:
		return broker.ResourceGroup, nil
	case kmsg.ACLResourceTypeCluster:
		return broker.ResourceCluster, nil
	case kmsg.ACLResourceTypeTransactionalId:
		return broker.ResourceTransactionalID, nil
	}
	return 0, fmt.Errorf("resource type %s has no ACLs in Hermes (topic, group, cluster, transactional id)", t)
}

func kafkaResourceType(k broker.ResourceKind) kmsg.ACLResourceType {
	switch k {
	case broker.ResourceTopic:
		return kmsg.ACLResourceTypeTopic
	case broker.ResourceGroup:
		return kmsg.ACLResourceTypeGroup
	case broker.ResourceCluster:
		return kmsg.ACLResourceTypeCluster
	case broker.ResourceTransactionalID:
		return kmsg.ACLResourceTypeTransactionalId
	}
	return kmsg.ACLResourceTypeUnknown
}

var actions = map[kmsg.ACLOperation]broker.Action{
	kmsg.ACLOperationAll: broker.ActionAll, kmsg.ACLOperationRead: broker.ActionRead, kmsg.ACLOperationWrite: broker.ActionWrite,
	kmsg.ACLOperationCreate: broker.ActionCreate, kmsg.ACLOperationDelete: broker.ActionDelete,
	kmsg.ACLOperationAlter: broker.ActionAlter, kmsg.ACLOperationDescribe: broker.ActionDescribe,
}

func action(op kmsg.ACLOperation) (broker.Action, error) {
	if a, ok := actions[op]; ok {
		return a, nil
	}
	switch op {
	case kmsg.ACLOperationIdempotentWrite:
		return 0, fmt.Errorf("Hermes has no IDEMPOTENT_WRITE: WRITE on a topic covers idempotent produce to it")
	case kmsg.ACLOperationDescribeConfigs:
		return 0, fmt.Errorf("Hermes has no DESCRIBE_CONFIGS: DESCRIBE covers a resource's configs")
	case kmsg.ACLOperationAlterConfigs:
		return 0, fmt.Errorf("Hermes has no ALTER_CONFIGS: ALTER covers a resource's configs")
	}
	return 0, fmt.Errorf("operation %s has no ACLs in Hermes (ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE)", op)
}

func kafkaOperation(a broker.Action) kmsg.ACLOperation {
	for op, act := range actions {
		if act == a {
			return op
		}
	}
	return kmsg.ACLOperationUnknown
}

// hermesPrincipal turns Kafka's "User:<name>" into a Hermes principal.
func hermesPrincipal(p string) (string, error) {
	name, ok := strings.CutPrefix(p, "User:")
	if !ok || name == "" {
		return "", fmt.Errorf("principal %q: Hermes principals are written User:<name> (User:* for all)", p)
	}
	return name, nil
}

func kafkaPermission(a broker.ACL) kmsg.ACLPermissionType {
	if a.Deny {
		return kmsg.ACLPermissionTypeDeny
	}
	return kmsg.ACLPermissionTypeAllow
}

func kafkaPattern(a broker.ACL) kmsg.ACLResourcePatternType {
	if a.Prefix {
		return kmsg.ACLResourcePatternTypePrefixed
	}
	return kmsg.ACLResourcePatternTypeLiteral
}

// listACLs returns the ACLs f selects.
func (c *conn) listACLs(f *aclFilter) ([]broker.ACL, error) {
	all, err := c.s.api.ACLs(c.context(), f.coarse())
	if err != nil {
		return nil, err
	}
	var out []broker.ACL
	for _, a := range all {
		if f.matches(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

func describeACLs(c *conn, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f, err := parseFilter(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp
	}
	acls, err := c.listACLs(f)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err, scopeCluster), message(err)
		return resp
	}
	type resKey struct {
		typ     kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	at := map[resKey]int{}
	for _, a := range acls {
		k := resKey{kafkaResourceType(a.Kind), aclName(a), kafkaPattern(a)}
		i, ok := at[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = k.typ, k.name, k.pattern
			i = len(resp.Resources)
			at[k] = i
			resp.Resources = append(resp.Resources, r)
		}
		ra := kmsg.NewDescribeACLsResponseResourceACL()
		ra.Principal, ra.Host = "User:"+a.Principal, aclHost(a)
		ra.Operation, ra.PermissionType = kafkaOperation(a.Action), kafkaPermission(a)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, ra)
	}
	return resp
}

func createACLs(c *conn, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var acls []broker.ACL
	var at []int // the creation of each ACL
	for i, cr := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		a, err := parseCreation(cr)
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		acls = append(acls, a)
		at = append(at, i)
	}
	if len(acls) == 0 {
		return resp
	}
	// One metadata command for all: they are added together or not.
	if err := c.s.api.AddACLs(c.context(), acls); err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code(err, scopeCluster), message(err)
		}
	}
	return resp
}

func parseCreation(cr kmsg.CreateACLsRequestCreation) (broker.ACL, error) {
	var a broker.ACL
	var err error
	if a.Kind, err = resourceKind(cr.ResourceType); err != nil {
		return a, err
	}
	switch cr.ResourcePatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
	case kmsg.ACLResourcePatternTypePrefixed:
		a.Prefix = true
	default:
		return a, fmt.Errorf("an ACL's resource pattern is LITERAL or PREFIXED, not %s", cr.ResourcePatternType)
	}
	a.Name = cr.ResourceName
	if a.Kind == broker.ResourceCluster {
		if a.Name != kafkaCluster || a.Prefix {
			return a, fmt.Errorf("the cluster resource is named %q (literal), not %q", kafkaCluster, cr.ResourceName)
		}
		a.Name = broker.Wildcard
	}
	if a.Principal, err = hermesPrincipal(cr.Principal); err != nil {
		return a, err
	}
	if a.Action, err = action(cr.Operation); err != nil {
		return a, err
	}
	switch cr.PermissionType {
	case kmsg.ACLPermissionTypeAllow:
	case kmsg.ACLPermissionTypeDeny:
		a.Deny = true
	default:
		return a, fmt.Errorf("an ACL's permission is ALLOW or DENY, not %s", cr.PermissionType)
	}
	a.Host = cr.Host
	if a.Host == broker.Wildcard {
		a.Host = ""
	}
	if err := a.Validate(); err != nil {
		return a, err
	}
	return a, nil
}

func deleteACLs(c *conn, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for _, rf := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		f, err := parseFilter(rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			resp.Results = append(resp.Results, r)
			continue
		}
		acls, err := c.listACLs(f)
		if err == nil && len(acls) > 0 {
			// Remove exactly the ACLs listed: each by all its fields.
			exact := make([]broker.ACLFilter, len(acls))
			for i, a := range acls {
				exact[i] = broker.ACLFilter{Principal: a.Principal, Kind: a.Kind, Name: a.Name, Prefix: a.Prefix, PatternSet: true,
					Action: a.Action, Deny: a.Deny, PermissionSet: true, Host: a.Host}
			}
			_, err = c.s.api.RemoveACLs(c.context(), exact)
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = code(err, scopeCluster), message(err)
			resp.Results = append(resp.Results, r)
			continue
		}
		for _, a := range acls {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kafkaResourceType(a.Kind), aclName(a), kafkaPattern(a)
			m.Principal, m.Host = "User:"+a.Principal, aclHost(a)
			m.Operation, m.PermissionType = kafkaOperation(a.Action), kafkaPermission(a)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
