package sigdtest

import "syscall"

// DeathSignal is the SysProcAttr that makes a child die with the test
// process (Linux's Pdeathsig), for tests that start processes.
func DeathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
