// Package cpuclock reads a process's CPU time from the kernel's
// per-process CPU clock: user plus system time of every thread, exited
// ones included, at nanosecond resolution. It is the accounting getrusage
// and /proc/<pid>/stat report, which /proc rounds to clock ticks (10 ms),
// too coarse for the CPU a process spends on a few units of work. The
// fleet run (fleet/run) and the e2e benchmarks measure processes with it.
package cpuclock
