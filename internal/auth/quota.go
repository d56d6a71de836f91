package auth

import (
	"sync"
	"sync/atomic"
	"time"
)

// Quota bounds what one principal may do per second on one node (0: no
// bound). As in Kafka, quotas are per node: a principal spread over n
// nodes may use n times the rate.
type Quota struct {
	ProduceBytes int64 // record bytes published per second
	FetchBytes   int64 // record bytes read per second
	Requests     int64 // requests per second
}

// IsZero reports whether q bounds nothing.
func (q Quota) IsZero() bool { return q == Quota{} }

// quotaWindow is how much of a rate may be used in a burst: a principal
// that was idle may spend one second of its rate at once.
const quotaWindow = time.Second

// bucket is a token bucket allowing a debt: a request is admitted when
// the bucket is not in debt, and its cost is charged whatever its size
// (a batch larger than the rate still goes through, then the principal
// waits it off). Throttling is by the time the debt takes to repay,
// Kafka's throttle time.
type bucket struct {
	rate   float64 // per second
	tokens float64
	last   time.Time
}

func (b *bucket) refill(now time.Time) {
	if !b.last.IsZero() {
		b.tokens += now.Sub(b.last).Seconds() * b.rate
		if limit := b.rate * quotaWindow.Seconds(); b.tokens > limit {
			b.tokens = limit
		}
	}
	b.last = now
}

// wait is how long until the bucket is out of debt (0: now).
func (b *bucket) wait() time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// Quotas meters principals against their quotas.
type Quotas struct {
	active  atomic.Bool // any quota set: Admit and Charge can skip the lock otherwise
	mu      sync.Mutex
	limits  map[string]Quota // by principal; Wildcard: everyone else's
	buckets map[quotaKey]*bucket
}

type quotaKey struct {
	principal string
	kind      QuotaKind
}

// QuotaKind is what a quota meters.
type QuotaKind uint8

// The metered quantities.
const (
	QuotaProduce QuotaKind = iota + 1
	QuotaFetch
	QuotaRequests
)

// NewQuotas returns a meter with no quotas.
func NewQuotas() *Quotas {
	return &Quotas{limits: map[string]Quota{}, buckets: map[quotaKey]*bucket{}}
}

// Set replaces the quotas (by principal; Wildcard applies to principals
// without their own).
func (q *Quotas) Set(limits map[string]Quota) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits = limits
	clear(q.buckets) // rates changed: start afresh
	q.active.Store(len(limits) > 0)
}

// Active reports whether any quota is set.
func (q *Quotas) Active() bool { return q.active.Load() }

// Limit returns principal's quota.
func (q *Quotas) Limit(principal string) Quota {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.limitLocked(principal)
}

func (q *Quotas) limitLocked(principal string) Quota {
	if l, ok := q.limits[principal]; ok {
		return l
	}
	return q.limits[Wildcard]
}

func (q Quota) rate(k QuotaKind) int64 {
	switch k {
	case QuotaProduce:
		return q.ProduceBytes
	case QuotaFetch:
		return q.FetchBytes
	case QuotaRequests:
		return q.Requests
	}
	return 0
}

// Admit asks whether principal may now do something that costs amount of
// k: 0 when it may (the cost is charged), else how long to wait first
// (nothing is charged). A principal without a quota on k is always
// admitted.
func (q *Quotas) Admit(principal string, k QuotaKind, amount int64, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	rate := q.limitLocked(principal).rate(k)
	if rate <= 0 {
		return 0
	}
	key := quotaKey{principal, k}
	b := q.buckets[key]
	if b == nil {
		b = &bucket{rate: float64(rate), tokens: float64(rate) * quotaWindow.Seconds(), last: now}
		q.buckets[key] = b
	}
	b.refill(now)
	if w := b.wait(); w > 0 {
		return w
	}
	b.tokens -= float64(amount)
	return 0
}

// Charge records amount of k used by principal after the fact (a read's
// size is known once it is done), and returns how long the principal
// should then wait (0: none).
func (q *Quotas) Charge(principal string, k QuotaKind, amount int64, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	rate := q.limitLocked(principal).rate(k)
	if rate <= 0 {
		return 0
	}
	key := quotaKey{principal, k}
	b := q.buckets[key]
	if b == nil {
		b = &bucket{rate: float64(rate), tokens: float64(rate) * quotaWindow.Seconds(), last: now}
		q.buckets[key] = b
	}
	b.refill(now)
	b.tokens -= float64(amount)
	return b.wait()
}
