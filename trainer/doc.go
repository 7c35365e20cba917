// Package trainer is the job runtime of the emulated TPU training pipeline
// of the Ads paper (Kurian et al., sections III, IV.B, V, VI): a training
// job's controller, its TPU host workers, and the wiring to SIG, the
// stateless readers, object storage and the goodput accounting of the MPG
// paper.
//
// # Three wings
//
// The trainer is three wings, one directory tree each:
//
//	trainer/              the job runtime: this package (the Controller, host
//	                      workers, RunJob) and what it runs on:
//	  control/            the controller's decisions, a state machine without I/O
//	  buffer/             a host's input buffer and its reading parallelism
//	  checkpoint/         checkpoints in object storage
//	  model/, steptime/   the emulated device: the model and its step time
//	trainer/embedding/    embedding placement (paper V): partition, fdp, ps,
//	                      placement (a job's plan and FDP), paramservers (a
//	                      job's parameter servers), embreport
//	trainer/accounting/   accounting (MPG paper): goodput, jobgoodput (a job's
//	                      goodput account and its history across restarts),
//	                      runstats (what a run's steps did), fleet
//
// The runtime imports the other two wings and wires them: it decides when
// each piece runs and on which goroutine (embedding.go, accounting.go), the
// wings decide how. They never import this package, nor each other (each
// wing's doc.go says which way its own imports run; layout_test.go checks
// it); they may use the emulated device and the runtime's records of it
// (trainer/model, trainer/steptime, trainer/checkpoint).
//
// # Processes
//
// A training job is separate programs, as in the paper's Figure 1:
//
//	trainer controller --listen ADDR ...   the Controller: a gRPC server (proto/trainer/v1)
//	trainer host --controller ADDR --id h0  one TPU host worker per process
//	reader --listen ADDR ...                the stateless input readers (cmd/reader)
//	trainer ps --shard I --shards N ...     a parameter server of the caught-up phase,
//	                                        started and restarted by the controller
//
// so that any of them can be killed and restarted on its own (the
// exactly-once test SIGKILLs all three kinds). `trainer run` and RunJob run
// the controller and N hosts as goroutines of one process, the hosts
// talking to the controller over loopback gRPC — the same code — with
// readers in the process too unless addresses are given; demos and tests use
// it.
//
// # The controller
//
// The controller's decisions are trainer/control's Machine, a deterministic
// state machine without I/O; the Controller is its I/O shell. One
// goroutine owns the machine: it receives every event — host messages,
// results of slow work, preemption notices, hold releases, ticks — feeds it
// to the machine, and executes the actions. Each concern of the shell is
// one file:
//
//	controller.go   the loop: events in, the machine, actions out (execute)
//	setup.go        SubmitGraph and GetReadSolution on sigd (token of role
//	                trainer): the pipeline's model inputs; the model is built
//	solution.go     the read solution indexed; work units built from it (one
//	                per raw block, each input MEMO in the initial phase, LOCAL
//	                in the caught-up phase)
//	blocks.go       block refresh, and the completion watcher while the job
//	                waits for data (sig.memo.ready and WatchReadSolution)
//	checkpoints.go  loading the last checkpoint; the ledger check and the
//	                checkpoint write at each epoch end
//	device.go       the emulated slice: restore, compile, step
//	steps.go        a step's batches collected from the hosts, its result
//	                into the ledger, goodput and the run's statistics
//	sessions.go     the hosts' Session streams: their messages in as events,
//	                the machine's decisions out to them
//	chips.go        chips from an Allocator (trainer/accounting/fleet shares
//	                a fleet among jobs)
//	holds.go        training holds as the run records them; their release
//	service.go      the unary RPCs: preemption notices, holds, status
//	status.go       the snapshot the RPCs and metrics read; status to sigd
//	                (ReportTrainerStatus) every few seconds
//	embedding.go    the embedding wing wired in: statistics read at setup,
//	                the slice's plan at each compile (trainer/embedding/
//	                placement), profiles published at each commit; the
//	                parameter servers (trainer/embedding/paramservers)
//	                start with Run and follow the device
//	accounting.go   the accounting wing wired in: the machine's activity
//	                and goodput actions into the job's account
//	                (trainer/accounting/jobgoodput), its history into every
//	                checkpoint and the journal, restored at a restart
//	stalls.go       the stall ledger's records (issue 30): what a stall on
//	                SIG waited on, sigd's ExplainPending answers, the
//	                hosts' waits on readers; the ledger
//	                (trainer/accounting/stall) for the report, metrics and
//	                status
//	report.go       the report written at exit, each wing's part of it
//	                (the steps' statistics: trainer/accounting/runstats)
//
// and, beside the controller, host.go (a host worker), run.go (RunJob),
// wire.go (batches and inputs on the wire), config.go.
//
// The emulated slice lives in the controller: the model (trainer/model,
// embedding tables placed by a trainer/embedding/partition plan and a dense
// MLP trained by SGD) and the step. Each compile solves the slice's
// partitioning problem with the partitioner's heuristic
// (trainer/embedding/placement); out of memory is a permanent hold.
//
// # Feedback-directed partitioning (paper V.C; trainer/embedding/placement, fdp)
//
// At setup the controller reads, from sigd's statistics store (the
// FeatureStats service, Pebble-backed, shared by every model), the
// statistics of its sparse features, keyed by their component keys; the
// partitioner takes them as measured statistics in place of the compile-time
// assumption (valency 1, uniform access). About 3% of steps (fdp.Sampled,
// deterministic) profile their batch — feature values per example, unique
// rows per batch, hot rows, the per-SparseCore bytes of the plan — and each
// committed checkpoint publishes the profile (PutFeatureStatistics, token of
// role trainer). A second model with the same features thus compiles a plan
// balanced for their real load (TestFeedbackDirectedPartitioning). The
// report lists every plan (PlanReport) and what FDP did (FDPReport).
//
// In pipelined mode (Device.Mode) the model applies embedding gradients one
// step stale, as the pipelined SparseCore does (paper V.C, Figure 5b).
// Training is synchronous data parallel: a step takes one batch from every
// host (the global batch is their concatenation in host order), so a slow
// host stalls the step, and that time is an input stall. A step runs the
// real computation on the CPU and lasts the device time the step-time model
// (trainer/steptime) gives for what it touched — TensorCore FLOPs at peak,
// SparseCore bytes of the deduplicated rows at HBM bandwidth (plus optional
// per-lookup and per-shard overheads, priced alike by the partitioner),
// serialized or pipelined with a contention factor — stretched by
// TimeScale (DefaultTimeScale: the emulated model is tiny, so its modelled
// steps are stretched into tens of milliseconds). Device operations
// (restore, compile, step, checkpoint write) hold a mutex, so one still
// running for an aborted attempt finishes before the next begins; a step of
// an aborted attempt that gets the device only after the restore does not
// run.
//
// # Exactly once (paper III.C)
//
// Every batch says which rows of which work units it carries. After each
// step of the running attempt the controller appends the batch's event ids
// to the attempt's ledger, unit by unit; at the epoch end (every host
// drained, every step done, every unit trained exactly as many rows as were
// read — the machine checks) it checks that the ledger holds as many event
// ids of each unit as the unit's rows, merges it with the committed one,
// checks that no event id occurs twice, and writes model, ledger and
// progress as a checkpoint whose manifest goes last (trainer/checkpoint). A
// failure before the manifest is durable discards the attempt's ledger and
// model state: the next attempt restores the last checkpoint and retrains.
// Steps of an aborted attempt that finish late are neither added to the
// ledger nor counted as productive.
//
// # Host workers (host.go)
//
// A host holds a Session stream with its controller: Hello, then Welcome
// (inputs, batch size, buffer size, in-flight bounds, reader addresses).
// Per epoch attempt it keeps an input buffer (trainer/buffer), requests work
// units — as many as buffer.Decide sets from the buffer's fullness every
// 50ms (paper IV.B, horizontal auto-scaling), at most one request
// outstanding — reads each unit through reader.Client (which resumes a
// broken stream on another reader), hashes the features and buffers them,
// and sends fixed-size batches as its credits allow (a credit returns when
// the batch goes into a step). Told to drain, it finishes its units and
// sends what is left as its final batch. A lost controller is reconnected
// (a new incarnation: the restarted controller retrains what was not
// committed); after a job-wide preemption notice the host exits instead.
// SIGTERM to a host is a preemption notice for that host: it tells the
// controller, which broadcasts it and ends the epoch early; the host exits
// when told, and the next epoch waits until it rejoins.
//
// # Goodput
//
// A goodput.Recorder in the controller gets, through the job's account
// (jobgoodput.Account), every interval: allocations (queued, held, released
// by holds), the machine's Activity between steps (initialization, compile,
// checkpoint restore and save, input stall, idle), every step with its
// device time and ideal time (model FLOPs at peak), committed checkpoints,
// failures, preemptions and phase changes. The report (Report, written as
// JSON and text at exit), the Prometheus metrics (goodput.RegisterMetrics
// plus the job's gauges) and the status sent to sigd all come from it.
//
// Goodput survives controller restarts (accounting.go,
// trainer/accounting/jobgoodput): the report covers the job's whole history,
// not the last controller process. Every checkpoint carries the job's
// goodput.History up to the moment its save began, with the checkpoint
// itself committed there (goodput.json, written before the manifest, so a
// committed checkpoint always has it; a checkpoint written before this
// existed restores without it). Between checkpoints — every
// GoodputJournalInterval, after each commit and at exit — the controller
// also writes a journal of its history beside the checkpoints, saying
// which checkpoint it follows; it commits nothing. A restarted controller,
// as it loads the last checkpoint, restores (goodput.Recorder.Restore) the
// journal if it follows that checkpoint, else the checkpoint's history, so
// its recorder's window reaches back to the job's first start, and records
// what happened after the history's end, in absolute times of the injected
// clock:
//
//   - a crash is a Failure at the history's end (the last time the dead
//     process is known to have been alive): the steps it ran after the last
//     committed checkpoint are not in the checkpoint and become lost_work,
//     as the MPG paper counts work between a checkpoint and a failure. A
//     controller that exited cleanly leaves a final journal: no failure,
//     unless it stopped with uncommitted steps (a Preemption then).
//   - the downtime, from there until the new process started, is charged
//     to the allocation the job had: chips reserved for a job whose
//     controller is down do nothing, which is idle time (all-allocated,
//     nothing recorded), so it lowers RG. No category was added for it.
//   - from its start the new process records as a fresh one does; restoring
//     the checkpoint onto the slice is checkpoint_restore, as always.
//
// Without a journal (lost, or older than the checkpoint) the history ends at
// the checkpoint: everything until the restart then counts as downtime,
// none as lost work. Counters in the report other than Goodput (steps,
// attempts, failures, holds) are the last process's.
//
// # Why the job waited (issue 30)
//
// Every second of input stall is charged to one cause
// (trainer/accounting/stall, stalls.go). With HoldAfter (`--hold-after`),
// a job holding its slice that finds the next epoch's first block pending
// keeps the chips and stalls (trainer/control, "Stalls on SIG"): the
// controller opens a wait per pending input of the block and asks sigd
// every ExplainInterval why its entries are not ready (ExplainPending:
// queued behind which clients' tasks at which priorities, running,
// failed, recomputing, not ingested). Hosts report the waits of their
// reads on readers (ReaderWait: before the first batch, between batches,
// retrying), time blocked on a full buffer excluded. The report's Stall,
// the status sent to sigd (its web UI's trainer page, sigctl why) and
// sig_trainer_input_stall_seconds_total{cause} come from the ledger.
// Hosts' waits carry their own wall-clock times; with an injected clock
// in the controller only the SIG side lines up with the timeline.
//
// # Phases (paper III.A)
//
// Initial training reads memoized inputs on Chips chips. When the next epoch
// would reach the newest block of the range, the job is caught up: it
// releases its slice, takes CaughtUpChips chips (the model is restored onto
// the smaller slice and the tables re-placed), trains CaughtUpEpochUnits
// blocks per epoch. The paper's caught-up training generates every input
// locally (LIG, IV.B), because SIG's memoized data may not be there yet at
// the head of the stream. Here a caught-up unit reads each input's
// memoized block when it is ready at the epoch's snapshot and generates
// locally only the inputs whose blocks are pending (CaughtUpSIG, the
// default; TestUnitModes), so the head never stalls and what SIG has done
// is not done again; CaughtUpLIG (`trainer run --caught-up-inputs lig`)
// is the paper's. The same host processes feed both slices. Goodput is
// reported per phase. With parameter servers (below), the caught-up slice
// holds no tables.
//
// # Versions (issue 21)
//
// Blocks change after they are sealed (late events, new labels,
// deletions: each change a new version). The controller plans each epoch
// from one catalog snapshot (trainer/control, "Versions and snapshots"),
// and a block that changed after it was trained is trained again at its
// new version in a later epoch (ControllerConfig.Retrain, `--retrain`).
// The controller pins the snapshot at sigd before it reads a solution
// (blocks.go: "<client>:<pipeline>", moved at each refresh, dropped when the
// job is done), so version GC keeps every version an epoch in flight reads;
// a unit is built from its ref and refused by a solution where its block
// is at another version (solution.go), and a watcher's refresh never
// replaces the solution of an epoch in flight (Machine.AcceptsBlocks). The
// checkpoint states the snapshot and names units as block versions; its
// ledger accepts an event again only in a newer version of its block
// (trainer/checkpoint, Ledger.Check). e2e's TestCaughtUpVersions runs all
// of it against `sigd dev` with kills.
//
// # Parameter servers (paper III.B, V.B; trainer/embedding/paramservers)
//
// With ControllerConfig.ParameterServers (`--ps-servers N`), the caught-up
// phase keeps its embedding tables on N CPU parameter servers
// (trainer/embedding/ps), as the paper's caught-up training does on its few
// chips. The controller starts N `trainer ps` processes when it starts
// (their checkpoints in the warehouse bucket, checkpoints/<pipeline>/ps/;
// Linux ends them with the controller), restarts one that dies on its
// address, and stops them at exit; `--ps-addrs` uses servers run by hand.
// Like every SIG service the servers refuse an unauthenticated caller
// (`trainer ps` requires --tokens): the servers the controller starts
// admit only a secret it makes for them, passed in a token file only its
// user can read, removed once the server has read it (never on a command
// line), and servers run by hand are
// called with the job's trainer token (--token), which their token file
// must admit.
// The client is the emulated TPU host's: the step runs in the controller's
// device, so it is the device that talks to the servers, one client with
// one core, stacking on by default, coalesced.
//
//   - The switch. The first restore of the caught-up phase — the model
//     state of the initial phase's last checkpoint, from which training
//     continues — moves every table onto the servers (Client.Assign at the
//     model's step count, then a server checkpoint of it, so a server that
//     restarts before the next commit comes back to these values).
//   - Steps. A step looks the global batch's unique rows of every table up
//     in one coalesced Lookup per server, pools Fetched.Value's rows, runs
//     the dense layers, and sends the unique rows' gradients in one Apply
//     per server (model.StepRemote); the servers' step is the model's step
//     count. The arithmetic is the slice's float32 SGD, so the losses and
//     parameters are bit-identical to the same run with the tables on the
//     slice (serialized mode; in pipelined mode the servers' updates are
//     not one step stale as the slice's are, so the two differ).
//   - Epoch end. The steps are drained as always; the tables are read back
//     into the model state (ReadTables), every server checkpoints at the
//     model's step, then the checkpoint is written with the manifest last,
//     recording the servers' committed step (checkpoint.Manifest
//     .ParameterServers). Both commit together: a crash before the manifest
//     leaves the previous one, whose step the servers still retain.
//   - Restore. Restoring a checkpoint written with the servers rolls every
//     server back to its committed step (Client.Restore) — the retrain of a
//     failed epoch, a restarted controller — or, if a server no longer has
//     that checkpoint (its store lost, another number of servers), writes
//     the tables from the model state, which holds the same values. As the
//     model object always holds the tables, a job may also be restarted
//     with servers after a checkpoint written without them, or without
//     them after one written with them.
//   - Failure. A server that dies fails the step (model.ErrRemote: not a
//     hold), and the attempt fails like any other: the epoch is retrained
//     from the last checkpoint with every server rolled back, the dead one
//     restarted from its own newest checkpoint. Updates that reached some
//     servers before the failure are undone by the rollback and applied
//     once more by the retrain: exactly once per committed step, as the
//     events (TestCaughtUpOnParameterServers: SIGKILL mid-epoch, final
//     parameters bit-identical to an unkilled run).
//
// Goodput: PG is ideal time over the time the job held its accelerators
// (MPG paper §4), one definition in both placements (issue 27). The
// slice waits for a step's rows before the device runs and for the
// servers to apply its gradients after, and it is held while it waits, so
// that wait is in the step's device time — PG's denominator — as the
// SparseCore's lookups are on the slice. Both are priced by the step-time
// model and stretched by Device.TimeScale alike (trainer/steptime: the
// wait is the bytes the step exchanged with the servers — each unique
// row's id and values, its id and gradient — over the host's network,
// Device.Network, `--ps-bandwidth`, 100 Gbit/s by default, a guess); the
// real loopback RPCs run inside that time, as the real computation does.
// The ideal (TensorCore FLOPs at peak) is the same program's in both, so
// the same job's PG moves only by the lookups' time: SparseCore time on the
// slice, the wait on the servers on them (TestProgramGoodputOneBasis;
// bench/placement.sh measures both and says why they differ). Moving the
// tables on and rolling them back happen in the restore
// (checkpoint_restore); reading them back and the servers' checkpoints in
// the save (checkpoint_save); the steps of an attempt a server's death
// aborted are lost_work, and the wait for its restart is the restore's
// retries. The report's "parameter servers" line gives the servers,
// restarts, moves, rollbacks, steps, RPCs and seconds spent in each
// category (the steps' RPC seconds are real loopback time, the emulator's
// cost); each phase line gives the modelled wait per step.
//
// What this package does not own: the decisions (trainer/control), the
// model and its step time (trainer/model, trainer/steptime), the buffer and
// scaling rule (trainer/buffer), the checkpoint format (trainer/checkpoint),
// embedding placement (trainer/embedding: the partitioner, the slice's plan
// and the profiler of feedback-directed partitioning, the parameter servers,
// their processes and their client), accounting (trainer/accounting: the
// goodput arithmetic, the job's goodput account and its history across
// restarts, the steps' statistics, the fleet scheduler), and the statistics
// store (featstats, served by sigd).
package trainer
