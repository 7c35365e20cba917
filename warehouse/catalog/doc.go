// Package catalog is the block catalog of the warehouse: which raw blocks
// exist, per source in event order, at which versions, looked up by
// event-time range as of now or as of a snapshot, and which Kafka records
// each covers. It lives in Pebble on local disk and is derived data: Rebuild
// reconstructs it from the bucket alone (the footers of the raw/ objects,
// every version's).
//
// # Key layout (format version 1)
//
//	sig.catalog.format                        -> "1"
//	sig.catalog.generation                    -> uint64 BE: last ingestion generation
//	sig.catalog.seq                           -> uint64 BE: last sequence number handed out
//	sig.catalog.seqindex                      -> uint64 BE: the last sequence number the q\x00 index accounts for
//	s\x00<source>                             -> JSON SourceInfo (window length)
//	b\x00<source>\x00<block id>               -> JSON block.Meta of the block's newest version
//	h\x00<source>\x00<block id>\x00<version:u64 BE>
//	                                          -> JSON block.Meta of a superseded version
//	p\x00<pin name>                           -> uint64 BE: the pinned snapshot
//	q\x00<seq:u64 BE>                         -> <source>\x00<block id>: the block whose newest version has seq
//	f\x00<follower name>                      -> uint64 BE: the snapshot a follower of the feed has acted on
//	o\x00<topic>\x00<partition:u32 BE><window start:i64 BE, sign-flipped><first offset:u64 BE>
//	                                          -> JSON offsetEntry (block id, source, last offset)
//
// # Versions and snapshots
//
// A raw block changes after it was sealed by new versions (late rows,
// updated columns, deleted rows: warehouse/ingest), each a whole object of
// its own (block.RawKey). b\x00 always holds the newest version,
// so Get, Blocks, BlocksAfter and Range read "now" exactly as before
// versions existed; Commit moves the version it supersedes to h\x00. Every
// version committed gets the next sequence number (block.Meta.Seq), and a
// snapshot is a sequence number (Snapshot): snapshot s sees each block at
// its newest version with Seq <= s, and not at all if it was added after s
// (RangeAt, GetAt). One Commit is one Pebble batch, so a change buffer's
// versions and the coverage of its records become visible together.
//
// # The change feed
//
// ChangedSince(after, limit) lists the blocks whose newest version was
// catalogued after snapshot after, in sequence order, each once at that
// version, and the position to continue from: what sigd follows to make
// the memo entries new versions need (package versions), at the cost of
// what changed rather than of every block catalogued. The q\x00 index
// holds one entry per block, the sequence number of its newest version;
// Commit writes it in the batch of the version it records and deletes the
// entry of the version it supersedes (so GC, which removes superseded
// versions only, has none to remove; Remove deletes its block's). A
// follower stores its position in the catalog (SetPosition, Position),
// after acting on the changes up to it, and resumes from it after a
// restart: a crash in between repeats them, never skips one. The
// positions count in this catalog's sequence: a rebuilt catalog has none,
// and its followers start over.
//
// # Compaction
//
// A compacted block (issue 28; warehouse/compact) is a new block at
// version 1 whose metadata names its parts (block.Meta.Parts: each part
// block at the version compacted, its rows, its Kafka spans). Compact
// catalogues it in one batch with a tombstone version of each part
// (block.Meta.CompactedInto: the part's next version, no rows, no object,
// every column changed) and re-points the parts' o\x00 coverage to it
// (the same spans: ingestion skips the same records, and the catalog
// refuses them again), and refuses the batch if a part is not at the
// version the compaction read (ErrConflict). So RangeAt and GetAt at a
// snapshot after the commit find the compacted block and not the parts
// (a tombstone has no rows), at one before it the parts as they were;
// GC collects the parts' last versions like any superseded version, once
// no pin sees them, and keeps the tombstones, each its block's newest
// version (a few hundred bytes), so that snapshots' views never change and
// a late change to a part is refused (it must go to the compacted block).
// Blocks and BlocksAfter leave tombstones out (the block is gone); Get
// and the feed show them. Window lists a window's blocks for the
// compactor. Rebuild keeps the compacted blocks whose batch was committed
// (their parts have no newer object) and leaves their parts out.
//
// Pins (Pin, Unpin, Pins) name the snapshots readers still use (a training
// epoch). GC removes the superseded versions that neither a pin nor "now"
// sees and returns them; the caller deletes their objects afterwards
// (DeleteObjects; CollectGarbage does both), so a crash in between leaves an
// orphan object, never a catalogued version without its object.
//
// Catalogs written before versions have no sig.catalog.seq, no h\x00 or
// p\x00 keys and entries without seq: Open adds the sequence key at 1, so
// their blocks (Seq 0) are seen by every snapshot (and are in no feed), and
// everything else reads them unchanged. A rebuilt catalog has new sequence
// numbers, no pins and no follower positions.
//
// Catalogs written before the change feed have no q\x00 index and no
// sig.catalog.seqindex: Open builds the index from the b\x00 entries,
// once, in one batch, and records the sequence number it accounts for.
// Every Commit moves that marker with sig.catalog.seq, so a catalog that a
// binary without the index wrote to since (the marker behind) is indexed
// again at its next Open, whole: the index never misses a version or names
// a superseded one. Both extend format 1: a binary without them ignores
// the q\x00 and f\x00 keys.
//
// Block ids sort in event order (block.ID), so the b\x00<source>\x00 prefix
// is the source's blocks in event order, and a lookup by event range seeks to
// the first window it touches. Ids sort so only for the event times SIG
// stores (transform.MinEventTime to EndEventTime: four-digit years), so a
// lookup clamps its range to them first. The o\x00 index answers "which offsets of this
// partition and window are already in a catalogued block" for ingestion
// restarts and lets Commit refuse a block (or a version's change) whose Kafka
// range overlaps another of the same partition and window (ErrOverlap): no
// record is ever counted twice. A version-1 block covers its Kafka range; a
// version N>=2 covers the span of the change records that made it (its last
// block.Change), which may lie anywhere after the block's own range.
//
// Names cannot contain bytes below 0x20 (block.ValidateName), so \x00 is a
// safe separator.
//
// The catalog opens with a format-version check: a catalog written by another
// format is refused (ErrFormat) rather than misread; rebuild it from the
// bucket instead.
//
// What it does not own: memoized blocks and their states (the matching
// cache), block contents (warehouse/block).
package catalog
