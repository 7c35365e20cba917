// Package memstore is an object store in memory with the semantics of
// objstore.Store, for tests about logic: a test of what a package decides
// (which checkpoint is the latest, what is pruned) needs objects to read
// and write, not a server.
//
// What it honours, as objstore.Store does on MinIO: whole-object CRC-32C
// checks on Get (ErrCorrupt when PutChecksummed was given a wrong sum),
// ErrNotFound for a missing object, ErrRange for a read that starts at or
// past the end of the object, the refusals of a range past the end, of an
// empty range and of a read longer than its max, suffix reads of an object
// shorter than the suffix (and of an empty one), bytes reported to filled
// in contiguous chunks starting at 0, user metadata in canonical header
// form with the checksum key reserved, listings in key order without
// checksum or metadata, deletes of missing objects that succeed. A
// conformance test in objstore runs the same cases against this store and
// a real MinIO, so that the two cannot drift.
//
// What it does not have, and why it replaces no test about storage: a
// network, retries, deadlines per attempt, outages, bitrot, the
// Content-Range checks of a server's answers, latency, key syntax beyond
// an empty key. Every test about how SIG behaves against object storage
// runs on MinIO (internal/devenv).
//
// It reports bytes to filled in chunks of a size unlike objstore.Store's,
// so that a caller that assumes one chunk size fails here.
package memstore
