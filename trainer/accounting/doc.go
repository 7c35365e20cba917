// Package accounting is the trainer's accounting wing: what the emulated
// fleet's chip-time bought, in the terms of the MPG paper (ML Productivity
// Goodput = scheduling × runtime × program goodput), for one job and for a
// fleet of them. It holds no code; its packages are
//
//	goodput     every chip-second of a job classified (productive, input
//	            stall, checkpoint save, hold, ...) and MPG per job, phase
//	            and fleet: Recorder, Compute, the reports and metrics; pure
//	jobgoodput  one job's goodput account as its controller keeps it: the
//	            recorder's open interval following the controller's
//	            decisions, and the history that carries it across controller
//	            restarts (the checkpoint's, the journal, what a restart
//	            costs); pure
//	stall       the ledger of a job's input stall: every stalled second
//	            charged to one cause (the SIG work or the reader phase
//	            it waited on), from the waits the controller and hosts
//	            record and sigd's explanations of pending entries; pure
//	runstats    what the steps of one controller process did, per phase:
//	            losses, lookups, modelled step times, chip-weighted as PG
//	            weighs them; the phases' part of the run's report
//	fleet       the emulated fleet whose chip-time is accounted: the
//	            scheduler of whole slices that scheduling goodput measures,
//	            its concurrent form for jobs that really train (Shared, a
//	            trainer.Allocator), and the virtual-time simulation of many
//	            jobs behind the Ads paper's Table II (`trainer fleet`)
//
// Imports run one way: goodput, runstats and stall import nothing of the trainer,
// jobgoodput and fleet only goodput. The job runtime (package trainer)
// feeds a jobgoodput.Account from the controller's machine and steps, sums
// the steps in a runstats.Stats, stores the goodput history with its
// checkpoints, and takes chips from a fleet.Shared when jobs share one.
// None imports the job runtime or the embedding wing (trainer/embedding);
// layout_test.go checks both.
//
// What this wing does not own: what a step costs — the emulated device's
// step-time model (trainer/steptime) stays with the runtime, which lasts
// every step by it; goodput only reads the ideal time it gives — nor the
// decisions it classifies (trainer/control says what the held chips are
// doing), nor where and when histories are written (package trainer, with
// trainer/checkpoint).
package accounting
