//go:build !linux

package sigdtest

import "syscall"

// DeathSignal: without Linux's Pdeathsig, a child is ended by the test's
// cleanup only.
func DeathSignal() *syscall.SysProcAttr { return nil }
