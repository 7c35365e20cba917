// Package accounting is the trainer's accounting wing: what the emulated
// fleet's chip-time bought, in the terms of the MPG paper (ML Productivity
// Goodput = scheduling × runtime × program goodput), for one job and for a
// fleet of them. It holds no code; its packages are
//
//	goodput   every chip-second of a job classified (productive, input
//	          stall, checkpoint save, hold, ...) and MPG per job, phase and
//	          fleet: Recorder, Compute, the reports and metrics; pure
//	fleet     the emulated fleet whose chip-time is accounted: the scheduler
//	          of whole slices that scheduling goodput measures, its
//	          concurrent form for jobs that really train (Shared, a
//	          trainer.Allocator), and the virtual-time simulation of many
//	          jobs behind the Ads paper's Table II (`trainer fleet`)
//
// Imports run one way: goodput imports nothing of the trainer, fleet only
// goodput. The job runtime (package trainer) feeds a goodput.Recorder from
// the controller's machine and steps, and takes chips from a fleet.Shared
// when jobs share one.
//
// What this wing does not own: what a step costs — the emulated device's
// step-time model (trainer/steptime) stays with the runtime, which lasts
// every step by it; goodput only reads the ideal time it gives — nor the
// decisions it classifies (trainer/control says what the held chips are
// doing; package trainer records it, with the goodput history that
// survives controller restarts).
package accounting
