//go:build linux || darwin || freebsd || netbsd || openbsd

package arrowfile

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the size bytes of f read-only and returns them and what
// unmaps them. MAP_SHARED: nothing is copied on write, as nothing writes.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, nil, fmt.Errorf("cannot map %d bytes", size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
