//go:build linux

package run

import "syscall"

// childProcAttr makes a child die with the run (Linux's Pdeathsig), so an
// interrupted run leaves no sigd, worker or reader behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
