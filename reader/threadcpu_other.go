//go:build !linux

package reader

import "time"

// onThreadCPU runs f; without Linux's thread CPU clock it reports 0, and
// MetricTransform stays 0.
func onThreadCPU(f func()) time.Duration {
	f()
	return 0
}
