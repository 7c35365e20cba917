// Package warehouse will own the training data warehouse (paper III, IV.A):
// the S3-compatible object store wrapper over minio-go, the layout of raw and
// memoized blocks, the Pebble block catalog, Kafka ingestion of raw events and
// the completeness notifications on sig.memo.ready.
package warehouse
