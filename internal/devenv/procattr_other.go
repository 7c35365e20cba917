//go:build unix && !linux

package devenv

import "syscall"

// childProcAttr: a process group of its own. Without Linux's Pdeathsig a
// server outlives a parent that crashed; Stop and the tests' cleanups end
// it otherwise.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
