// Package compact decides and builds the compaction of small raw blocks
// (issue 28): which blocks of a partition and window become one (Plan), the
// compacted block's id and lineage (Meta), its rows (Concat), and which
// memo data of its parts can be concatenated rather than recomputed
// (memo.go). It does no I/O: warehouse/ingest's compactor reads the parts,
// writes the result and commits it (catalog.Compact), as table formats
// compact small files into large ones and keep the lineage in their
// metadata, and sigd's versions.Concatenator reads the parts' memo
// columns, writes the concatenated pack and names it.
//
// # Why
//
// The paper's workers "fetch raw data, apply transformations, and store
// results back in the warehouse" per block (IV.A), and readers fetch a
// block's memo objects per work unit: what a block costs is per object
// (a request, a footer, a task, a unit's plan) as much as per byte. A
// stream sealed every second (sigd dev's --seal-after 1s) makes blocks of
// a few hundred rows, each paying all of it (bench/caughtup.txt). Once a
// window is closed and quiet, its blocks no longer grow, and compacting
// them makes every later read and memoization of the window pay per large
// block instead.
//
// # Planning
//
// Plan takes the blocks of one Kafka partition and event-time window in
// offset order and returns runs of consecutive blocks to compact: each
// block of a run is Small (at most half the target: a block ingestion
// sealed by size is left alone) and was cut by ingestion from a Kafka
// range; a run is cut before it would exceed the target in bytes (the
// compacted object is about the sum of its parts' objects), and at a
// block of another schema; a run of one block is no compaction. Runs are
// contiguous: a block that is not small is a barrier. So a compacted
// block holds every record of its window between its first part's first
// offset and its last part's last, which is what its id says
// (block.ID(window, that range)): no other block of the window can have
// the id, and Rebuild can tell what it covers.
//
// # Lineage
//
// The compacted block is a new block at version 1 whose metadata (in its
// footer and the catalog) names its parts (block.Meta.Parts): each part's
// block id and the version that was compacted, its rows (part i's rows
// follow part i-1's in the compacted block) and the Kafka spans it held.
// Its catalog batch (catalog.Compact) ends each part with a tombstone
// version (block.Meta.CompactedInto: no rows, no object), so a snapshot
// taken after the commit lists the compacted block and not the parts,
// and a snapshot before it (a trainer's pinned epoch) still lists the
// parts at the versions it saw, whose objects GC deletes once no pin sees
// them. Later changes of the window (late rows, updates, deletes) make
// versions of the compacted block like of any block. A compacted block is
// never a part of another compaction: lineage is one level deep, so a
// trainer (trainer/control) decides from a block's own lineage alone what
// of it it has trained.
//
// # What trainers see
//
// A training job's unit is a block version and its ledger allows an event
// again only in a newer version of its block (issue 21). A compacted
// block's version 1 holds exactly the rows of its parts' named versions:
// the same event versions, not newer ones. So a job that trained every
// part skips it, a job that trained none trains it, and a job that
// trained some trains it without the rows of the parts it trained
// (trainer/control, "Compaction"); a later version of the compacted block
// is a newer version of every event in it, trained again as any changed
// block is, and the ledger (trainer/checkpoint) knows the parts as older
// versions of the compacted block's events.
//
// # Memo data
//
// A component whose every op computes each row from that row alone
// (transform.OpSpec.AcrossRows unset; RowWise) has, over the compacted
// block, its values over each part one after the other: its column over
// the compacted block is made by concatenating the parts' member columns
// (ConcatMember), without recomputation, checked row-aligned against the
// compacted block's own event ids, for the compacted block at input
// version 1, and written with block.WritePacks over the compacted block
// as a worker writes what it computes (narrow): each member's segment and
// footer entry are then byte for byte a worker's
// (TestConcatMemoEqualsRecomputation). A component with an op across rows
// is recomputed (TestAcrossRowsIsRecomputed). sigd does the I/O and names
// the pack in the compacted block's entries (package versions'
// Concatenator, following the catalog's feed); what it cannot concatenate
// (an op across rows, a part whose entry is not ready) read solutions
// create pending and workers compute, as for any new block.
package compact
