// Package sigd is the SIG daemon's server: it wires the matching frontend,
// the work queues and worker pool, the warehouse and Kafka into the gRPC
// services of proto/sig/v1, with authentication, metrics and health
// checking. cmd/sigd parses flags into a Config and runs a Server.
//
// It owns wiring and RPC translation only: canonicalization and read
// solutions are package matching's, and so is the memo entry's side of a
// worker task (matching.Memos: what a task computes, what its completion
// does, the queues' quarantine mirrored); scheduling is package workers',
// the memoization task its workers run is package workers/memo's (shared
// with the remote `sigd worker`), following and collecting block versions
// and concatenating compacted blocks' memo entries package versions', checking reported memo objects package eviction's,
// trainers' reported statuses package sigd/trainers', storage is package
// warehouse's, and the operator console it serves under /ui/ on its HTTP
// port is package sigd/ui.
//
// # Component keys
//
// A component key is a canon.Key inside sigd. Requests name components in
// hex: each handler parses the field once (canon.ParseKey, InvalidArgument
// naming it) and answers format keys once (keysToProto, Key.String). A
// block is a warehouse/blockref value likewise, parsed where a request
// names it (blockref.ParseMemo) and printed where an answer does.
//
// # Why an entry is not ready (issue 30)
//
// ExplainPending (explain.go) answers, for a pipeline's entries not ready,
// why: its state in the matching cache (failed; pending with the reason
// it was invalidated, so recomputing) joined with its task's place in the
// work queue (workers.Queue.Explain: queued behind how many tasks of which
// clients at which priorities, leased by which worker for how long,
// quarantined), and blocks asked for that the catalog does not have
// (waiting for ingestion). Trainers record these answers against the
// stall they waited through (trainer/accounting/stall); sigctl why and the
// web UI show them.
//
// # Completion
//
// A memo entry is marked ready only after its object is written whole, and
// only for the incarnation (generation) the worker computed: in-process
// runs carry it in their task description; for remote workers, whose
// CompleteTask names only the lease, the entry's current generation is
// read and the object checked to exist first (matching.Memos.Complete,
// which sigd's completion hook calls before the task leaves the queue, so
// a crash in between re-runs it, rewriting the same bytes). It also keeps
// the workers' measured op costs (CompleteTask.op_nanos) in the matching
// cache, for the insertion policy; and a task whose memo node no
// registered pipeline's cover names any more is described as having
// nothing to compute (matching.Memos.Describe, Frontend.Needed).
//
// # Insertion
//
// --insertion=all memoizes every model input's whole component (the
// paper's SIG, the default); --insertion=cost lets matching/insertion
// choose per input a cover, the nodes worth memoizing, the rest computed
// by readers (issue 20). SubmitGraph's memoize map overrides it per input.
//
// # Versioned blocks
//
// A raw block can change after it was sealed (issue 21: late rows, label
// updates, deletions); each change is a new version in the catalog, at a
// new snapshot. Package versions, which sigd runs, follows the catalog's
// change feed from the position it stored there (a restart resumes, and
// re-creates no entry evicted since) and has the matching frontend make
// pending, at the pipelines' priorities, the memo entries of the
// components reading a changed column only (Frontend.BlockChanged;
// sig_block_versions_total, sig_version_memo_tasks_total).
// GetReadSolution and WatchReadSolution take a snapshot (0 = now) and the
// solution names it, each raw block's version and each memo entry's input
// version. Trainers and operators pin snapshots (PinSnapshot,
// UnpinSnapshot, versions.go; a trainer's pin names start with
// "<client>:"), and version GC (package versions: every
// --version-gc-every, or Options.GCTrigger; sigd's ingestion leaves it to
// sigd) drops the versions no pin and not "now" sees, superseded more than
// --version-gc-grace ago, then the memo entries no kept version reads,
// then their objects (sig_version_gc_*). A task's block is a memo block
// (blockref.Memo: the block and an input version); its description names a
// raw version of that input version for the worker to read
// (matching.RawVersion, the rule the evictor's checks use too).
//
// # Compacted blocks
//
// When ingestion compacts a quiet window's small blocks (issue 28), sigd
// makes the compacted block's memo entries of row-wise components from
// their parts' ready columns rather than recomputing them
// (versions.Concatenator, run beside the versions manager with its own
// feed position): one pack of the compacted block, named in its entries in
// one batch (matching.Memos.CompleteConcatenated), written with the
// workers' segment compression (--segment-compression);
// sig_compacted_memo_entries_total{outcome} and
// sig_compacted_memo_packs_total count what was concatenated and what was
// left to recompute. Options.HoldConcat (SIG_TEST_HOLD_CONCAT in cmd/sigd)
// holds it between writing the pack and naming it, for crash tests.
//
// # Corrupt memo objects
//
// A reader that finds a memo object corrupt reports it
// (ReportCorruptMemo): readers with a token of role reader (cmd/reader
// --sigd), workers and operators for any component, clients and trainers
// for their own pipelines' components. The report is a hint: the evictor
// reads the object and checks it as readers do, and only a block it finds
// bad is recomputed (eviction.Evictor.ReportCorrupt). A reader's guard
// reports a memo object whose sampled rows differ from a recomputation
// with reason MEMO_MISMATCH: sigd recomputes the block from its raw
// columns (eviction.RecomputeFromRaw), compares every row, and quarantines
// and recomputes the entry only if they differ; sig_memo_mismatches_total
// counts confirmed mismatches by component, sig_memo_reports_total every
// report by reason and outcome (healthy MEMO_MISMATCH reports point at a
// reader computing wrong), the entry's pending reason on
// the web UI's component page and the audit log say what was found
// (TestGuardMismatchRepaired). Operators evict or recompute one block with
// EvictBlock.
//
// Workers say their build when they lease (workers.BuildID; in-process
// workers Options.WorkerBuild in tests), and a memo entry records the
// build that computed it. A misbuilt build computes a block wrong again
// when it is recomputed: when the recomputation of a block a build
// computed wrong is confirmed wrong again and was computed by the same
// build, the evictor bans the build (it leases nothing more; its leases
// are taken back), quarantines the block's task and fails its entry,
// naming the build in the reason and the audit log, rather than loop
// (issue 27; TestGuardBansWrongBuild). ListWorkerBuildBans, the web UI's
// overview and sig_banned_worker_builds show the bans; an operator lifts
// one (LiftWorkerBuildBan, `sigctl builds lift BUILD`, the overview's Lift
// button; audited) and releases the block (ReleaseQuarantine).
//
// # Kafka topics
//
// New creates every topic sigd reads or writes that the brokers lack
// (internal/topics): raw.<source> and raw.<source>.dlq of each ingested
// source and sig.memo.ready, before it serves, so producers and subscribers
// that start once sigd is up find them, and nothing relies on the broker
// creating topics on first use. If the brokers cannot be reached within
// 30 s, or refuse to create a missing topic, New fails with the reason.
//
// # Tests
//
// Package sigdtest is the harness: raw blocks in a real MinIO, kfake, a
// token file with several clients, sigd in process or as a subprocess, and
// LIG through the real `sigctl run`. The tests here show that shared
// components are computed once per block and equal LIG byte for byte,
// priority and fairness over gRPC, SIGKILL of sigd and of a remote worker
// mid-work, SIGKILL of `sigd dev` with acknowledged events not yet sealed,
// authentication and roles, bad requests, shutdown, the repair of a corrupt
// memo object reported by a real cmd/reader, and grpcurl as a third-party
// client, and versioned blocks end to end (TestVersionsEndToEnd: events
// and change records through Kafka and ingestion; a label update
// recomputes nothing, a feature update one task, the pinned snapshot
// serves the old bytes, SIG equals LIG at every version, GC).
// bench/sigd.sh runs the benchmarks.
package sigd
