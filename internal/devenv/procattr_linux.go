package devenv

import "syscall"

// childProcAttr: a process group of its own, and SIGKILL when the parent
// dies (Pdeathsig is Linux's).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
