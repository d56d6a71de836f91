package broker

import (
	"context"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
)

func TestKindTableEveryKind(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range kinds {
		wrapped := errorf(k.kind, "detail")
		if got := Code(wrapped); got != k.name {
			t.Errorf("Code(%v) = %s, want %s", wrapped, got, k.name)
		}
		if KindOf(k.name) != k.kind || seen[k.name] {
			t.Errorf("KindOf(%s) = %v (named twice: %v)", k.name, KindOf(k.name), seen[k.name])
		}
		seen[k.name] = true
		if Retriable(wrapped) != k.retriable {
			t.Errorf("Retriable(%v) = %v", wrapped, !k.retriable)
		}
	}
	if got := Code(context.Canceled); got != "INTERNAL" || Retriable(context.Canceled) {
		t.Errorf("Code(context.Canceled) = %s, retriable %v", got, Retriable(context.Canceled))
	}
}

// An error crosses the node-to-node service with its kind, detail and
// hints.
func TestNodeErrorRoundTrip(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	for _, k := range kinds {
		in := &kindError{kind: k.kind, msg: "partition t/0", retryAfter: 75_000_000, leaderNode: 3}
		out := b.fromNodeError(nodeError(in))
		if Code(out) != k.name || detail(out) != "partition t/0" || RetryAfter(out) != in.retryAfter || leaderNode(out) != 3 {
			t.Errorf("%s came back as %v (retry %v, leader %d)", k.name, out, RetryAfter(out), leaderNode(out))
		}
	}
	if err := b.fromNodeError(&nodepb.Error{Code: "SOMETHING_NEW", Message: "x"}); !Retriable(err) {
		t.Errorf("an unknown code is %v; want a retriable UNAVAILABLE", err)
	}
}
