package chaos

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// clockJump is a jump of the machine's wall clock in progress: start is
// when it began (with Go's monotonic reading, which the jump does not
// move), so the true time is always start's wall time plus the monotonic
// time elapsed since.
type clockJump struct {
	start time.Time
	delta time.Duration
}

// jumpClock moves the wall clock (CLOCK_REALTIME) forward or back by up to
// five minutes for the hold, then puts it back where it would be. The
// nodes share the machine's clock (there is no per-namespace wall clock),
// so every node and the campaign itself see the jump; Hermes must not
// rely on the wall clock for anything but timestamps. Timers and timeouts
// run on the monotonic clock and do not move.
func (c *campaign) jumpClock(ctx context.Context, hold time.Duration) (string, error) {
	delta := time.Duration(5+c.rng.IntN(296)) * time.Second
	if c.rng.IntN(2) == 0 {
		delta = -delta
	}
	start := time.Now()
	if err := setWallClock(start.Add(delta)); err != nil {
		return fmt.Sprintf("skipped: cannot set the clock: %v", err), nil
	}
	c.clock = &clockJump{start: start, delta: delta}
	desc := fmt.Sprintf("the wall clock moved by %+v", delta)
	f := c.h.beginFault("clock-jump", desc)
	sleep(ctx, hold)
	if err := c.restoreClock(); err != nil {
		return desc, err
	}
	c.h.endFault(f)
	return desc, nil
}

// restoreClock undoes the clock jump in progress, if any.
func (c *campaign) restoreClock() error {
	j := c.clock
	if j == nil {
		return nil
	}
	if err := setWallClock(j.start.Round(0).Add(time.Since(j.start))); err != nil {
		return fmt.Errorf("put the wall clock back (it is %v off): %w", j.delta, err)
	}
	c.clock = nil
	return nil
}

func setWallClock(t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
}
