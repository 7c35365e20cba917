// Package blocktest builds, for tests, the raw blocks SIG's ingestion never
// writes but a bucket may hold: a block object written by another program,
// whose columns are not of the schema's types. The reader's tests (DataLoss
// for such an object) and the memo runner's (a failed task, no memo
// object) build them the same way from one of the warehouse's blocks.
//
// It is imported by tests only. What it does not own: encoding and writing
// block objects (warehouse/block), and checking column types
// (transform.Conform).
package blocktest
