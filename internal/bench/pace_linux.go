package bench

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// precisePacing pins the calling goroutine to its thread and makes the
// thread's timer slack 1 ns, so that preciseSleep wakes when asked (the
// default slack is 50 µs); the returned function undoes the pinning.
func precisePacing() func() {
	runtime.LockOSThread()
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0) //nolint:errcheck // best effort
	return runtime.UnlockOSThread
}

// preciseSleep sleeps d in nanosleep(2), on a high-resolution timer.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
