//go:build unix

package transform

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time this process has used (user and system, GC
// workers included). With -cpu 1 it measures the work a benchmark does on
// its one core, unaffected by time spent waiting for a core on a shared
// machine.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
