// Package run runs a generated fleet (fleet/gen) on a real SIG and
// measures it (paper VII.B-C; `sigctl fleet run`, bench/fleet.sh): the
// processes are the system's own binaries, each measured by its own CPU
// clock, and the results are fleet/results'.
//
// # The system
//
// `sigd dev` (which starts MinIO as its child and a kfake Kafka inside)
// runs with --remote-workers, so no memoization happens inside sigd:
// `sigd worker` processes do it, as many as sigd's autoscaler asks for
// (Stats.workers_desired, read every second; the run plays the
// orchestrator, up to Config.WorkersMax). Two `reader` processes serve the
// units, one in SIG mode (memo objects) and one in LIG mode (computing
// every input from the raw block). So the CPU of SIG is the worker
// processes' plus the SIG reader's, and the CPU of LIG is the LIG
// reader's, each read from the kernel per process (proc.go: the process's
// CPU clock, what getrusage counts, checked against /proc/<pid>/stat at the
// end; the rusage of Wait4 for a worker stopped on the way). sigd's and
// MinIO's CPU are reported apart: both sides pay them.
//
// # The data
//
// Events come from warehouse/gen at one event per second of event time
// into Kafka raw.ads; sigd ingests them with a window of
// RowsPerBlock*BlocksPerSlot seconds and --rows-per-block RowsPerBlock, so
// each slot of the fleet's timeline is one window of BlocksPerSlot blocks.
//
// # The timeline
//
// The fleet's steps (gen.Fleet.Steps) run in order. Each submission is
// memoized whole before the next is made (the run polls its read
// solution), so a block hit is exactly a (component, block) pair an
// earlier submission asked for, and the worker processes' CPU meanwhile
// is that submission's memoization. As the next submission is memoized,
// the step before it is read: every unit of its new range, in SIG mode on
// one reader and LIG mode on the other at once, one step at a time per
// reader, so each reader process's CPU delta around a step's units is
// that step's. Every unit's bytes are hashed and SIG's must equal LIG's.
// After an epoch's last step is read the run records the cumulative CPU
// of every process and sigd's reuse (the curve of SIG against LIG as the
// fleet grows).
//
// # The checks
//
// A gen.Ledger counts each submission from the fleet's graphs
// (canonicalized with matching/canon) and the catalog's blocks (listed
// from sigd, assigned to slots by their events' times): sigd's answers
// must equal it at every submission, sigd's Stats must sum them, and
// sigd's reuse distribution (Stats.memo_blocks_by_pipelines, from
// matching's exact Reuse) must equal the Ledger's. The fleet's plan
// (gen.Fleet.Plan, from the spec alone) must give the same per epoch.
// Results.Checks records each; TestFleetAccounting asserts them on a
// reduced fleet.
//
// It does not own the generator (fleet/gen), the results' schema and
// figures (fleet/results), or any of the processes it starts.
package run
