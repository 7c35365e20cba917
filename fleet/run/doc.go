// Package run runs a generated fleet (fleet/gen) on a real SIG and
// measures it (paper VII.B-C; `sigctl fleet`, bench/fleet-run.sh): the
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
// end; the rusage of Wait4 for a worker stopped on the way). sigd's CPU is
// reported apart (both sides pay it); MinIO's is reported whole and, as
// the timeline does one thing at a time, split by the side that caused it.
// So are the requests MinIO served and the bytes it moved: its own
// counters (devenv.S3Traffic, metrics v3) are read at each phase's
// boundaries with its CPU, the counters first at a start and last at an
// end, so that a scrape's own CPU falls between phases.
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
// The fleet's steps (gen.Fleet.Steps) run in order, one thing at a time.
// Each submission is memoized whole before anything else happens (the run
// polls its read solution), so a block hit is exactly a (component, block)
// pair an earlier submission asked for, and the worker processes' CPU
// meanwhile is that submission's memoization. Then every unit of the
// step's new range is read, first in SIG mode from one reader, then in LIG
// mode from the other, so each reader process's CPU delta around a step's
// units is that step's, and MinIO's CPU during each phase is the storage
// that phase's side caused (the workers', the SIG reader's, the LIG
// reader's). Every unit's bytes are hashed and SIG's must equal LIG's.
// After an epoch's last step the run records the cumulative CPU of every
// process and sigd's reuse (the curve of SIG against LIG as the fleet
// grows).
//
// # The checks
//
// A gen.Ledger counts each submission from the fleet's graphs
// (canonicalized with canon) and the catalog's blocks (listed
// from sigd, assigned to slots by their events' times): sigd's answers
// must equal it at every submission, sigd's Stats must sum them, and
// sigd's reuse distribution (Stats.memo_blocks_by_pipelines, from
// matching's exact Reuse) must equal the Ledger's. The fleet's plan
// (gen.Fleet.Plan, from the spec alone) must give the same per epoch.
// Results.Checks records each; TestFleetAccounting asserts them on a
// reduced fleet.
//
// # Figures
//
// From the phases: the object store's requests and bytes per side, per
// unit read, and MinIO's CPU fitted to them (results.NewStore), priced at
// published prices beside the CPU (results.NewCosts). From the epochs: the
// hit rate over time (results.NewHitRates) and the
// amortization curve (results.NewAmortization: cumulative CPU of SIG and
// LIG at each epoch's end against the pipelines submitted so far, from
// FirstEpoch up to Pipelines, and the ratio over each epoch alone). At the
// end: the reuse distribution, Table I (per-pipeline reader CPU per
// example, times a modelled examples/s, over a modelled host budget; the
// phases are a pipeline's initial submission, its history, read from SIG,
// and its caught-up ones, a new slot each, read LIG, each unit being read
// both ways), the Figure 6 analog, the plan's reuse at other settings of
// the knobs that decide it (results.NewReuseSweep) and the targets
// (results.NewTargets).
//
// # Scale knobs
//
// The fleet's are gen.Config's (fleet/gen's doc). The run's:
//
//	RowsPerBlock       10000  events per raw block (one per second of event time)
//	BlocksPerSlot      2      raw blocks per slot (one ingestion window)
//	WorkersMax         2      `sigd worker` processes at most (the autoscaler decides)
//	WorkerConcurrency  1      tasks per worker process
//	ReadConcurrency    2      units of a pipeline in flight at each reader
//
// The work is about pipelines x inputs x slots read x RowsPerBlock x
// BlocksPerSlot for the LIG reader (every pipeline computes its inputs),
// the same examples served from memo objects for the SIG reader, and
// distinct components x blocks for the workers. The defaults (300
// pipelines, 23 slots of 2 blocks of 10000 rows, 68M examples read each
// way) take about 9 minutes on 2 cores shared with other work (load
// 16-21); TestFleetAccounting's fleet (12 pipelines, 500-row blocks) 20
// to 40 seconds.
//
// It does not own the generator (fleet/gen), the results' schema and
// figures (fleet/results), or any of the processes it starts.
package run
