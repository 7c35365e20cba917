//go:build !unix

package transform

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
