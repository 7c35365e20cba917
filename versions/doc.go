// Package versions keeps the memo entries in step with the versions of raw
// blocks (issue 21; issue 26 made it one component): it follows the
// catalog's change feed to make the entries new versions need, and collects
// the versions no reader can see any more with the entries and objects only
// they had. sigd constructs a Manager and runs it (run("versions")), and
// keeps only what translates RPCs: the snapshot pins trainers take.
//
// # Following
//
// A raw block changes after it was sealed by new versions (late rows,
// updated columns, deleted rows: warehouse/ingest). For each block whose
// newest version the catalog added, the Manager passes that version to the
// matching frontend (Frontend.BlockChanged), which creates and schedules the
// memo entries of the components reading a changed column, so a label update
// recomputes nothing and a feature update exactly the components reading
// it. It reads the versions from the catalog's change feed
// (catalog.ChangedSince) from the position it stored in the catalog
// (catalog.SetPosition) and stores the new one after BlockChanged returned
// for every version up to it:
//
//   - a restart resumes where it stopped, so it counts no version twice
//     (sig_block_versions_total) and re-creates no entry an operator
//     evicted since (eviction deletes entries and leaves the pipelines, and
//     BlockChanged creates an entry it finds missing);
//   - a crash between a version's commit and BlockChanged, or between
//     BlockChanged and the position, repeats the version (BlockChanged only
//     adds what is missing), so no task is lost;
//   - a pass costs what changed since the position, not every block
//     catalogued (bench/versions.txt: the first pass of a restart at 50,000
//     blocks against the full rescan it replaces).
//
// A version superseded before a pass saw it is not passed on its own (the
// feed lists each block once, at its newest version): the entries only it
// would have made are created when a read solution at a snapshot naming
// it asks for them (resolve creates missing entries). Version-1 blocks are
// in the feed too and are skipped: no entry of a new block exists to be
// out of date; so are the tombstones that end the parts of a compacted
// block (issue 28: no rows, no object; the compacted block is a new block,
// whose entries are concatenated from its parts' where they can be:
// "Compacted blocks" below, and otherwise created when a read solution
// asks). The Manager polls the feed (Options.Poll): looking costs one
// read of the catalog's sequence number when nothing was committed, so
// versions committed by any writer (sigd's ingesters, another process
// before sigd started, tests) are followed alike.
//
// # Collecting
//
// Version GC (Collect, every Options.GCEvery and on Options.GCTrigger):
// the catalog drops the versions no pin and not "now" sees and that were
// superseded before the grace horizon (catalog.Horizon: a reader may have
// resolved one without a pin within Options.GCGrace), then the memo
// entries no kept version reads are removed (Frontend.DropVersions), then
// the memo objects they left unnamed (Frontend.Unnamed: an object of one
// component with its entry, a pack only with the last entry naming it,
// issue 28) and the raw versions' objects (Store.DeleteMany).
// Catalog and entries first, objects after: a crash in between leaves
// orphan objects, never an entry or a version without its object; a crash
// between the catalog's GC and the entries' removal leaves entries (with
// their objects) that no version reads and no read solution names, storage
// only, until their component is evicted. Ingestion run by sigd leaves GC
// to it (ingest.Config.GCInterval < 0), since only sigd knows the entries.
//
// # Compacted blocks
//
// A Concatenator (concat.go, issue 28) follows the same feed from a
// position of its own (ConcatPositionName) for compacted blocks (those
// with lineage, block.Meta.Parts). For each it takes the candidates
// matching.Frontend.Compacted lists (the components some pipeline covering
// the block memoizes, whose entry in the block's newest version is still
// its version 1's) and concatenates those whose parts' entries are all
// ready, at the versions compacted, and whose canonical DSL is row-wise by
// its Registry (compact.RowWise):
//
//  1. one planned read of each part object the parts' entries name (a
//     pack, or an object of one component written before packs), each
//     member checked as readers check it (block.CheckMember);
//  2. each component's column concatenated (compact.ConcatMember, which
//     checks the parts' event ids against the compacted block's own,
//     read from its raw object);
//  3. the members written as packs of the compacted block's version 1
//     (block.WritePacks: narrow, split by PackBytes, as a worker's);
//  4. each pack named in its members' entries in one batch
//     (matching.Memos.CompleteConcatenated: missing entries created
//     ready, pending ones — a read solution asked first — switched,
//     keeping their generation, so a worker computing one has its
//     completion refused and its task then finds nothing left; ready and
//     failed entries left);
//  5. the position stored once every block of the page is done.
//
// A crash between 3 and 4 leaves the packs unnamed (the evictor's sweep
// deletes them) and the position before the block, so the restart
// concatenates again into new packs and names those
// (TestSIGKILLBetweenConcatAndSwitch in sigd). Anything else is left to the
// normal path, counted by reason (ConcatResult.Left): an op across rows,
// a part's entry not ready or its object unreadable, the entry ready
// already. Reading a part object that is gone or corrupt is not an error;
// a store or cache failure is, and the block is retried at the next poll.
// The block's columns are held in memory together, as a worker's batch of
// one block's tasks holds them.
//
// # What it does not own
//
// Which entries a version makes or drops (matching), the versions and the
// feed (warehouse/catalog), the objects (warehouse/objstore), the pins
// trainers take (sigd's PinSnapshot and UnpinSnapshot RPCs, catalog.Pin),
// metrics (sigd's, through Options.OnChanged and Options.OnCollected).
package versions
