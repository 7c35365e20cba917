#!/usr/bin/env bash
# Benchmarks the transform kernels against the plain row-at-a-time loop
# (transform/internal/rowref) on a 1M-row block of Ads-like data, on one
# core, and writes bench/transform.txt: a table of throughputs and ratios
# (bench/ratios, best of COUNT runs per side) followed by the raw output.
# Ratios use rows per CPU-second, which a busy shared machine does not skew;
# wall-clock rows/s are shown next to them.
#
#   bench/transform.sh                 # about 6 minutes
#   COUNT=5 BENCHTIME=10x bench/transform.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-5x}
out=bench/transform.txt
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

cmd=(go test ./transform -run '^$' -bench '^(BenchmarkOp|BenchmarkTypicalComponent)$'
	-cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 60m)
echo "running: ${cmd[*]}" >&2
"${cmd[@]}" | tee "$raw" >&2

{
	echo "# transform kernels vs plain Go, 1,000,000 Ads-like rows, one core"
	echo "# command: bench/transform.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# ratio = arrow / plain throughput, best of $COUNT runs each; rows/cpu-s = rows per second of process CPU time"
	echo
	go run ./bench/ratios <"$raw"
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
