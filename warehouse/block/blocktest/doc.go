// Package blocktest builds, for tests, the raw blocks SIG's ingestion never
// writes but a bucket may hold: a block object written by another program,
// whose columns are not of the schema's types. The reader's tests (DataLoss
// for such an object) and the memo runner's (a failed task, no memo
// object) build them the same way from one of the warehouse's blocks.
//
// It also damages a block object's footer as a writer with a bug would
// (DamageFooter, MemoFooterDamages: one byte flipped, the footer's CRC-32C
// written to match), so that the tests of what readers refuse and sigd
// repairs (the reader's, the block package's, eviction's, sigd's) damage
// footers one way.
//
// It is imported by tests only. What it does not own: encoding and writing
// block objects (warehouse/block), and checking column types
// (transform.Conform).
package blocktest
