package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// readBackResult is how the read-back after a run went.
type readBackResult struct {
	done bool   // the log was read from its beginning to its end
	err  string // why it was not (when one was needed)
}

// readBack reads the run's topics again from their beginning, after the
// live subscribers stopped with acknowledged records they never received:
// each such record found is stored (reported as found on read-back), and
// only those still absent once the log was read to its end are lost. The
// end is where nothing more arrives for DrainIdle; DrainTimeout bounds the
// whole read. Nothing to do when every acknowledged record was received,
// in performance mode (records the ring evicted are gone by contract) and
// for the targets that keep nothing (core NATS, the relay).
func (r *run) readBack(ctx context.Context) readBackResult {
	missing := r.v.Outstanding()
	if !r.cfg.Verify || missing <= 0 || r.cfg.Mode == "performance" {
		return readBackResult{}
	}
	switch r.t.Name() {
	case "nats-core", "relay":
		return readBackResult{err: "the target keeps no log to read back"}
	}
	began := time.Now()
	r.event("read-back", fmt.Sprintf("%d acknowledged records not received: reading the log back from its beginning", missing))
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	defer cancel()
	found := int64(0)
	for _, topic := range r.topics {
		n, err := r.readBackTopic(ctx, topic, missing-found)
		found += n
		if err != nil {
			res := readBackResult{err: fmt.Sprintf("reading %s back: %v", topic, err)}
			r.event("read-back-failed", fmt.Sprintf("%s after %.1fs; %d of %d found", res.err, time.Since(began).Seconds(), found, missing))
			return res
		}
		if found >= missing {
			break
		}
	}
	r.event("read-back-done", fmt.Sprintf("%d of %d found in %.1fs", found, missing, time.Since(began).Seconds()))
	return readBackResult{done: true}
}

// errReadBackIdle ends a topic's read-back: nothing arrived for DrainIdle,
// the end of its log.
var errReadBackIdle = errors.New("idle")

// readBackTopic reads topic from its beginning until want records not
// received live were found or its end was reached, and returns how many
// it found.
func (r *run) readBackTopic(ctx context.Context, topic string, want int64) (int64, error) {
	sub, err := r.t.Subscribe(ctx, topic, SubOptions{FromBeginning: true})
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	// A watchdog ends the read once nothing arrived for DrainIdle (a
	// deadline per record would cost a timer per record).
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	go func() {
		t := time.NewTicker(max(min(r.cfg.DrainIdle/4, 100*time.Millisecond), time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case now := <-t.C:
				if now.Sub(time.Unix(0, last.Load())) > r.cfg.DrainIdle {
					stop(errReadBackIdle)
					return
				}
			}
		}
	}()
	found := int64(0)
	for found < want {
		d, err := sub.Next(rctx)
		switch {
		case err == nil:
		case errors.Is(context.Cause(rctx), errReadBackIdle):
			return found, nil // the end of the log
		case ctx.Err() != nil:
			return found, fmt.Errorf("not at its end after %v", r.cfg.DrainTimeout)
		default:
			return found, err
		}
		last.Store(time.Now().UnixNano())
		if r.v.ReadBack(d) {
			found++
		}
	}
	return found, nil
}
