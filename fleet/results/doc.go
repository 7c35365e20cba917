// Package results is the schema of a fleet run's results (`sigctl fleet`
// writes it as JSON: bench/fleet-run.json is make bench's reduced fleet,
// bench/fleet-full.json the full run, and package report reads both;
// bench/fleet.json is another file, the training fleet simulation's): what
// was measured on the running system, what was counted independently, and
// the modelled constants some figures also depend on, each named beside its
// figure. It is pure: types, their JSON form, and the arithmetic every
// reader of the file needs (percentiles, the figures derived from the
// measurements and the constants), so that a report recomputing Table I at
// another host budget gets what the run printed.
//
// # Versions
//
// Results.Schema is SchemaVersion ("sig.fleet.results/v1"). A reader
// refuses any other (Read): a change that removes or redefines a field
// needs a new version; adding a field does not (Store, Costs and the
// steps' Units and Store were added so: older files read without them).
//
// # Contents
//
// Besides the run's configuration (Fleet, with the seed the whole fleet;
// Run; Machine, with the load averages) and the raw records (Steps, one
// per submission; Epochs; Pipelines), the series a report plots:
//
//   - HitRates: an epoch a point, block and component hit rates of the
//     epoch's submissions, per phase, and cumulative (cold start to
//     steady state); SteadyState sums the last third of the epochs.
//   - Amortization: an epoch a point, the pipelines submitted so far and
//     each side's cumulative CPU (SIG = workers + SIG reader, LIG = LIG
//     reader), their ratio, and the ratio over the epoch alone.
//   - Reuse: the distribution of pipelines per ready memo block at the
//     end (histogram, mean, p50/p90/p99, max), sigd's and the Ledger's;
//     ReuseSweep: the plan's reuse with one knob changed (counted, not
//     run, labelled so).
//   - Store: the object store's requests (by S3 API, classed GET, HEAD,
//     PUT, LIST, DELETE as stores price them) and bytes both ways, per
//     side (workers, SIG reader, LIG reader) and for the whole run, the
//     units each reader read (requests per unit), and StoreFit, MinIO's
//     CPU in the reader phases split between requests and bytes (which
//     of the two bounds it). Steps carry each phase's. Absent (nil) in
//     runs from before issue 28.
//   - Costs (internal/figure's shape): the requests at a public object
//     store's per-request prices beside the CPU at a core-hour's price
//     (Prices: S3 Standard and EC2 on-demand, each with its source), per
//     side, what a GET and a PUT cost in core time, and SIG's cost over
//     LIG's with a hosted store, each swept over its prices.
//   - TableI (percentiles per phase, and the sensitivity rows), Figure6
//     (a row per pipeline, reductions, sensitivity), Targets (issues 18's
//     and 28's, met, not met or not measured, with notes and, for the
//     storage targets, the bound the store's bytes set), Checks.
//
// Phases: "initial" is a pipeline's first submission, training over its
// history; "caught-up" its later ones, one new slot each. Every unit is
// read in both modes; Table I takes SIG readers for the initial phase and
// LIG readers for the caught-up one, as the paper's two phases.
//
// WriteSummary prints all of it as text (`sigctl fleet`'s output,
// bench/fleet-*.txt).
//
// # What is measured and what is modelled
//
// Measured, from the running processes: every CPU figure (each process's
// CPU time, user plus system: the kernel's per-process CPU clock while it
// runs, which is what getrusage and /proc/<pid>/stat report, and the
// rusage of Wait4 for a worker process that has exited; MinIO's split by
// the phase of the run that caused it), examples read,
// hit counts (sigd's answers to each submission), reuse (sigd's Stats and
// the Ledger's independent count), whether SIG and LIG sent the same
// bytes, and the object store's requests and bytes (MinIO's own counters,
// split by phase as its CPU is).
//
// Modelled (Constant: its value, unit and source): the CPU a TPU
// host offers to input reading, the examples per second an accelerator
// demands, accelerator chips per host and the prices of chip-hours and
// core-hours. Table I and the Figure 6 analog combine measured CPU per
// example with them. Table I's sensitivity rows show the same percentiles
// with each of its constants halved and doubled (the ratios are linear in
// them); Figure 6's show its total cost reduction with examples/s at 0.1x
// to 100x, the chip-hour at 0.1x and the core-hour at 10x (what an example
// costs on the accelerator against what its input costs on CPU decides
// it). The reader reduction is free of constants. Costs are modelled too:
// measured requests and CPU at published prices (Prices), each figure
// with its constants and a sweep of each at 0.25x to 4x.
//
// It does not run anything (fleet/run) or draw anything (the report);
// the sweep only counts (gen.Plan).
package results
