package partlog

import (
	"os"

	"golang.org/x/sys/unix"
)

// pwritev writes iov at off in one system call (at most maxIOV slices)
// and returns how many bytes it wrote.
func pwritev(f *os.File, iov [][]byte, off int64) (int, error) {
	if len(iov) > maxIOV {
		iov = iov[:maxIOV]
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Pwritev(int(fd), iov, off)
			if werr != unix.EINTR {
				return true
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return n, werr
}
