#!/usr/bin/env bash
# sigd benchmarks (issue 4), against a real MinIO and kfake; writes bench/sigd.txt.
#   Submit200Nodes100kCached: gRPC SubmitGraph latency of a 200-node graph whose
#     40 components are memoized, with 100k components in the matching cache
#     (target p99 < 5 ms).
#   MemoizeVsBare: one in-process worker's memoization throughput (blocks/s,
#     rows/s) beside the bare executor on the same blocks in memory, same run
#     (target ratio >= 0.7); *-frac are the worker's read/transform/write
#     phases as fractions of the service's time.
# The queue cycle target (>= 20k/s) is bench/workers.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
  go test ./internal/sigd -run '^$' -bench 'Submit200Nodes100kCached' -benchtime 2000x -count 3 -timeout 30m
  go test ./internal/sigd -run '^$' -bench 'MemoizeVsBare' -benchtime 3x -count 3 -timeout 30m
  cat <<'NOTES'
# Where MemoizeVsBare stands: ratio 0.66-0.79 over 13 runs of this code on 2026-11-22 (median about 0.70), cpu-ratio
# 0.70-0.88 (3 runs): the service's own CPU per block is within 30% of the transform's, and the wall-clock ratio sits
# at the 0.7 target because MinIO shares the 2 CPUs.
# How it got from 0.35 there (each step measured before/after on this machine, interleaved runs):
# - pipelined workers (workers.StagedRunner: read, transform, write overlap): 0.35-0.40 -> 0.43-0.52
# - a block's tasks queued together, its raw columns shared through block.SegmentCache: a 100k-row
#   block's 13 component tasks read 41 MB of columns between them, 10 MB distinct; MinIO CPU per task
#   10.0-10.6 -> 7.2-8.5 ms (50k-row blocks), ratio 0.48-0.50 -> 0.56-0.57
# - two writers a worker (PoolOptions.Writers): the transform stage busy 71-77% -> 83-84% of the time
# - the process at cmd/sigd's GC setting (--gc-percent 400), both sides; 100k-row blocks (--rows-per-block)
# The machine's 2 CPUs are shared with MinIO, whose CPU per memoized block (MD5 of every PUT for its ETag,
# 25% of it, then reads, writes, GC) is about as large as the worker's own overhead: machine busy ~0.8,
# and what is left of the gap is CPU, not waiting (a read-ahead slot raised the transform stage's busy
# share to 0.83-0.87 without moving the ratio).
NOTES
} | tee bench/sigd.txt
