// Package memo is the memoization task that SIG's workers run (paper IV.A:
// workers "fetch raw data, apply transformations, and store results back in
// the warehouse"): Runner reads the raw columns a component needs from its
// block, runs the component's canonical graph with package transform and
// writes its column whole into a new pack of the raw block version
// (issue 28, block.WritePacks: event_id and the column under the
// component's key, row-aligned with the raw block), which its result names
// (workers.Result.Object) for sigd to switch the memo entry to. A task
// writes a pack of one member; a batch of a block's tasks writes one pack
// of many members through the same writer. A
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
// The in-process pool of `sigd` and the remote `sigd worker` run this same
// Runner. It does not mark a memo entry ready: that is the completion hook
// the daemon puts on the lease protocol (package sigd), so that a block is
// ready only once its pack is whole, whoever computed it. Nor does it
// schedule: package workers leases tasks and pipelines Runner's three
// stages (Read, Transform, Write).
package memo
