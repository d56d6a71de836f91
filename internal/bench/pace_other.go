//go:build !linux

package bench

import "time"

// sleeper sleeps a worker until its records are due (pace_linux.go has
// the precise one); here Go's timers, up to a millisecond late.
type sleeper struct{}

func newSleeper(workers int) *sleeper { return &sleeper{} }

// until sleeps until t, never waking before it.
func (s *sleeper) until(t time.Time) { time.Sleep(time.Until(t)) }

func (s *sleeper) close() {}
