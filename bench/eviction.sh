#!/usr/bin/env bash
# Eviction benchmarks (issue 7): subgraph search over 100,000 cached
# components (target: p99 < 50 ms), and eviction of a subgraph used by
# 1,000 components x 100 blocks of small memo objects in a real MinIO
# (time, objects deleted per second), with MinIO's data on disk and on
# tmpfs. Writes bench/eviction.txt. Needs bin/minio (make deps).
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/eviction.txt
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "# SIG eviction benchmarks"
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ)  $(go version)  commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)  $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## Frontend.Search, subgraph queries over 100k components (4 ready blocks each), first page of 100 (target p99 < 50 ms)"
  echo "## fill_s: building the cache through Frontend.Submit (untimed); per-query figures with -v"
  go test ./eviction -run '^$' -bench 'BenchmarkSubgraphSearch100k' -benchtime 2000x -count 3
  echo
  echo "## Evictor.Evict of a subgraph in 1,000 components x 100 blocks: 100,000 entries and 512-byte objects, MinIO data on disk"
  go test ./eviction -run '^$' -bench 'BenchmarkEvictSubgraph1000x100' -benchtime 1x -count 1 -timeout 30m
  if [ -d /dev/shm ]; then
    echo
    echo "## The same with MinIO's data on tmpfs (/dev/shm)"
    SIG_BENCH_MINIO_DIR=/dev/shm go test ./eviction -run '^$' -bench 'BenchmarkEvictSubgraph1000x100' -benchtime 1x -count 1 -timeout 30m
  fi
} 2>&1 | grep -v '^time=' | tee "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out"
