// Package workers will own SIG's work queues and the workers that drain them
// (paper IV.A, "Scheduling New Work", "Prioritization", "Scaling"):
//
//   - one task per (component, block), however many pipelines asked for it;
//   - a persistent queue per client in Pebble, highest priority first and fair
//     across clients of equal priority;
//   - leases with deadlines and heartbeats, retries, and quarantine of tasks
//     that keep failing;
//   - the worker loop (in-process and remote, `sigd worker`);
//   - the autoscaler's decision function.
//
// It does not canonicalize graphs (package matching) or run transforms
// (package transform); it only schedules and executes tasks handed to it.
package workers
