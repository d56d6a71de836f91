package bench

import (
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper sleeps a worker until its records are due, precisely, without
// starving the goroutines the worker feeds. (Go's own timers fire up to a
// millisecond late: the network poller sleeps in whole milliseconds.)
//
// Fewer workers than Ps: each worker sleeps in nanosleep(2) on its own
// locked thread with 1 ns timer slack, which wakes within the machine's
// wake-up latency, holding its P while it sleeps: a P is left for
// everything else. As many workers as Ps or more: a worker sleeps on a
// timerfd(2) read through Go's poller, which holds no P. The locked
// sleep for every worker starved the producers the workers fed: on 2
// cores, 10,000/s over 60 SDK producers read publish→ack p50 0.5 s where
// the broker answered in 2 ms, and 8 producers 5–6 ms against 2–3 ms. The
// timerfd for a single worker wakes later when the scheduler is busy:
// the bare relay's p99 at 10,000/s read 1.5–3.5 ms against 0.8–2.0.
type sleeper struct {
	locked bool
	f      *os.File // nil: no timerfd; Go's timer
	fd     int
	buf    [8]byte
}

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// newSleeper returns the sleeper of one of workers workers, for the
// calling goroutine; it closes it.
func newSleeper(workers int) *sleeper {
	if workers < runtime.GOMAXPROCS(0) {
		runtime.LockOSThread()
		unix.Prctl(prSetTimerSlack, 1, 0, 0, 0) //nolint:errcheck // best effort: 50 µs slack otherwise
		return &sleeper{locked: true}
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &sleeper{}
	}
	// A non-blocking descriptor is registered with the poller.
	return &sleeper{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
}

// until sleeps until t (at most a few milliseconds away: it cannot be
// interrupted), never waking before it.
func (s *sleeper) until(t time.Time) {
	d := time.Until(t)
	switch {
	case d <= 0:
	case s.locked:
		ts := unix.NsecToTimespec(int64(d))
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	case s.f != nil:
		its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		if unix.TimerfdSettime(s.fd, 0, &its, nil) != nil {
			time.Sleep(d)
			return
		}
		// The read ends when the timer has expired (at once if it
		// already has); it returns the expiration count, not needed.
		if _, err := s.f.Read(s.buf[:]); err != nil {
			time.Sleep(d) // not expected; late, never early
		}
	default:
		time.Sleep(d)
	}
}

// close undoes newSleeper, on the same goroutine.
func (s *sleeper) close() {
	if s.locked {
		runtime.UnlockOSThread()
	}
	if s.f != nil {
		s.f.Close()
	}
}
