package broker

import (
	"context"
	"time"

	"github.com/hermes-mq/hermes/internal/auth"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Quotas (SetQuota) meter each principal on each node: requests per
// second, record bytes published, record bytes read. A request over its
// principal's request or produce rate is refused with a retriable
// ErrResourceExhausted whose RetryAfter says when the principal is back
// under its rate (Kafka's throttle time); reads are delivered, then the
// principal's next read waits until its debt is repaid.

var quotaNames = map[auth.QuotaKind]string{auth.QuotaProduce: "produce", auth.QuotaFetch: "fetch", auth.QuotaRequests: "requests"}

// admit charges one request, and amount of k (0: none), to the request's
// principal, or refuses it when the principal is over a rate.
func (b *Broker) admit(ctx context.Context, k auth.QuotaKind, amount int64) error {
	q := b.authn.quotas
	if !q.Active() {
		return nil
	}
	p := PrincipalFrom(ctx).Name
	now := time.Now()
	if w := q.Admit(p, auth.QuotaRequests, 1, now); w > 0 {
		b.m.throttled.WithLabelValues("requests").Inc()
		return exhausted(w, "%s is over its request quota; retry in %v", principalName(ctx), w.Round(time.Millisecond))
	}
	if k == 0 {
		return nil
	}
	if w := q.Admit(p, k, amount, now); w > 0 {
		b.m.throttled.WithLabelValues(quotaNames[k]).Inc()
		b.m.rejected.WithLabelValues("quota").Inc()
		return exhausted(w, "%s is over its %s quota; retry in %v", principalName(ctx), quotaNames[k], w.Round(time.Millisecond))
	}
	return nil
}

// publishBytes is what a publish counts against the produce quota.
func publishBytes(req *PublishRequest) int64 {
	if req.Batch != nil {
		return int64(len(req.Batch))
	}
	var n int64
	for i := range req.Records {
		n += record.CreditBytes(&req.Records[i])
	}
	return n
}

// readDebt waits until principal has repaid its fetch debt (or ctx ends).
func (b *Broker) readDebt(ctx context.Context, principal string) error {
	q := b.authn.quotas
	if !q.Active() {
		return nil
	}
	w := q.Admit(principal, auth.QuotaFetch, 0, time.Now())
	if w <= 0 {
		return nil
	}
	b.m.throttled.WithLabelValues("fetch").Inc()
	t := time.NewTimer(w)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// chargeRead charges bytes read to principal's fetch quota.
func (b *Broker) chargeRead(principal string, batches [][]byte) {
	q := b.authn.quotas
	if !q.Active() {
		return
	}
	var n int64
	for _, bt := range batches {
		n += int64(len(bt))
	}
	q.Charge(principal, auth.QuotaFetch, n, time.Now())
}
