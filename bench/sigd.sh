#!/usr/bin/env bash
# sigd benchmarks (issue 4), against a real MinIO and kfake; writes bench/sigd.txt.
#   Submit200Nodes100kCached: gRPC SubmitGraph latency of a 200-node graph whose
#     40 components are memoized, with 100k components in the matching cache
#     (target p99 < 5 ms).
#   MemoizeVsBare: one in-process worker's memoization throughput (blocks/s,
#     rows/s) beside the bare executor on the same blocks in memory, same run
#     (target ratio >= 0.7); *-frac are the worker's read/transform/write
#     phases as fractions of the service's time. etag=random is MinIO as SIG
#     runs it (--no-compat), etag=md5 S3-strict, for comparison.
# The queue cycle target (>= 20k/s) is bench/workers.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
  go test ./internal/sigd -run '^$' -bench 'Submit200Nodes100kCached' -benchtime 2000x -count 3 -timeout 30m
  # MinIO as SIG runs it (etag=random, --no-compat) and S3-strict (etag=md5),
  # one process each, alternating, so that the order favours neither.
  for i in 1 2 3; do
    for etag in random md5; do
      go test ./internal/sigd -run '^$' -bench "MemoizeVsBare/etag=$etag\$" -benchtime 6x -count 1 -timeout 30m
    done
  done
  cat <<'NOTES'
# Where MemoizeVsBare stands (2026-11-22, code at 7852f79 and after; a run's ratio is the median over its
# iterations: 6 with this script's -benchtime 6x, 3 in the A/B runs before it):
# - wall-clock ratio over 29 runs (the three of bench/sigd.txt at 2026-11-22T07:10Z included): 0.619-0.805,
#   median 0.715; 19 of the 29 at 0.70 or more. At the target, not clear of it.
# - cpu-ratio (bare CPU per task / sigd CPU per task, the service's own cost with the object store
#   elsewhere, as in production): 0.630-0.905 over the same 29 runs, median 0.78; 28 of the 29 at 0.70
#   or more.
# - From run to run, MinIO's CPU per task varies 9-17 ms and sigd's 15-21 ms. A guess, not measured: page
#   faults on memory this VM hands back to its host (its kernel runs kdamond). Go's
#   GODEBUG=madvdontneed=0 (keep freed pages mapped) made no difference in 3 interleaved pairs.
# How it got from 0.35 there (each step measured before/after on this machine, interleaved runs):
# - pipelined workers (workers.StagedRunner: read, transform, write overlap): 0.35-0.40 -> 0.43-0.52
# - a block's tasks queued together, its raw columns shared through block.SegmentCache: a 100k-row
#   block's 13 component tasks read 41 MB of columns between them, 10 MB distinct; MinIO CPU per task
#   10.0-10.6 -> 7.2-8.5 ms (50k-row blocks), ratio 0.48-0.50 -> 0.56-0.57
# - two writers a worker (PoolOptions.Writers): the transform stage busy 71-77% -> 83-84% of the time
# - the process at cmd/sigd's GC setting (--gc-percent 400), both sides; 100k-row blocks (--rows-per-block)
# - one CRC-32C pass per memo object instead of three (objstore.ChecksumCombine, PutChecksummed) and
#   reused encode buffers: sigd CPU per task 17.9-19.1 -> 15.2-17.8 ms
# What is left is the machine: MinIO shares its 2 CPUs and takes 9-15 ms of CPU per task (its own
# profile: 45% writing the object into its data directory, write(2) into the page cache; 21% MD5 for
# the ETag; 10% reads), as much as the transform's 12-14 ms, and its share varies from run to run.
# Tried without effect on the ratio: MinIO's data on disk instead of tmpfs, deleting the memo objects
# between iterations, three writers, a read-ahead slot.
NOTES
} | tee bench/sigd.txt
