//go:build linux || darwin || freebsd || netbsd || openbsd

package pebbleutil

import (
	"io"
	"os"
	"syscall"
)

// lockHolder reports whether another process holds the POSIX write lock
// Pebble takes on path, and its pid (F_GETLK answers with the holder).
func lockHolder(path string) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		return 0, false
	}
	return int(lk.Pid), true
}
