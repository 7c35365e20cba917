// Package jobgoodput is one training job's goodput account as its
// controller keeps it (MPG paper §4; Ads paper III.C, VI): the job's part
// of a goodput.Recorder, fed from the controller's decisions, and the
// history that carries it across controller restarts. It is pure: the
// caller passes every time and does the I/O.
//
// # The account (Account)
//
// The recorder's open interval follows what the controller's state machine
// says the held chips are doing between steps (Follow: initialization,
// compile, checkpoint restore and save, input stall, hold, idle; the caller
// records the steps themselves, Step). The machine's goodput actions become
// recorder calls: allocations, committed checkpoints, failures and
// preemptions (which close the open interval: the work since the last
// checkpoint is lost, MPG §4), phase changes (Ads III.A). The recorder may
// be a fleet's, shared by the jobs of one fleet; Summary picks the job's
// part of its report, and StallFraction the share of input stall in the
// time spent in epoch attempts.
//
// # Across restarts (History, Journal, Choose, Resume)
//
// Every checkpoint carries the job's goodput.History up to the moment its
// save began, with the checkpoint itself committed there
// (Account.CheckpointHistory). Between checkpoints the controller writes a
// Journal of the history, saying which checkpoint it follows and whether
// its process exited (Account.Journal). A restarted controller, loading
// the last checkpoint, restores (Choose) the journal if it follows that
// checkpoint and reaches further, else the checkpoint's history, and
// records what the restart cost (Account.Resume):
//
//   - a crash (no final journal) is a Failure at the history's end: the
//     steps after the last committed checkpoint become lost work, as MPG
//     counts work between a checkpoint and a failure. A clean exit that
//     left uncommitted steps is a Preemption there, for the same reason.
//   - the downtime, from the history's end until the new process started,
//     is charged to the allocation the job had: chips reserved for a job
//     whose controller is down do nothing, which is idle (all-allocated
//     time, nothing recorded), so it lowers RG.
//   - from its start the new process records as a fresh one does.
//
// Imports run one way: jobgoodput imports goodput and nothing else of the
// trainer; the job runtime (package trainer) translates its machine's
// actions (trainer/control) into Account calls and stores the bytes.
//
// What the package does not own: the goodput arithmetic and the recorder
// (trainer/accounting/goodput); where histories and journals are stored
// and when they are written (package trainer, with trainer/checkpoint);
// what the chips are doing (trainer/control decides it).
package jobgoodput
