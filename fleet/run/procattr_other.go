//go:build unix && !linux

package run

import "syscall"

// childProcAttr: without Linux's Pdeathsig a child outlives a run that
// crashed; a run that ends stops its children itself.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
