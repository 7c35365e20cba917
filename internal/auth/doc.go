// Package auth is SIG's access control: per-client bearer tokens read from a
// config file, roles, and gRPC interceptors that attach the caller's
// identity to the context and reject unauthenticated calls.
//
// Roles:
//   - client: a model owner's training pipelines. It may submit graphs and
//     read, watch and re-prioritize only its own pipelines.
//   - operator: may do everything, including eviction, priorities of any
//     client's pipelines, and releasing quarantined tasks.
//   - worker: may only speak the worker lease protocol.
//   - trainer: a training job; reads solutions of its client, reports
//     status and feature statistics.
//   - reader: an input reader process (cmd/reader --sigd); may only report
//     memo objects it found corrupt, which sigd verifies before acting.
//
// What it does not own: which RPC a role may call (each service checks its
// callers with Require) and the token file's location (the daemon's
// config).
package auth
