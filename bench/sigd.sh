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
} | tee bench/sigd.txt
