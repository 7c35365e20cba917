//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package arrowfile

import (
	"io"
	"os"
)

// mapFile reads the file whole where this package does not map files: one
// copy of every column, still none of them decoded but the ones read.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
