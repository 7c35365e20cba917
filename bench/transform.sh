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
	echo "# command: COUNT=$COUNT BENCHTIME=$BENCHTIME bench/transform.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# ratio = arrow / plain throughput, best of $COUNT runs each; rows/cpu-s = rows per second of process CPU time"
	echo
	go run ./bench/ratios <"$raw"
	cat <<'NOTES'

# Notes on the cases that do not reach 1.0, and why:
# - truncate(t,max=5) truncates most title rows. The plain loop re-slices each row (row[:5] shares the
#   strings); an Arrow list's elements must be contiguous, so the kernel copies the kept bytes and
#   offsets, several times the memory traffic. With the default max=100, which no row of this data
#   reaches, the kernel returns its input: truncate(t,max=100).
# - fill_missing(ad_category) (2% nulls): the plain loop copies 16-byte string headers; Arrow has to
#   move every byte (about 18 a row here) to make room for the default: about 0.8 in most runs, 1.05
#   at best. Without nulls the kernel returns its input; on numbers it is ahead (fill_missing(bid_price)).
# - log1p: both sides spend about 95% of their time in math.Log1p, whose exact bits the kernel must
#   reproduce: parity (1.00 to 1.09 across runs).
NOTES
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
