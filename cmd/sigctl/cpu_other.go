//go:build !unix

package main

import "time"

// processCPU: not known on this system.
func processCPU() (time.Duration, bool) { return 0, false }
