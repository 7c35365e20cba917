// Package ps is CPU parameter servers as the Ads paper uses them in
// caught-up training (III.B, V.B, VII.E): in the paper, when a model trains
// on fresh data with only a few TPU chips, its embedding tables live in the
// RAM of parameter-server processes and the TPU host workers read rows and
// send gradients over gRPC (proto/ps/v1). This package is the servers and
// their client; a training job's caught-up phase runs on them (package
// trainer; "Who runs it" at the end).
//
// # Placement: row sharding, table stacking, cyclic distribution
//
// Every table is row-sharded over all n servers, "the most useful technique
// for CPUs" because it balances the servers (V.B). Tables of the same width
// and optimizer settings may be stacked into one variable (Layout, with
// Stacking): table k of a stack holds the variable's rows [offset_k,
// offset_k + vocab_k). Variable row g lives on server g mod n at local index
// g / n — cyclic distribution, which the paper requires with stacking so
// that every table, and the hot low rows of a frequency-sorted vocabulary,
// spread over every server. Stacking turns 100 tables into a handful of
// variables: fewer segments per packet and fewer lookups to plan.
//
// # Fetch and update coalescing
//
// One training step of a host carries the lookups of all its TPU cores for
// all tables. Uncoalesced, as the paper's baseline, every core sends every
// server one Lookup and one Apply per table: cores × tables RPC pairs per
// server per step ("thousands of RPCs ... to each parameter server on every
// training step"). Coalesced (Client with Mode Coalesced), the client
// deduplicates the step's rows per variable across cores and tables and
// sends each server one Lookup and one Apply, every variable's rows and
// values in one packet: a flat []float32 with one segment per variable.
// The receiver splits a packet by slicing it at the segment offsets
// (VII.E: "smart split operations ... share the same underlying buffer");
// Fetched.Value returns a view into the response buffer, never a copy of a
// row. bench/ps.sh measures both in one run.
//
// # Updates: deterministic, identical in both modes
//
// A server applies SGD or Adagrad in float32. A row's gradient for a step
// is summed from zero: within a core over the positions of the row in
// example order (on the client), then over the cores in core order. A
// coalescing client does the core sum before sending; an uncoalesced step
// arrives as cores × tables parts, and the server waits for all parts of a
// step, sums them in part order (core-major), applies, and only then
// acknowledges every part. Both orders are the same float32 additions, so
// the two modes, with or without stacking, give bit-identical embeddings
// (tested against a plain reference). Steps are numbered; a server applies
// step s+1 only after s, acknowledges a retried step again without applying
// it, and refuses to skip one.
//
// # Checkpoints and committed updates
//
// Client.Checkpoint asks every server to write its shard at the client's
// current step; a server writes the data object, then its manifest, last
// (checkpoint.go). Once every server has acknowledged, the step is
// committed: an update is committed when it was acknowledged before the
// last checkpoint the client committed. A server killed at any time and
// restarted on the same store comes back at its newest checkpoint, which
// holds every committed update and its optimizer state (tested by killing a
// real `trainer ps` process with SIGKILL, cmd/trainer/ps_test.go). Servers
// that come back at different steps are reported (Client.Step is -1) until
// Client.Restore rolls them all back to the committed step; the trainer
// then retrains the steps after it, as it retrains a failed epoch (III.C;
// package trainer does, see below). The store is a local directory
// (DirStore, `trainer ps --data`) or the warehouse bucket (ObjectStore,
// under checkpoints/<pipeline>/ps/), so a server restarted on another
// machine finds its shard.
//
// # Moving tables onto the servers
//
// Assign writes rows trained elsewhere and puts the servers at a given step
// (Client.Assign sends every row of every table, 16 MiB per packet;
// optimizer state restarts, so an Adagrad table loses its accumulators —
// SGD, what the trainer uses, has none); Client.ReadTables reads every row
// back. A trainer moves its tables on at the switch to the caught-up phase
// and reads them back into its model state at each checkpoint.
//
// # Who runs it
//
// A client's training step is
//
//	f, err := client.Lookup(ctx, batch)   // batch[core][table]: the rows each core's examples look up
//	vec := f.Value(core, table, i)       // the row of position i, pooled as before
//	...forward and backward on the TPU cores...
//	err = client.Apply(ctx, f, grads)     // grads[core][table]: one gradient row per position
//
// with client.Checkpoint after some steps and client.Restore after a
// restart. Three things run it:
//
//   - a training job (trainer/embedding/paramservers, which package trainer
//     runs; `trainer run|controller --ps-servers N`). With parameter servers
//     configured, the controller starts N `trainer ps` processes with the
//     job and restarts one that dies, on its address. When the job switches
//     to the caught-up slice, the model state it restores moves onto them
//     (Assign at the model's step, then a checkpoint); each step of the
//     emulated TPU host looks the global batch's unique rows up in one
//     coalesced Lookup per server (Fetched.Value feeds the pooling in place
//     of the slice's tables) and sends their gradients in one Apply per
//     server, tables stacked and rows distributed cyclically; each epoch end
//     reads the tables back into the model state, checkpoints every server
//     at the model's step and only then writes the controller's manifest,
//     which records that committed step; a restore rolls every server back
//     to it (Client.Restore), or, when one has lost it, writes the tables
//     from the model state again. A server killed mid-epoch fails the step
//     and the attempt, which is retrained from the last checkpoint: no
//     update is lost or applied twice (trainer's
//     TestCaughtUpOnParameterServers compares the final parameters with a
//     run that kept its tables on the slice, bit for bit);
//   - the embeddings report (trainer/embedding/embreport: `trainer
//     embeddings-report`, bench/embeddings.sh, paper VII.E) starts
//     in-process servers on loopback gRPC and runs a client's Lookup and
//     Apply per step of each model's caught-up batches, uncoalesced and
//     coalesced, and measures them; it neither checkpoints nor restores.
//     bench/ps.sh runs this package's own benchmarks;
//   - `trainer ps` (cmd/trainer/ps.go) runs one server as a process of its
//     own, with checkpoints in a directory or the warehouse bucket, serving
//     only callers whose bearer token its required --tokens file admits
//     (role trainer or operator; NewGRPCServer); its tests
//     (cmd/trainer/ps_test.go) kill one with SIGKILL and restore, and
//     refuse calls without a token or with a wrong one.
//
// The job runtime's client sends one core's lookups per step (Cores 1):
// the emulated slice computes the global batch's step as one device, and
// the model has already deduplicated its rows, so the client's core sum is
// a single term and the servers' SGD (w -= float32(lr·g), the product
// rounded before the subtraction) is the slice's own arithmetic.
//
// What the package does not own: the dense model (trainer/model), the
// choice between TPU and CPU embeddings (the job's configuration: package
// trainer puts the caught-up phase's tables here when it has servers),
// starting and supervising server processes (cmd/trainer ps,
// trainer/embedding/paramservers), and the network: one process per
// server, any gRPC transport.
package ps
