package bench

import (
	"context"
	"time"
)

// pacer says when each record of one worker is due in an open-loop run:
// record i of the run (counting all workers' records interleaved) is due
// at start + i/rate, and worker w sends records w, w+W, w+2W, ... Latency
// is measured from the due time, so a sender that stalls (because the
// broker is slow to answer, or the machine is busy) shows as latency
// instead of silently sending less: no coordinated omission.
//
// With rate 0 the run is closed-loop: every record is due when it is sent.
type pacer struct {
	start   time.Time
	rate    float64 // total records/s of all workers; 0: closed loop
	workers uint64
	worker  uint64
}

// due returns when the worker's j-th record (from 0) is due.
// REQUIRES: p.rate > 0.
func (p pacer) due(j uint64) time.Time {
	i := j*p.workers + p.worker
	return p.start.Add(time.Duration(float64(i) * 1e9 / p.rate))
}

// open reports whether the run is paced (open loop).
func (p pacer) open() bool { return p.rate > 0 }

// wait returns when the worker's j-th record is due (at once when it is
// late), or ctx's error when ctx ends first. It returns the due time; in a
// closed-loop run that is now. t and s are the worker's own.
func (p pacer) wait(ctx context.Context, t *time.Timer, s *sleeper, j uint64) (time.Time, error) {
	if !p.open() {
		return time.Now(), ctx.Err()
	}
	due := p.due(j)
	d := time.Until(due)
	if d <= 0 {
		return due, ctx.Err()
	}
	// Go's timers fire up to a millisecond late (the network poller
	// sleeps in whole milliseconds): that would be latency of the tool,
	// charged to every broker alike. Sleep on the timer, which ctx can
	// interrupt, until about two milliseconds before, then the rest with
	// the sleeper (precise).
	if d > 3*time.Millisecond {
		t.Reset(d - 2*time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop() // Go 1.23+: no stale value can be received after Stop
			return due, ctx.Err()
		}
	}
	s.until(due)
	return due, ctx.Err()
}

// quota returns how many records worker w of workers sends when count
// records are split among them (the first count%workers send one more).
func quota(count int64, workers, w int) int64 {
	q := count / int64(workers)
	if int64(w) < count%int64(workers) {
		q++
	}
	return q
}
