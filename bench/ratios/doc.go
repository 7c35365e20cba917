// Command ratios reads `go test -bench` output of the transform benchmarks
// (BenchmarkOp/<case>/{arrow,plain}, BenchmarkTruncateChain/<case>/{arrow,plain}
// and BenchmarkTypicalComponent/{arrow,plain})
// on stdin and prints, per case, the throughput of the Arrow kernel and of
// the plain row-at-a-time loop and their ratio.
//
// Throughput is rows per second of the process's CPU time (rows/cpu-s):
// with -cpu 1 that is the rate on one core, and unlike wall-clock rows/s it
// does not depend on how much of a core a shared machine gives the run. The
// wall-clock rates are shown too. With -count > 1 each side keeps its best
// run: interference only ever slows a run down.
package main
