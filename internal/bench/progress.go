package bench

import (
	"fmt"
	"strings"
	"time"
)

// progress prints one line a second to cfg.Progress until the returned
// function is called: rewritten in place with a carriage return on a
// terminal, one plain line a second otherwise.
func (r *run) progress() (stop func()) {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastAcked int64
		for {
			select {
			case <-done:
				if r.cfg.ProgressTTY {
					fmt.Fprintln(w)
				}
				return
			case <-t.C:
			}
			acked := r.v.acked.Load()
			line := r.progressLine(acked - lastAcked)
			lastAcked = acked
			if r.cfg.ProgressTTY {
				fmt.Fprintf(w, "\r%-110s", line)
			} else {
				fmt.Fprintln(w, line)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func (r *run) progressLine(ackedLastSecond int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%6.1fs] sent %d  acked %d (%d/s)", time.Since(r.start).Seconds(), r.v.sent.Load(), r.v.acked.Load(), ackedLastSecond)
	if r.cfg.Verify {
		fmt.Fprintf(&b, "  received %d  outstanding %d", r.v.received.Load(), r.v.Outstanding())
	}
	fmt.Fprintf(&b, "  errors %d", r.errs.total())
	return b.String()
}
