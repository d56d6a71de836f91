//go:build !linux

package bench

import "time"

func precisePacing() func() { return func() {} }

func preciseSleep(d time.Duration) { time.Sleep(d) }
