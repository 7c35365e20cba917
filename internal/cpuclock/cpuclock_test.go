//go:build linux

package cpuclock

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// rusage is this process's user plus system time from getrusage.
func rusage(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestProcessCountsWork: this process's clock advances as getrusage does
// over a busy loop (whatever else the machine runs meanwhile), and a
// process that is gone is an error.
func TestProcessCountsWork(t *testing.T) {
	r0 := rusage(t)
	c0, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for deadline := time.Now().Add(30 * time.Second); rusage(t)-r0 < 40*time.Millisecond && time.Now().Before(deadline); {
		x++
	}
	c1, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	r1 := rusage(t)
	if c, r := c1-c0, r1-r0; c < 30*time.Millisecond || c > r+5*time.Millisecond || x == 0 {
		t.Errorf("over a busy loop the clock advanced %v, getrusage %v", c, r)
	}
	// A child that exited and was reaped: its pid names no process.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Process(cmd.Process.Pid); err == nil {
		t.Errorf("the CPU clock of pid %d, reaped, read without error", cmd.Process.Pid)
	}
}
