package reader

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// onThreadCPU runs f locked to its OS thread and returns the CPU time the
// thread spent in it (CLOCK_THREAD_CPUTIME_ID): what f cost, whatever else
// the machine ran meanwhile, the GC work f's allocations assisted
// included. MetricTransform sums it.
func onThreadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	f()
	return threadCPU() - t0
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
