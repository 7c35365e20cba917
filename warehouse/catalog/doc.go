// Package catalog is the block catalog of the warehouse: which raw blocks
// exist, per source in event order, looked up by event-time range, and which
// Kafka records each covers. It lives in Pebble on local disk and is derived
// data: Rebuild reconstructs it from the bucket alone (the footers of the
// raw/ objects).
//
// # Key layout (format version 1)
//
//	sig.catalog.format                        -> "1"
//	sig.catalog.generation                    -> uint64 BE: last ingestion generation
//	s\x00<source>                             -> JSON SourceInfo (window length)
//	b\x00<source>\x00<block id>               -> JSON block.Meta
//	o\x00<topic>\x00<partition:u32 BE><window start:i64 BE, sign-flipped><first offset:u64 BE>
//	                                          -> JSON offsetEntry (block id, source, last offset)
//
// Block ids sort in event order (block.ID), so the b\x00<source>\x00 prefix
// is the source's blocks in event order, and a lookup by event range seeks to
// the first window it touches. Ids sort so only for the event times SIG
// stores (transform.MinEventTime to EndEventTime: four-digit years), so a
// lookup clamps its range to them first. The o\x00 index answers "which offsets of this
// partition and window are already in a catalogued block" for ingestion
// restarts and lets Add refuse a block whose Kafka range overlaps another of
// the same partition and window (ErrOverlap): no record is ever counted twice.
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
