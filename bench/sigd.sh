#!/usr/bin/env bash
# sigd benchmarks (issue 4), against a real MinIO and kfake; writes bench/sigd.txt.
#   Submit200Nodes100kCached: gRPC SubmitGraph latency of a 200-node graph whose
#     40 components are memoized, with 100k components in the matching cache
#     (target p99 < 5 ms).
#   MemoizeVsBare: one in-process worker's memoization throughput (blocks/s,
#     rows/s) beside the bare executor on the same blocks in memory, same run
#     (target ratio >= 0.7); *-frac are the worker's read/transform/write
#     phases as fractions of the service's time. etag=md5 is MinIO as SIG's
#     development store and tests run it (S3-strict), etag=random without the
#     MD5 of each PUT (--no-compat, devenv.MinIOConfig.RandomETags).
# The queue cycle target (>= 20k/s) is bench/workers.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
  go test ./sigd -run '^$' -bench 'Submit200Nodes100kCached' -benchtime 2000x -count 3 -timeout 30m
  # MinIO without the MD5 ETag (etag=random, --no-compat) and S3-strict as SIG's
  # development store runs it (etag=md5), one process each, alternating, so
  # that the order favours neither.
  for i in 1 2 3; do
    for etag in random md5; do
      go test ./sigd -run '^$' -bench "MemoizeVsBare/etag=$etag\$" -benchtime 6x -count 1 -timeout 30m
    done
  done
  cat <<'NOTES'
# Where MemoizeVsBare stands (2026-11-22, fourth session; a run's ratio is the median over its 6 iterations):
# - etag=random (MinIO --no-compat, as SIG ran it then): 18 runs at 0c5c59d or its equivalent (this
#   file's three, from make bench at b27c34f, and three from a clean clone included): 0.698-0.847,
#   median 0.809; 17 of the 18 at 0.70 or more. MinIO CPU per task 4.6-6.3 ms in 14 of them, 8.5-10.8
#   in the other 4.
# - etag=md5 (S3-strict, as SIG runs it now: an MD5 of every PUT for its ETag): 18 runs the same
#   morning, interleaved with those: 0.676-0.790, median 0.746; MinIO CPU per task 8.6-18.1 ms. On
#   2026-11-21/22, 29 runs of the code before (all S3-strict): 0.619-0.805, median 0.715.
# - cpu-ratio (bare CPU per task / sigd CPU per task: the service's own cost, with the object store
#   elsewhere as in production): 0.67-0.83 (random), 0.75-0.83 (md5); the ETag is not sigd's work.
# Why the development store and the tests run S3-strict (since issue 16): SIG checks every object by
#   the CRC-32C objstore stores with it (verified on every Get), so the MD5 ETag is a second checksum
#   SIG never reads, and it was 40-50% of MinIO's CPU per memo object PUT here, where MinIO shares the
#   2 CPUs with the service. But the tools a user first looks at SIG's data with check it (rclone copy
#   fails "md5 hash differ", s3cmd get warns on every object), and the median ratio is above the 0.7
#   target either way (medians 0.81 and 0.75): a few percent is not worth a store those tools reject.
#   etag=random stays as a measurement (devenv.MinIOConfig.RandomETags runs MinIO --no-compat).
#   Against another S3 store the MD5, if any, is that store's CPU, not SIG's.
# The run-to-run spread (MinIO's CPU per task for the same code, 8.7-18.1 ms) is a guess, not
#   measured: fresh memory. This VM reports freed pages to its host (virtio-balloon free page
#   reporting: 153 GB reported since boot; DAMON pageout runs too), a fresh 4 KiB page costs 1.5 us
#   to touch here (2.4-2.7 GB/s), and MinIO writes each object into new page-cache pages.
# How it got from 0.35 there (each step measured before/after on this machine, interleaved runs):
# - pipelined workers (workers.StagedRunner: read, transform, write overlap): 0.35-0.40 -> 0.43-0.52
# - a block's tasks queued together, its raw columns shared through block.SegmentCache: a 100k-row
#   block's 13 component tasks read 41 MB of columns between them, 10 MB distinct; MinIO CPU per task
#   10.0-10.6 -> 7.2-8.5 ms (50k-row blocks), ratio 0.48-0.50 -> 0.56-0.57
# - two writers a worker (PoolOptions.Writers): the transform stage busy 71-77% -> 83-84% of the time
# - the process at cmd/sigd's GC setting (--gc-percent 400), both sides; 100k-row blocks (--rows-per-block)
# - one CRC-32C pass per memo object instead of three (objstore.ChecksumCombine, PutChecksummed) and
#   reused encode buffers: sigd CPU per task 17.9-19.1 -> 15.2-17.8 ms
# - MinIO without the MD5 ETag (--no-compat): MinIO CPU per task 8.7-9.1 -> 4.6-5.7 ms, ratio
#   0.74-0.79 -> 0.81-0.85 (4 interleaved pairs, a process each)
# Tried without effect on the ratio: MinIO's data on disk instead of tmpfs, deleting the memo objects
# between iterations, three writers, a read-ahead slot, GODEBUG=madvdontneed=0.
NOTES
} | tee bench/sigd.txt
