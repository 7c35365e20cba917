// Package matching owns SIG's matching frontend (paper IV.A, Figure 3):
//
//   - canonicalization and component keys live in canon, which
//     stores nothing, so that readers and trainers use keys without the
//     cache;
//   - the Pebble-backed matching cache (cache.go, its records in
//     records.go) and its key layout (keys.go, pinned by
//     testdata/layout.txt): only the Cache's methods touch Pebble or a
//     key's bytes;
//   - the frontend: submit, read solutions, the memo entry lifecycle and
//     watch (the files are listed below), and the graph search index
//     (search.go), all through Cache methods;
//   - how memoized blocks are shared (Frontend.Reuse, reuse.go): a ready
//     block counts the registered pipelines whose read solutions name it,
//     those that use its component over an event range covering it
//     (testdata/reuse.txt);
//   - covers (cover.go, issue 20): at submit, the insertion policy
//     (matching/insertion) decides per model input which canonical nodes
//     of its component are memoized, fed the ops' measured costs and the
//     nodes' measured sizes (stats.go: workers' task statistics, memo
//     objects' sizes) and each node's reuse (the registered pipelines whose
//     graphs contain it, by the search index). Any node may be memoized:
//     its cone is a component under the node's own key, with a record,
//     users, memo entries and tasks like any other, so memo objects of a
//     whole component (the paper's only kind) keep their keys. The cover
//     is stored in the pipeline's record (a record without one, written
//     before covers, is the whole component) and read solutions name, per
//     input, either the component's memo entries or its memo nodes'
//     entries with the residual readers compute and the policy's reason.
//     Nested subexpressions several models share are one memo node, one
//     task per block (TestNestedSharedNodeOnce); a memo node no cover
//     names any more is not computed (Frontend.Needed).
//   - versions (versions.go, issue 21): a memo entry is for (component,
//     block, input version), the input version the newest version of the
//     block at which a raw column the component reads changed; its memo
//     block ref is the block id for input version 1, "<id>.v<N>" after.
//     A label update leaves every feature component's entry as it was; a
//     feature update gives exactly the components reading the column (the
//     k index) new entries, created pending and scheduled at their
//     pipelines' priorities by BlockChanged (or by the next read
//     solution). Read solutions resolve the blocks at a catalog snapshot
//     (ReadSolutionAt, 0 = now; SnapshotBlocks) and name it, each block's
//     version and each entry's input version; DropVersions removes the
//     entries of versions the catalog's GC dropped that no kept version
//     reads (testdata/versions.txt).
//   - packed memo objects (issue 28): a worker writes a block's memo
//     columns into packs (warehouse/block's pack.go), and a ready entry
//     names its pack and its column there (MemoEntry.Object, Column; an
//     entry without a column names its component's own object, as every
//     entry written before packs, testdata/layout-v2.txt). A pack's
//     entries are switched to it in one batch after it was written
//     (Memos.CompletePack), so a crash in between leaves the entries
//     pending and the pack unnamed. An index from each pack to the
//     entries naming it is written in the same batches as the entries
//     (the m keys, memoentries.go): evicting or recomputing one member
//     removes its entry only ("mark dead"), its column stays in the pack
//     unread, and the pack is deleted when its last entry goes
//     (Cache.Unnamed tells the caller, eviction and versions, which
//     objects a removal freed); packs never named are the evictor's
//     sweep's (SweepingPacks holds completions off meanwhile).
//
// A component key is a canon.Key throughout, in the records the cache
// stores too (as hex in their JSON); it is never formatted and parsed back
// inside the process.
//
// Where things are, one concern a file. The frontend:
//
//   - frontend.go: the Frontend, its config and constructor, the
//     interfaces it takes (Blocks, SnapshotBlocks, Scheduler, Admitter),
//     its counters;
//   - validate.go: InputError and the checks of names, priorities and
//     event ranges;
//   - submit.go: Submit and admission;
//   - solution.go: read solutions (the Solution types, ReadSolution,
//     resolve);
//   - memo.go: the memo entry lifecycle (createMissing, Evicting, Begin,
//     Needed, MarkReady, MarkFailed, MarkPending, Invalidate, Schedule,
//     Reconcile);
//   - watch.go: watchers of memo entries (Watch, Notify, the notifier);
//   - lifecycle.go: the memo entry's side of a worker task (Memos:
//     Describe, Complete, CompletePack, Quarantined, Released, Recover) and RawVersion,
//     the one rule from a memo entry to the raw version it is computed
//     from; sigd wires it to the queues and translates it to the Workers
//     API;
//   - compacted.go: the memo entries of compacted blocks (issue 28):
//     which components' entries could be concatenated from the parts'
//     (Frontend.Compacted) and naming a concatenated pack in them
//     (Memos.CompleteConcatenated: missing entries created ready, pending
//     ones switched), for package versions' Concatenator;
//   - cover.go, versions.go, search.go, reuse.go: covers, versions, search
//     and reuse, as above.
//
// The cache:
//
//   - cache.go: the Cache, its options, open and close;
//   - keys.go: the key layout;
//   - records.go: the records it keeps (ComponentRecord, MemoEntry,
//     Pipeline, PipelineInput, Cover);
//   - components.go: component records (and their search index entries);
//   - pipelines.go: registered pipelines and the user index;
//   - requested.go: last-requested times;
//   - memoentries.go: memo entries and the index of the entries naming
//     each pack;
//   - index.go: the search index's scans and streams;
//   - stats.go: the insertion policy's measurements;
//   - audit.go: the eviction audit log.
//
// It does not execute transforms (package transform) nor schedule work
// (package workers).
package matching
