//go:build !linux

package cpuclock

import (
	"errors"
	"time"
)

// Process needs Linux's per-process CPU clocks.
func Process(pid int) (time.Duration, error) {
	return 0, errors.New("cpuclock: a process's CPU clock needs Linux")
}
