// Package memo is the memoization task that SIG's workers run (paper IV.A:
// workers "fetch raw data, apply transformations, and store results back in
// the warehouse"): Runner reads the raw columns a component needs from its
// block, runs the component's canonical graph with package transform and
// writes the memo object whole (MemoRecord: event_id and the output column,
// row-aligned with the raw block, in the layout of warehouse/block). The
// value segment is compressed as Runner.Compression says (sigd's and `sigd
// worker`'s --segment-compression); the event_id segment is encoded exactly
// as the raw block's, so that the two are byte-identical and readers prove
// alignment from the footers (TestRunnerCompression). bench/compression.sh
// runs BenchmarkCompression here.
//
// The in-process pool of `sigd` and the remote `sigd worker` run this same
// Runner. It does not mark a memo entry ready: that is the completion hook
// the daemon puts on the lease protocol (package sigd), so that a block is
// ready only once its object is whole, whoever computed it. Nor does it
// schedule: package workers leases tasks and pipelines Runner's three
// stages (Read, Transform, Write).
package memo
