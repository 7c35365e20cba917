// Package objstore is the one object-store client of SIG: a thin wrapper over
// minio-go/v7 for any S3-compatible server (MinIO in development and tests).
//
// What it adds to minio-go, and nothing more:
//
//   - Deadlines. Every attempt runs under Config.AttemptTimeout inside the
//     caller's context; a whole operation gives up after Config.RetryFor.
//   - Retries with exponential backoff and jitter on transient failures
//     (connection refused or reset, timeouts, 5xx and throttling codes), so a
//     MinIO restart or a short outage delays callers instead of failing them.
//     minio-go's own retry loop is turned off so that there is one policy.
//   - A content checksum on every object: Put stores the CRC-32C (Castagnoli)
//     of the bytes in the object's user metadata (x-amz-meta-sig-crc32c)
//     (PutChecksummed takes it from a caller that has it already) and
//     Get verifies it. A mismatch is ErrCorrupt, with the object named; the
//     bytes are never returned. Ranged reads cannot check the whole-object
//     checksum: callers that read ranges keep their own per-range checksums
//     (warehouse/block does, per column).
//   - Sentinel errors callers branch on: ErrNotFound, ErrCorrupt.
//   - Its own signed GET for reads (get.go: AWS Signature Version 4, the
//     signing key derived once a day, the response read for what reads
//     use). Readers and workers issue a GET per footer and per span of
//     segments; minio-go's per-request work was a visible share of a SIG
//     reader's CPU. Errors come back as minio.ErrorResponse like minio-go's,
//     so one classification serves both paths.
//
// Readers of blocks take the Reader interface (Get, and GetRangeInto,
// GetFromInto, GetSuffixInto, which read into the caller's buffers), and
// block writes take Writer, not the whole client: the calls they make and
// nothing more. A package that needs other calls declares its own small
// interface where it uses them (trainer/checkpoint.Bucket); the daemon's
// wiring and the components that manage the bucket (ingestion, eviction,
// the catalog's rebuild) take *Store. objstore/memstore implements Reader and Writer (and listing and deletes)
// in memory, for tests about logic; TestConformance runs the same cases
// (testdata/conformance.txt) against it and a real MinIO in lockstep, so
// the two cannot drift.
//
// What it does not own: object keys and layouts (warehouse/block), what is in
// the bucket (warehouse/catalog), multipart upload tuning (objects are blocks
// of a few to a few tens of megabytes; minio-go sends those over 16 MiB in
// parts, with its defaults).
package objstore
