// Package eviction removes memoized data (paper IV.A, "Eviction"):
//
//   - last-requested eviction: a background process removes the memo blocks
//     of components not requested within a TTL and, optionally, of the
//     least recently requested ones until the memoized bytes fit a storage
//     budget. The decision (policy.go) is a pure function of the components'
//     last-requested times and sizes, with data-driven tests.
//   - subgraph eviction: "users might discover a bug in a transformation
//     graph and request the removal of all memoized outputs associated with
//     that graph ... particularly complex when the problematic graph is a
//     subgraph shared across multiple transformation graphs". Given a DSL
//     expression or a node key, a dry run lists every component containing
//     it, the pipelines using them, their blocks and bytes; a confirmed
//     eviction removes all of it and records an audit entry.
//   - single blocks (block.go): an operator evicts one (component, block),
//     or recomputes it now; and a reader that found a memo object corrupt
//     reports it (ReportCorrupt). A report is only a hint, so that a
//     mistaken or hostile caller cannot destroy good data: the object is
//     read whole and checked as readers check it (checksums, footer,
//     component, type, rows, alignment with the raw block), at most
//     maxVerifications at once; a healthy object changes nothing. The
//     footer is checked by the readers' own check (block.CheckMemo), so
//     that every footer a reader refuses is one sigd repairs (issue 27). A bad
//     one is deleted, then its entry turns pending with a new generation
//     (only the incarnation that was checked: matching.Frontend.Invalidate),
//     any task of the old one is cancelled, and the block is scheduled at
//     the highest priority of the pipelines using it; watchers see it
//     pending, then ready. Every change is audited: who, what they saw,
//     what sigd found.
//   - value mismatches (mismatch.go; issue 21, the shared-fate guard): a
//     reader whose guard recomputed sampled rows and found other values
//     reports the object with reason MEMO_MISMATCH. Its bytes are sound,
//     so the check goes further: Evictor.Recompute (sigd's) computes the
//     block's column from raw columns and every row is compared bit for
//     bit (transform.SameRow). A confirmed mismatch quarantines the entry
//     (as a bad object above: deleted, pending with a new generation, the
//     pending reason "quarantined (MEMO_MISMATCH)" and the first
//     differing row, rescheduled, audited), counted by component
//     (Mismatches; sigd's sig_memo_mismatches_total). An incarnation
//     found healthy is remembered (generation and value checksum), so a
//     reader that computes wrong does not make sigd recompute the block
//     for each of its reports.
//     A misbuilt worker build computes the same wrong values again when
//     the block is recomputed, and catch, quarantine and recompute would
//     loop for ever (issue 27): the memo entry records the build that
//     computed it (from its lease), and when the recomputation of a block
//     a build computed wrong is confirmed wrong again and was computed by
//     the same build, the build is banned from leasing (Builds: the work
//     queues) and the block's task quarantined, its entry failed with
//     the reason naming the build, audited; an operator lifts the ban and
//     releases the block (OutcomeQuarantined). One wrong object does not
//     ban a build: a fault of one machine must not stop all its workers.
//
// Packed memo objects (issue 28): the memo columns of many components of a
// block share one pack, and a pack is never rewritten. Evicting a
// component, or one block of it, removes its entries only ("mark dead"):
// its column stays in the pack, unread, the other members stay ready and
// are not recomputed, and the pack is deleted once no entry names it (the
// matching cache's index of the entries naming each pack, Cache.Unnamed),
// by whichever removal takes its last entry: an eviction, a recomputation
// (the recomputed member goes into a new pack, Invalidate first, the old
// pack after, since no worker ever writes it again), version GC (package
// versions). Verifying a reported member reads the pack's footer, event_id
// and that member's column only (readMemo; block.CheckMember, the
// readers' check): a fault in another member's column is that member's to
// report and repair. Packs no entry ever named (their writer died before
// the switch, or their completion was refused while its members were
// evicted) are deleted by SweepPacks once SweepAfter old, holding
// completions off meanwhile (matching's SweepingPacks), at Run's first
// round and every PackSweepEvery. TestEvictOneMemberOfAPack,
// TestReportCorruptPackMember and TestSweepPacks run on packs of many
// members.
//
// Evicting never breaks a reader: a read solution whose data was evicted
// turns pending, and the next read re-creates and schedules it (matching
// recomputes on demand). The order of removal makes a race with workers
// and readers harmless: the components are marked as being evicted (from
// then on no entry of theirs is created: creating an entry and marking
// exclude each other), their memo entries are deleted (so a worker that
// finishes afterwards cannot mark them ready: its generation is stale),
// then their objects, then the mark is lifted and watchers are told (their
// re-reads re-create the entries and schedule them). No entry is ever ready
// without its object. A worker that was computing a block when it was
// evicted writes its object after the deletion (its ready mark is
// refused): no entry names that object, so nothing reads it, and
// recomputing the block overwrites it with the same bytes; Sweep deletes
// it a while later in case the component is never requested again
// (TestEvictionRacesWorkers, TestOrphanObjectSwept).
//
// Recomputing one block keeps its entry, so no read re-creates it; the
// order is object, then entry: once the entry is pending a worker may
// write the new object, which nothing deletes afterwards. Block operations
// hold blockMu and the component's eviction mark, so two reports of one
// block repair it once, and a component eviction alongside leaves the
// entry gone (Invalidate refuses, nothing more is done).
//
// The package decides and orders removals; the matching cache and the
// warehouse own the state removed. The operator web UI that drives them is
// package sigd/ui; sigd serves them over gRPC (Evict, EvictBlock,
// ReportCorruptMemo, ListAudit) and runs Evictor.Run.
//
// # Tests
//
// policy.go's decisions are data-driven (testdata/policy.txt). The
// Evictor's (evictor_test.go: rounds by TTL and budget, subgraph and
// single-block eviction and recomputation, verifying corrupt reports,
// confirming mismatches) run on the pieces below sigd, wired as sigd wires
// them (stack_test.go): a matching cache in a temporary Pebble directory,
// a work queue, raw blocks in objstore/memstore, and the test as the
// worker. Eviction interleaved step by step with reads and workers
// (interleave_test.go) runs on MinIO, which it stops mid-eviction. What
// needs sigd (gRPC and roles, readers, a trainer, workers racing
// evictions, cost-aware covers) runs end to end on sigd/evictiontest, a
// sigd in process on a real MinIO and kfake with three clients' pipelines
// that share a faulty subgraph, shared with sigd/ui's tests.
package eviction
