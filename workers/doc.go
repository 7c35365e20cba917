// Package workers owns SIG's work queues and the workers that drain them
// (Ads paper, section IV.A, "Scheduling New Work", "Prioritization",
// "Scaling").
//
// It does not canonicalize graphs (package matching) or run transforms
// (package transform): it schedules tasks it is handed and runs them through
// a Runner the daemon provides.
//
// # Tasks
//
// A task is one component over one raw block, named by TaskID{Component,
// Block}. When the matching cache misses a block it calls Queue.Enqueue with
// the requesting client, pipeline and priority. However many pipelines ask
// for the same (component, block), there is one task: later requests only
// add requesters. The task's priority is the highest among the pipelines
// that asked (paper: "the priority assigned to each work element within the
// queue directly reflects the priority of the model that requested it").
//
// # Queues and the scheduling decision
//
// Each client has its own queue (paper: "each client has its own dedicated
// work queue"). A task sits in the queue of every client that asked for it,
// at the highest priority among that client's requesting pipelines, and is
// leased once: leasing it from any queue removes it from all. Within a
// queue, order is priority, then enqueue order.
//
// Which queue gives the next task is decided by Schedule, a pure function of
// the queue heads and the fairness state (the client served last at each
// priority): the highest head priority wins; among clients whose heads share
// it, round-robin in client-name order, starting after the one served last
// at that priority. One cursor per priority means higher-priority work can
// interrupt a round without resetting it. The cursors are persisted, so a
// restart does not hand the next turn to the first client by name. The
// data-driven tests in testdata/schedule show the orderings: priority,
// fairness, re-prioritization, shared tasks, failures.
//
// A client's queue is bounded (Options.MaxQueuedPerClient). Fairness does
// not need the bound: one client's thousands of tasks wait in its own queue
// while others are served in turn. Memory and disk do: every queued task
// is kept in both. Admit, which sigd's matching frontend calls before it
// registers a submission, refuses work that would take a client past the
// bound (QuotaError), counting only tasks not already in that client's
// queue; Enqueue never refuses, so work admitted before (re-reads after an
// eviction, reconciliation at start, retries) always finds its place
// (testdata/schedule/quota.txt).
//
// Priorities change as models are created, refined and retired (paper:
// "these priorities are not static"). SetPriority rewrites a pipeline's
// priority on every task it asked for, through a pipeline-to-tasks index,
// and moves its queued tasks; a task keeps its enqueue order when it moves.
//
// # Leases, failures, quarantine
//
// A worker leases a task until a deadline (LeaseTTL, default 30s) and
// heartbeats to extend it. Complete removes the task: the worker has already
// written the memoized object whole and marked it ready, so a crash between
// the two re-runs the task and rewrites the same bytes (outputs are
// deterministic) rather than losing it. Fail counts an attempt and requeues
// the task at the back of its priority, so a failing task does not hold up
// the ones behind it. An expired lease (found by ExpireLeases, which Run
// calls every ExpiryInterval on the injected clock) counts an attempt too, so
// a task that kills its worker is eventually quarantined rather than killing
// workers forever. At MaxAttempts (default 3) the task is quarantined with
// its last error: it leaves the queues, blocks nothing else, and waits for an
// operator (ListQuarantine, Release). This is the small blast radius of
// BRIEF "Beyond the paper" 4: one bad component fails alone.
//
// # Batches
//
// Issue 28: the tasks of one raw block are cheaper together. A worker that
// runs them at once reads the block's raw columns once, can run the union
// of their canonical graphs so a subexpression shared across components
// runs once, and writes one packed object. So a lease may take a batch
// (Queue.LeaseBatchAs, LeaseTaskRequest.max_tasks): the task a lease of
// one would take, then up to maxTasks-1 other queued tasks of its raw
// block (TaskID.Block's ID, any input version: the runner reads each
// task's raw version), highest priority first, then oldest. The rules:
//
//   - Priority. The first task is the scheduler's pick, the highest
//     queued; so the batch runs at the highest priority among its tasks,
//     and lower-priority tasks of the block ride along ahead of their turn.
//     That is the point (their raw columns are read anyway, and in a union
//     graph much of their work is shared), and its price is bounded: the
//     riders hold the batch's worker from other blocks' work, however high
//     its priority, for at most the batch's bound.
//   - Fairness is counted in leases, as before: a batch is one turn of its
//     first task's client. Tasks of other clients join without using a
//     turn of their clients' (served early, they lose nothing). A client
//     with many tasks of one block takes at most a batch per turn, and the
//     next lease goes to the next client in the round
//     (testdata/schedule/batch.txt). The bound on a batch is in tasks: the
//     queue knows no sizes; a runner may split what it leased into several
//     objects.
//   - Leases. Each task of a batch has a lease of its own, recorded as a
//     lease of one task is, so heartbeats, completions, failures and
//     expiries stay per task, the store has no new record, and a worker
//     killed mid-batch leaves leases that expire one by one: every task of
//     the batch is leased again, and those it had completed stay complete
//     (testdata/state/batch.txt). The queue finds a block's queued tasks
//     through an index by raw block id kept in memory only; a replay
//     rebuilds it by placing the queued tasks.
//
// # Worker builds and bans
//
// A worker says which build it runs when it leases (BuildID: VCS revision,
// Go version, target, the executable's hash; Queue.LeaseAs, ForBuild in
// process,
// LeaseTaskRequest.build remotely), and the lease records it: Result.Build
// at completion is the lease's, so sigd knows which build computed each
// memo object. A worker that computes wrong values writes objects whose
// bytes are sound, and the readers' guard finds them (package reader);
// sigd's own recomputation confirms it. A misbuilt binary computes the
// same wrong values every time, so recomputing would loop for ever (catch,
// quarantine, recompute, catch): sigd bans the build instead (issue 27,
// paper VIII.E's shared-fate risk). BanBuild refuses the build every lease
// from then on (a BannedError, FailedPrecondition over the wire; the
// worker logs it once and keeps asking) and takes back the tasks it holds,
// without counting an attempt. Bans are durable; only an operator lifts
// one (LiftBan: sigctl builds lift BUILD, or the web UI). A worker that
// does not say its build is never refused, and its output cannot be
// attributed: sigd then recomputes as before.
//
// Cancel and RemovePipeline remove tasks for eviction. A cancelled task that
// is leased stays with its worker until the worker's next heartbeat, which
// answers ErrCancelled and cancels the run; Complete and Fail of that lease
// then change nothing.
//
// # State and store
//
// The queue is two parts. The state (state.go) holds every task and index
// (per-client heaps, the pipeline index, leases, quarantine, the fairness
// cursors, counters) and every rule above; it has no Pebble, no locks and
// no clock. Its one mutator, apply, takes an op that carries its own time
// and returns the records the change writes or deletes, in the layout
// below, and the events it causes (after tf.data service's dispatcher
// state, whose modifications all go through Apply, and etcd raft's state
// machine, whose caller does the I/O). The Queue (queue.go) is the store
// around it: it takes the lock, reads the clock, applies the op, writes
// its records in one Pebble batch (see Durability) and emits its events
// outside the lock; so changing a lease rule touches only the state.
// Open rebuilds the state through apply too, replaying the stored records
// (see Persistence), as tf.data's dispatcher replays its journal through
// Apply: there is no second path that must agree with the first.
// testdata/state drives the state alone and prints each op's records and
// events; its harness rebuilds a state by replaying the records after
// every op, which shows that the records are the whole change, and
// TestReplayActsAsApplied gives random ops to a live state and to one
// rebuilt from its records, which must do the same.
//
// # Persistence
//
// Queues live in Pebble, and the state serves leasing from memory without
// reads. Memory and store move in step: each change is applied and its
// batch committed under one lock. Open replays every stored record
// through apply. A task record is placed in the indexes by the code that
// places tasks at run time (pushing it onto its clients' heaps as Enqueue
// does), and the index records that code writes are not written but
// checked against the stored ones: Open refuses a store whose index
// records are not exactly those its task records imply (ErrCorrupt), or
// whose format is unknown (ErrFormat). Index records are never read into
// memory; the round-robin cursors are. Key layout (layout.go), format
// FormatVersion ("sig.workers/2"; a store of "sig.workers/1", which has
// no b keys and no builds, is upgraded in place at Open); <component> is the canon.Key's 64
// lowercase hex digits (a TaskID holds the key itself: the store is where
// it becomes text); names never contain NUL, which terminates them:
//
//	v                                             -> "sig.workers/2"
//	t <component> 00 <block>                      -> task record
//	q <client> 00 <^priority:4> <seq:8>           -> <component> 00 <block>
//	p <client> 00 <pipeline> 00 <component> 00 <block> -> (empty)
//	l <deadline ns:8> <lease id>                  -> <component> 00 <block>
//	x <component> 00 <block>                      -> (empty)
//	f <^priority:4>                               -> client served last
//	b <build>                                     -> ban record
//
// Integers are big-endian; ^priority is the priority with its sign bit
// flipped and then inverted, so higher priorities sort first. The task
// record (version byte 1) holds the state, enqueue sequence, attempts, time
// of the last state change, last error, requesters (client, pipeline,
// priority), and when leased the lease id, worker, the client and priority
// it was leased at, the deadline and the lease time, and the worker's
// build when it said one (written last, so that records without it read
// as they did). The q keys of a client are its queue in lease order. The l
// keys list leases by deadline; x keys the quarantine; f keys the
// round-robin cursors; b keys the banned builds (version byte 1, the time
// of the ban, its reason), read back at Open like the cursors.
//
// # Durability
//
// An acknowledged change must survive a crash of sigd: an Enqueue that
// vanished would leave the matching cache showing a block pending with no
// task to produce it. Pebble's NoSync is not enough for that: its WAL
// writer keeps records in a userspace buffer until a 32 KiB block fills or
// a sync is requested, so a SIGKILL loses the last acknowledged changes
// (TestSIGKILLLosesNothing does lose them if the sync is removed). So every
// change is committed with a sync request, and Durability says what a sync
// is:
//
//   - DurabilityProcess (default): the WAL files' Sync is a no-op, so a
//     sync is Pebble's flush loop writing the record to the kernel. An
//     acknowledged change survives SIGKILL, panics and OOM kills (the page
//     cache outlives the process) but not power loss. About 35-45k
//     enqueue+lease+complete cycles/s on the development machine
//     (bench/workers.txt). Only the WAL is affected; sstables and the
//     MANIFEST keep their fsyncs.
//   - DurabilityMachine: real fsyncs; survives power loss. Each change is
//     applied under the lock and its fsync awaited outside it, so concurrent
//     callers share fsyncs (group commit); about 1.5k cycles/s from one
//     goroutine, more from several.
//
// # Restart
//
// Open keeps leases found in the store until their deadline, so a remote
// worker that outlives a sigd restart can still heartbeat and complete its
// lease (lease ids carry a per-Open random nonce plus a counter, so a new
// lease never reuses an old id). Leases already past their deadline are
// returned to the queues at once, counting an attempt, as any expiry does.
// In-process workers die with sigd, so their tasks wait at most one
// LeaseTTL before running again. What only memory held is gone: the holder
// of a lease cancelled before the restart hears ErrLeaseLost rather than
// ErrCancelled, and the counters of Stats start again (testdata/state/
// restart.txt).
//
// # Workers
//
// A Pool runs in-process workers as goroutines. Each loops: Lease, run the
// Runner while a heartbeat goroutine renews the lease at a third of its
// remaining time, then Complete or Fail. A panic in the Runner becomes a
// failure of that task (ErrPanic with the stack); the worker goes on. A lost
// lease or cancelled task cancels the Runner's context. Resize changes the
// size; shrinking is graceful (a worker stops after the tasks it holds).
//
// A memoization run is three stages on different resources: read the raw
// columns (the object store), transform (the worker's CPU), write the memo
// object (the object store). Run one after the other, a worker's CPU idles
// through both I/O stages, a large share of a worker's time in issue 4's
// benchmark (bench/sigd.txt). So a Runner may also be a StagedRunner (Read,
// then Transform and Write on the StagedTask that Read returns), and the pool
// then runs each worker as a pipeline: task i+1 is read while task i is
// transformed and tasks i-1 and i-2 written, each with its own lease,
// heartbeat and context (DefaultPipelineDepth, 4, tasks: one read, one
// transformed and PoolOptions.Writers, 2, written at once; writing mostly
// waits on the object store, and a second writer keeps a long write from
// stalling the transforms behind it). A worker's throughput is then
// bounded by its slowest stage instead of the sum of the three. Failures,
// panics, lost leases and stops keep their meaning per task (see Pool);
// Complete still follows the task's Write.
// sigd's Runner is staged, so in-process workers and `sigd worker` alike
// pipeline; a plain Runner keeps one task per worker.
//
// The pool leases through the Leaser interface. *Queue implements it in
// process; RemoteLeaser implements it over gRPC (sig.v1.Workers), so
// `sigd worker --sigd ADDR` runs the same loop in another process, and
// NewWorkersServer serves the protocol over a Queue. LeaseTask long-polls
// (up to the requested wait, on the queue's clock). The server describes
// each task (canonical DSL, objects, schema) through a function the daemon
// provides, and a completion hook marks the block ready before the task
// leaves the queue. Describe gives in-process runners the same description.
//
// Workers lease batches (PoolOptions.BatchTasks; `sigd worker
// --batch-tasks`, sigd's --worker-batch-tasks): LeaseTaskRequest.max_tasks
// asks for them, and LeaseTaskResponse carries the first task as it always
// did and the rest of the batch in more, each task with its lease, so
// workers and servers of either age agree (a worker that does not ask
// gets one task). The server describes every task of the batch; one it
// cannot describe is failed and left out, and tasks past an answer of
// 1 MiB of descriptions go back to the queue unrun. A BatchRunner runs a
// batch whole (memo's batch runner: union graph, one packed object); any
// other Runner runs its tasks one by one, which still reads the block's
// raw columns once where the runner keeps them (memo.Runner's segment
// cache), and keeps them on one worker.
//
// # Autoscaling
//
// The paper reports SIG's demand swinging tenfold within hours and asks for
// workers that "rapidly scale up" and "scale down promptly". ScaleConfig's
// Decide is the pure decision: the workers needed to drain the backlog
// (queued plus leased tasks) in TargetDrain at the measured task cost (a
// moving average of lease-to-completion time), clamped to [Min, Max]; up at
// once, down only after the need has stayed lower for CoolDown, and then to
// the largest need seen in that window. A pipelined or batching worker
// holds several tasks at once, Pool.TasksHeld on average, so its
// lease-to-completion time spans that many tasks' turns (Little's law:
// tasks held = throughput x time held); ScaleConfig.TasksPerWorker divides
// the cost by it, and sigd sets it from its pool. The size is still counted in workers. The Autoscaler applies
// it every Interval on the injected clock, resizes the in-process Pool, and
// exports sig_workers_desired (for an orchestrator scaling remote workers)
// and sig_workers_actual. RegisterQueueMetrics exports queue depths per
// client and priority, quarantine size, and completion, failure and expiry
// counts. QueuedPeak gives one sampler (the web UI's queue chart) the most
// tasks queued at once since its last read: a burst that is queued and
// drained between two samples still shows.
package workers
