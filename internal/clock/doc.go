// Package clock is the one clock of the project. Hard logic (schedulers,
// autoscaler, eviction policy, the trainer's controller) takes a Clock so that
// tests drive time by hand instead of sleeping.
//
// What it does not own: timers of I/O deadlines (context deadlines), which
// measure real time by design.
package clock
