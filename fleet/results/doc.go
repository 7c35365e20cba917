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
// needs a new version; adding a field does not.
//
// # What is measured and what is modelled
//
// Measured, from the running processes: every CPU figure (each process's
// CPU time, user plus system: the kernel's per-process CPU clock while it
// runs, which is what getrusage and /proc/<pid>/stat report, and the
// rusage of Wait4 for a worker process that has exited), examples read,
// hit counts (sigd's answers to each submission), reuse (sigd's Stats and
// the Ledger's independent count), and whether SIG and LIG sent the same
// bytes.
//
// Modelled (Constant, with Modelled set and its source): the CPU a TPU
// host offers to input reading, the examples per second an accelerator
// demands, accelerator chips per host and the prices of chip-hours and
// core-hours. Table I and the Figure 6 analog combine measured CPU per
// example with them; the sensitivity rows show the same percentiles with
// each constant halved and doubled (the figures are linear in them).
//
// It does not run anything (fleet/run) or draw anything (the report).
package results
