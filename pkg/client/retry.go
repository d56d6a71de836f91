package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds the retries of retriable failures.
type RetryPolicy struct {
	// MaxAttempts is the number of tries in total, first one included
	// (at least 1).
	MaxAttempts int
	// Backoff is the wait before the second try; it doubles for each
	// further try up to MaxBackoff, with ±20% jitter.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func defaultRetry() RetryPolicy {
	return RetryPolicy{
		MaxAttempts: DefaultRetryAttempts,
		Backoff:     DefaultRetryBackoff,
		MaxBackoff:  10 * DefaultRetryBackoff,
	}
}

// normalize makes the policy usable: at least one attempt, a positive
// backoff and MaxBackoff >= Backoff.
func (p RetryPolicy) normalize() RetryPolicy {
	if p.MaxAttempts < 1 {
		p.MaxAttempts = 1
	}
	if p.Backoff <= 0 {
		p.Backoff = time.Millisecond
	}
	if p.MaxBackoff < p.Backoff {
		p.MaxBackoff = p.Backoff
	}
	return p
}

// delay is the wait after failed attempt number attempt (1-based): the
// exponential backoff with jitter, but never less than the broker's hint.
func (p RetryPolicy) delay(attempt int, hint time.Duration) time.Duration {
	d := p.Backoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	// ±20% jitter so that many clients do not retry in step.
	d = d*4/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
	return max(d, hint)
}

// sleepCtx waits for d or until ctx ends; it returns ctx.Err() in the
// latter case.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
