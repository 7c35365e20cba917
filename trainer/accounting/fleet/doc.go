// Package fleet is the emulated TPU fleet shared by training jobs: a
// scheduler of whole slices (Scheduler), its concurrent form for jobs that
// really train (Shared, a trainer.Allocator), and a virtual-time simulation
// of many jobs (Simulate) that measures the fleet's goodput (MPG paper) and
// reproduces the Ads paper's Table II.
//
// # Scheduler
//
// A fleet of Capacity chips. A job asks for a slice of a given size at a
// priority; it runs only when the whole slice is free (bulk-synchronous
// training cannot use part of one: MPG paper §4, Scheduling Goodput, Figure
// 10). Waiting jobs queue by priority, then arrival; smaller jobs backfill
// around a job that does not fit, within its priority class, never ahead of
// a higher-priority job. A training hold (Ads paper VI.A) returns the job's
// chips to the fleet "so they can be assigned to another queued service"
// while the job keeps demanding them; Victims names the lower-priority
// running jobs whose preemption would make room for a high-priority job.
// Usage is Table II's three columns at an instant: chips training, chips
// demanded by queued jobs, chips demanded by jobs on hold.
//
// # Simulation
//
// Real training jobs are few and short in tests; the fleet's behaviour
// needs hundreds of jobs over weeks. Simulate runs them in virtual time
// (documented in SimConfig with its defaults): jobs arrive, queue, bring up
// their slice (initialization, compile, checkpoint restore), train epochs
// that end in checkpoints, lose the work since the last checkpoint on a
// temporary error, go on permanent holds (a person releases them days
// later) and transient holds (the next epoch's data is pending in SIG),
// releasing their chips either way, and are preempted — by a
// higher-priority job that does not fit, or by maintenance — with a notice:
// the preempted epoch commits if finishing the outstanding work and writing
// the checkpoint fit in the notice (Ads paper VI.B; VII.G reports 61%).
// When initial training is done a job releases its large slice and queues
// for a small caught-up slice (III.A).
//
// Every job's chip-time goes through a goodput.Recorder exactly as a real
// controller's does (allocations, intervals, steps with their ideal time,
// checkpoints, failures, preemptions, phases), so the fleet's SG, RG, PG
// and MPG come from the same code as a real run's. Table II is the time
// average of Usage, as fractions of capacity and relative to the chips
// training (the paper's 1 : 1.03 : 2.49).
//
// # Every figure is modelled (figures.go)
//
// The simulation measures nothing about SIG: its figures follow from its
// constants. The defaults were set, when the simulation was written, to
// give a fleet whose holds and queues look like the paper's, so a figure
// near the paper's says nothing about the system. RunStudy therefore
// reports each figure (internal/figure) as modelled, with the constants
// that decide it and the source of each value (a paper's section, or
// "guess"), and sweeps the deciding ones: Table II's on-hold ratio against
// human_response (and the permanent-error and transient-hold rates), the
// queued ratio against arrival_mean, RG against failure_mtbf and
// input_stall, MPG against program_goodput. The preempted epochs that
// commit are shown next to their closed form (CommitClosedForm): a
// preempted epoch commits when its drain and save fit in the notice, one
// draw each, so the simulated fraction is e^(−save/notice)·notice/(notice +
// drain) up to sampling. Where this system can measure a constant,
// Measured replaces it: the program goodput and input stall of real
// training jobs (the trainer's step records and goodput accounting) and
// the notice-to-checkpoint times of real preemptions (BenchmarkPreemptionCommits
// writes them to bench/preemption.json; `trainer fleet --measured`), and
// the constant's source says how it was measured.
//
// # Stall by cause (stalls.go)
//
// Every job belongs to a client (a team, drawn uniformly from Clients;
// HighPriorityClients, when set, decide the priority by client), and its
// input stall goes through the real ledger, trainer/accounting/stall.Compute,
// as a real job's does, so the fleet's stall is charged to causes by the
// same rules. The simulation records for each job:
//
//   - the readers' stall: the constant input_stall fraction at the end of
//     each epoch is a stall interval with a reader-side wait covering it.
//     The simulation does not model the readers' phases: it is charged to
//     reader_fetch.
//   - SIG's: when an epoch finds its data pending (transient_prob), the
//     wait (exponential, mean transient_mean) is a SIG-side wait on the
//     epoch's data, and sigd's explanation at its start names the work
//     ahead: the other jobs in initial training that hold their slice at a
//     higher priority than the waiting job's, or, when there are none, those
//     at its priority that arrived before it (first in, first out within a
//     priority), each weighing its slice's chips, by (client, priority).
//     The ledger's Dominant rule names the (client, priority) that weighs
//     most; with nothing ahead the entry is running. The job stalls on its
//     kept slice for up to HoldAfter (hold_after, the trainer's
//     --hold-after): if the data comes in that time the epoch runs, else
//     the job goes on a transient hold for the rest of the wait (only then
//     is it counted in TransientHolds). With HoldAfter 0 (the default, the
//     trainer's and the paper's) the hold comes at once: SIG's waits are
//     all holds and charge no stall.
//
// A job's ledger is computed whenever its slice changes (initial to caught
// up) and at the end, and its lines × the slice's chips are summed into
// SimResult.Stall: chip-hours by cause kind and by (waiting client, client
// ahead, or "(none)", or "(reader)"), which sum to the goodput
// accounting's input stall, and the job-hours of SIG waits (stalled or
// held) by waiting client and client ahead. The figure
// fleet_input_stall_sig_share (SIG's part of the stall) is modelled, with
// these constants, and swept over hold_after and input_stall.
//
// What the package does not own: the goodput arithmetic
// (trainer/accounting/goodput), a real job's decisions (trainer/control: a
// simulated job follows the simple rules of SimConfig, not the controller's
// machine) and its chips' use (package trainer acquires and releases
// through Shared).
package fleet
