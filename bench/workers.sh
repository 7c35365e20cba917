#!/usr/bin/env bash
# Queue throughput: enqueue + lease + complete per cycle, persisted in Pebble
# on disk (issue 4 target: >= 20,000 cycles/s in the default durability).
# "process" = every change written to the kernel before it is acknowledged
# (survives SIGKILL); "machine" = every change fsynced (survives power loss).
# Writes bench/workers.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  go test ./workers -run '^$' -bench 'QueueCycle' -benchmem -benchtime 3s -count 3
} | tee bench/workers.txt
