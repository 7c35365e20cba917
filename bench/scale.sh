#!/usr/bin/env bash
# The control plane at scale (issue 18 item 3): as the matching cache grows
# from 1k to 1M components, SubmitGraph latency p50/p99 over gRPC to a sigd
# process (target p99 < 5 ms at 1M), the work queue's operations/s with its
# backlog, the Pebble stores' size on disk, sigd's RSS, and the eviction of
# a subgraph (memo blocks/s). Writes bench/scale.json (schema sig.scale/v1,
# read by `sigctl report`) and bench/scale.txt.
#
# How the cache is built (sigd/scale's package doc): through the code sigd
# runs, in bulk, not by a million RPCs: matching.Frontend.Submit of
# pipelines of 200 components each (one Pebble batch per pipeline for its
# component records, search index and user entries), their ready memo
# entries written with Cache.SetMemo just before, in the benchmark's process
# on sigd's data directory while sigd is stopped; then sigd is started on it.
#
# Knobs (environment): SIG_SCALE_SIZES (default 1000,10000,100000,1000000),
# SIG_SCALE_SUBMITS (measured submits per point, each way; default 2000),
# SIG_SCALE_PROFILE_DIR (CPU profiles of the in-process submits and of the
# reuse walk at each point). Needs bin/minio (make deps); 11 minutes on 2
# CPUs at load average 2-6, 25 at 15-20, most of it building the 1M point
# (sigd's RSS reaches 1.9 GiB, the benchmark's 2 GiB, the stores 1.6 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."
export SIG_MINIO_BIN=${SIG_MINIO_BIN:-$PWD/bin/minio}
export SIG_SCALE_SIZES=${SIG_SCALE_SIZES:-1000,10000,100000,1000000}
export SIG_SCALE_OUT=$PWD/bench/scale
export SIG_SCALE_NOTES=$PWD/bench/scale.notes
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "running: go test ./sigd/scale -run '^\$' -bench ScaleCurve -benchtime 1x (sizes $SIG_SCALE_SIZES; load average $load0)" >&2
go test ./sigd/scale -run '^$' -bench ScaleCurve -benchtime 1x -timeout 90m -v 2>&1 | grep -v '^time=' >&2
{
  echo "# command: SIG_SCALE_SIZES=$SIG_SCALE_SIZES bash bench/scale.sh (go test ./sigd/scale -run '^\$' -bench ScaleCurve -benchtime 1x)"
  echo "# load average (1, 5, 15 min) before the run: $load0; after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >>bench/scale.txt
echo "wrote bench/scale.json bench/scale.txt"
