// Package warehouse is the training data warehouse (paper III, IV.A; brief,
// "Warehouse"): raw events arrive through Kafka, are sealed into Arrow blocks
// on S3-compatible storage, and are catalogued so SIG can schedule work per
// block. The code lives in sub-packages, one concern each:
//
//   - objstore: the one object-store client (minio-go): deadlines, retries with
//     backoff, a CRC-32C stored with every object and verified on read.
//   - block: the block object layout (per-column Arrow IPC segments, a footer,
//     a trailer), block metadata and ids, block versions (Version,
//     ColumnVersions, Changes, InputVersion), object keys
//     (raw/<source>/<block>.arrow and .v<N>.arrow,
//     memo/<component-key>/<block>.arrow, checkpoints/<pipeline>/...), and the
//     readers workers use: ReadColumns (ranged reads of only the columns asked
//     for) and ReadBlock.
//   - catalog: the Pebble block catalog: blocks per source in event order and
//     their versions, lookup by event range now or as of a snapshot, pins and
//     GC of superseded versions, Kafka offset coverage; rebuildable from the
//     bucket.
//   - record: the Kafka record format of raw events (JSON, or a compact row
//     encoding), its kinds (event, update, delete) and its validation.
//   - ingest: consumes raw.<source> into sealed blocks, and late events,
//     updates and deletes into new versions of them, with exactly-once
//     effects across crashes; malformed records go to raw.<source>.dlq.
//   - gen: the synthetic Ads event generator.
//   - ready: the sig.memo.ready completeness topic (events, publisher,
//     subscriber).
//
// Bucket layout:
//
//	raw/<source>/<block>.arrow          raw events of one block (version 1)
//	raw/<source>/<block>.v<N>.arrow     version N >= 2 of the block, written whole
//	memo/<component-key>/<block>.arrow  one memoized output, row-aligned with its raw block
//	checkpoints/<pipeline>/...          trainer checkpoints
//
// The test environment that starts MinIO and kfake is internal/devenv.
package warehouse
