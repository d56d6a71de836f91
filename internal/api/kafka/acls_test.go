package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// TestACLFilterPatterns: Kafka's pattern types select ACLs as Kafka
// does; MATCH finds every ACL that applies to a resource name.
func TestACLFilterPatterns(t *testing.T) {
	acls := []broker.ACL{
		{Principal: "alice", Kind: broker.ResourceTopic, Name: "orders", Action: broker.ActionWrite},
		{Principal: "alice", Kind: broker.ResourceTopic, Name: "ord", Prefix: true, Action: broker.ActionRead},
		{Principal: "*", Kind: broker.ResourceTopic, Name: "*", Action: broker.ActionDescribe, Deny: true},
		{Principal: "bob", Kind: broker.ResourceTopic, Name: "logs", Action: broker.ActionRead, Host: "10.0.0.1"},
		{Principal: "bob", Kind: broker.ResourceCluster, Name: "*", Action: broker.ActionAlter},
	}
	name := func(s string) *string { return &s }
	cases := []struct {
		what    string
		pattern kmsg.ACLResourcePatternType
		typ     kmsg.ACLResourceType
		name    *string
		perm    kmsg.ACLPermissionType
		host    *string
		want    []int
	}{
		{"literal orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourceTypeTopic, name("orders"), kmsg.ACLPermissionTypeAny, nil, []int{0}},
		{"match orders", kmsg.ACLResourcePatternTypeMatch, kmsg.ACLResourceTypeTopic, name("orders"), kmsg.ACLPermissionTypeAny, nil, []int{0, 1, 2}},
		{"prefixed any name", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLResourceTypeAny, nil, kmsg.ACLPermissionTypeAny, nil, []int{1}},
		{"any denials", kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourceTypeAny, nil, kmsg.ACLPermissionTypeDeny, nil, []int{2}},
		{"cluster", kmsg.ACLResourcePatternTypeMatch, kmsg.ACLResourceTypeCluster, name(kafkaCluster), kmsg.ACLPermissionTypeAny, nil, []int{4}},
		{"host", kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourceTypeAny, nil, kmsg.ACLPermissionTypeAny, name("10.0.0.1"), []int{3}},
		{"host *", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourceTypeTopic, nil, kmsg.ACLPermissionTypeAllow, name("*"), []int{0}},
	}
	for _, c := range cases {
		f, err := parseFilter(c.typ, c.name, c.pattern, nil, c.host, kmsg.ACLOperationAny, c.perm)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var got []int
		for i, a := range acls {
			if f.matches(a) {
				got = append(got, i)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: matched %v, want %v", c.what, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: matched %v, want %v", c.what, got, c.want)
				break
			}
		}
	}
	if _, err := parseFilter(kmsg.ACLResourceTypeTopic, nil, kmsg.ACLResourcePatternTypeAny, name("Group:x"), nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny); err == nil {
		t.Error("a principal not of type User was accepted")
	}
}
