//go:build !linux

package paramservers

import "syscall"

// childAttr: without Linux's Pdeathsig, a parameter-server child is ended
// when the controller stops it (SIGTERM at exit) only.
func childAttr() *syscall.SysProcAttr { return nil }
