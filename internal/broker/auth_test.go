package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// ruleAuthorizer allows what its rules allow, and records what it was
// asked.
type ruleAuthorizer struct {
	mu    sync.Mutex
	allow map[string]bool // "principal action kind/name"
	asked []string
}

func (a *ruleAuthorizer) Authorize(p Principal, act Action, r Resource) error {
	key := fmt.Sprintf("%s %s %s/%s", p.Name, act, r.Kind, r.Name)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, key)
	if a.allow[key] {
		return nil
	}
	return errors.New("no rule allows it")
}

// The core asks the authorizer before every request, with the principal
// on the request's context; a refusal is ErrPermissionDenied and changes
// nothing; listings show what the principal may describe.
func TestEveryRequestIsAuthorized(t *testing.T) {
	az := &ruleAuthorizer{allow: map[string]bool{
		"admin create topic/orders": true, "admin create topic/secret": true,
		"admin describe topic/orders": true, "alice describe topic/orders": true,
		"alice write topic/orders": true, " read topic/orders": true, // fetchAll reads as anonymous
	}}
	b := openTest(t, t.TempDir(), func(c *Config) { c.Authorizer = az })
	admin := WithPrincipal(context.Background(), Principal{Name: "admin"})
	alice := WithPrincipal(context.Background(), Principal{Name: "alice"})
	bob := WithPrincipal(context.Background(), Principal{Name: "bob"})
	for _, name := range []string{"orders", "secret"} {
		if _, err := b.CreateTopic(admin, name, TopicConfig{}, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Publish(alice, &PublishRequest{Topic: "orders", Partition: AnyPartition, Records: recs("a", 2)}); err != nil {
		t.Fatalf("alice may write orders: %v", err)
	}
	denied := map[string]error{}
	denied["create"] = func() error { _, err := b.CreateTopic(bob, "more", TopicConfig{}, false); return err }()
	denied["delete"] = b.DeleteTopic(alice, "orders")
	denied["describe"] = func() error { _, err := b.Topic(bob, "orders"); return err }()
	denied["publish"] = func() error {
		_, err := b.Publish(bob, &PublishRequest{Topic: "orders", Partition: AnyPartition, Records: recs("b", 1)})
		return err
	}()
	denied["publish async"] = func() error {
		ch := make(chan error, 1)
		b.PublishAsync(bob, &PublishRequest{Topic: "orders", Partition: AnyPartition, Records: recs("b", 1)}, func(_ *PublishResult, err error) { ch <- err })
		return <-ch
	}()
	denied["fetch"] = func() error { _, err := b.Fetch(alice, FetchRequest{Topic: "orders"}); return err }()
	denied["offset for time"] = func() error { _, err := b.OffsetForTime(bob, "orders", 0, 0); return err }()
	denied["subscribe"] = func() error { _, err := b.Subscribe(alice, SubscribeOptions{Topic: "orders"}); return err }()
	denied["commit"] = b.CommitOffsets(alice, "g", "", []Offset{{Topic: "orders", Offset: 1}})
	denied["describe group"] = func() error { _, err := b.DescribeGroup(alice, "g"); return err }()
	denied["describe cluster"] = func() error { _, err := b.DescribeCluster(alice); return err }()
	denied["add node"] = b.AddNode(alice, 2, "127.0.0.1:1")
	denied["remove node"] = b.RemoveNode(alice, 2)
	denied["rebalance"] = func() error { _, err := b.Rebalance(alice, nil); return err }()
	denied["cancel moves"] = func() error { _, err := b.CancelMoves(alice); return err }()
	for what, err := range denied {
		if !errors.Is(err, ErrPermissionDenied) || Retriable(err) || Code(err) != "PERMISSION_DENIED" {
			t.Errorf("%s: %v; want PERMISSION_DENIED", what, err)
		}
	}
	if got := fetchAll(t, b, "orders", 0); len(got) != 2 {
		t.Fatalf("orders holds %d records after the refusals, want alice's 2", len(got))
	}
	if _, err := b.Topic(admin, "more"); !errors.Is(err, ErrPermissionDenied) && !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("a refused creation: %v", err)
	}
	list, err := b.Topics(alice)
	if err != nil || len(list) != 1 || list[0].Name != "orders" {
		t.Fatalf("alice lists %+v, %v; want only orders, which she may describe", list, err)
	}
	az.mu.Lock()
	defer az.mu.Unlock()
	if len(az.asked) < len(denied) {
		t.Fatalf("the authorizer was asked %d times for %d refusals", len(az.asked), len(denied))
	}
}
