//go:build !linux

package replication

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not known: TCP
// keepalive finds a silent peer.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
