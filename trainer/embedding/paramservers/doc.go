// Package paramservers is a training job's parameter servers (Ads paper
// III.B, V.B): in the caught-up phase the job keeps its embedding tables
// on CPU servers (trainer/embedding/ps) rather than on its few chips. It
// starts the `trainer ps` processes and restarts one that dies, and keeps
// the tables on them in step with the model's checkpoints:
//
//   - Start: Config.Servers `trainer ps` processes, one shard each, their
//     checkpoints where StoreArgs say; each restarted on its address when
//     it dies, from its own newest checkpoint (Linux ends them with the
//     process that started them). They admit one caller, the job: Start
//     makes a secret of role trainer for them, writes it to a token file
//     only the job's user can read for each start of a server, names the
//     file on its command line (--tokens FILE), so the secret is on none,
//     and removes it once the server listens (token.go); every call of the
//     job carries it. With Config.Addrs, servers run by hand
//     are dialed instead, with Config.Token (the job's trainer token).
//   - Place, at a restore of the caught-up phase: the tables go onto the
//     servers at the model's step. A checkpoint written with them there
//     rolls every server back to its committed step (ps Restore) — the
//     retrain of a failed epoch, a restarted controller; otherwise, at the
//     switch from the slice, or when a server lost that checkpoint, they
//     are written from the model state (ps Assign, then a server
//     checkpoint), which holds the same values.
//   - Remote, each step: one coalesced Lookup of the global batch's unique
//     rows and one Apply of their gradients per server (the model's
//     StepRemote); the servers' step is the model's step count. Their real
//     time is reported; how long the step holds the slice waiting on them
//     is the step-time model's (trainer/steptime, Time.Servers), on the
//     same basis as the slice's own lookups.
//   - Save, at an epoch end: the tables are read back into the model
//     state, then every server checkpoints at the model's step, before the
//     manifest that commits both (checkpoint.Manifest.ParameterServers).
//   - Report: servers, restarts, moves, rollbacks, steps, RPCs and the
//     seconds spent in each, for the run's report.
//
// Imports run one way: paramservers imports the servers and their client
// (trainer/embedding/ps), the emulated model (trainer/model) and what a
// checkpoint records of the servers (trainer/checkpoint: ParameterServers,
// ErrCorrupt for a checkpoint whose servers' step is not its model's);
// never the job runtime (package trainer) nor the accounting wing.
//
// What the package does not own: when any of it happens — package trainer
// places the tables in its restore, steps, saves and commits under its
// device's mutex, and decides what a failure costs (a server that dies
// fails the step, and the attempt is retrained from the last checkpoint,
// rolled back here); the servers themselves and their protocol
// (trainer/embedding/ps); the `trainer ps` command (cmd/trainer).
package paramservers
