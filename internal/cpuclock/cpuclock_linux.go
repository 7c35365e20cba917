package cpuclock

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Process returns the CPU time of process pid so far, from the clock
// clock_getcpuclockid names: ((^pid)<<3)|2, CPUCLOCK_SCHED of the whole
// thread group.
func Process(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32((^pid)<<3|2), &ts); err != nil {
		return 0, fmt.Errorf("cpu clock of pid %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}
