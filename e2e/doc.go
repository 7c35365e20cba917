// Package e2e holds end-to-end tests of SIG as its users run it: `sigd
// dev` (embedded Kafka, MinIO, ingestion, matching, workers) and `trainer
// run` as real processes, events produced to Kafka as any producer would,
// processes killed with SIGKILL mid-run, and what the system stored and
// trained checked from the bucket and the checkpoints alone.
//
// It has no code outside its tests.
//
//	caughtup_test.go  issue 21: a job trains through the phase switch while
//	                  late events, label and feature updates and deletions
//	                  make new block versions; sigd (with its ingestion) and
//	                  the trainer are killed; every version the epochs
//	                  claim is trained exactly once, and only the memo
//	                  objects of changed columns are recomputed.
//	stream_bench_test.go  BenchmarkCaughtUpStream: caught-up reader CPU with
//	                  SIG against pure LIG on the same stream of late
//	                  events and updates (bench/caughtup.sh).
package e2e
