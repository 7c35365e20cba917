//go:build linux

package paramservers

import "syscall"

// childAttr makes a parameter-server child die with the controller: a
// restarted controller starts its own, and none outlives the job.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
