// Package memo is the memoization task that SIG's workers run (paper IV.A:
// workers "fetch raw data, apply transformations, and store results back in
// the warehouse"): Runner reads the raw columns a component needs from its
// block, runs the component's canonical graph with package transform and
// writes its column whole into a new pack of the raw block version
// (issue 28, block.WritePacks: event_id and the column under the
// component's key, row-aligned with the raw block), which its result names
// (workers.Result.Object) for sigd to switch the memo entry to. A
// component may be any node's cone (a cover's memo node, issue 20). The
// task's description names the memo nodes inside the cone that were ready
// for the block (Task.memo_inputs, sigd's describe), each a pack's column
// or an object of the node alone as written before packs: the runner reads
// them, checked as readers check memo inputs (block.CheckMember: footer,
// column, input version, type, row alignment), and
// runs only the residual above them (canon.Residual,
// transform.CompileResidual), so a nested subexpression memoized for other
// covers is not computed again; one it cannot use is skipped and computed
// from raw columns, which gives the same column. A memo input may be any
// node of the cone — one constant folding made, one with two users, a
// bare column, whose raw column is then not read (TestRunnerOverEveryNodeKind,
// issue 27) — though sigd never names a bare column (matching's Describe:
// reading its object saves no computing). The computing is a
// transform.Program's, as sigd's, the readers' and `sigctl run`'s is. It
// reports the time each op class's kernels took (Result.OpNanos,
// Program.RunObserved), which sigd keeps for the insertion policy.
//
// Raw blocks have versions (issue 21). A task's block id is a memo block
// ref, "<id>.v<N>" for input version N >= 2, and its raw object a version
// of the block whose input version for the component's columns is N
// (sigd's describe picks it); the runner checks that from the version's
// metadata (TaskError otherwise), reads memo inputs only at their own input
// version in that raw version, and writes a pack of that raw version whose
// member records the input version (absent for 1).
//
// The member's segment is compressed as Runner.Compression says (sigd's and
// `sigd worker`'s --segment-compression); the event_id segment is encoded
// exactly as the raw block's, so that the two are byte-identical and
// readers prove alignment from the footers (TestRunnerCompression).
// bench/compression.sh runs BenchmarkCompression here. An int64 or
// list<int64> value is stored in the narrowest integer type that holds it
// (warehouse/block, "Narrow stored types"; Runner.Wide turns that off),
// widened back by every reader; bench/narrow.sh runs BenchmarkNarrow here.
//
// # Block-batched tasks
//
// Runner is a workers.BatchRunner (issue 28): a worker that leases a batch
// of one raw block's tasks (workers.PoolOptions.BatchTasks, sigd's
// --worker-batch-tasks and `sigd worker --batch-tasks`, 32 by default)
// hands it to RunBatch whole. RunBatch groups the tasks by the raw block
// version each reads, reads each group's raw columns once, merges the
// tasks' canonical graphs into one and canonicalizes it (canon.Canonicalize,
// as a reader merges a unit's LOCAL inputs), so that a subexpression the
// components share — lower(col("query")) sits under a dozen of the fleet's
// — runs once, and writes one pack per group holding every task's column
// (more only past Runner.PackBytes). Each task's result names its pack
// and its member's segment length, as Run's does; its OpNanos are the
// measured times of the nodes of its own cone, a shared node's to each of
// its users (what the op costs per row, which the insertion policy wants;
// RunBatch says why). A task fails alone: one that does not check fails
// before its group forms, one whose op errs or panics fails after the
// group's components were computed one by one over the columns read, the
// others still packed together; a task reading memo inputs runs alone
// (Run). Every member's bytes are Run's (testdata/batch, TestRunBatchData).
// bench/batch.sh runs BenchmarkBatch: worker CPU per (component, block) of
// batches against one task per component, on the fleet generator's
// components.
//
// Batched or not, sigd completes each task on its own, naming the pack:
// one that names a pack its worker wrote whole (the batch's tasks are
// reported only once RunBatch has returned), so a worker killed mid-batch
// leaves the tasks it reported ready in the pack and the others to be
// computed again (sigd's TestRemoteWorkerKilledMidMemoBatch).
//
// The in-process pool of `sigd` and the remote `sigd worker` run this same
// Runner. It does not mark a memo entry ready: that is the completion hook
// the daemon puts on the lease protocol (package sigd), so that a block is
// ready only once its pack is whole, whoever computed it. Nor does it
// schedule: package workers leases tasks and hands a batch to RunBatch, or,
// with batches of one, pipelines Runner's three stages (Read, Transform,
// Write).
package memo
