#!/usr/bin/env bash
# Benchmarks caught-up readers with SIG against pure LIG (issue 21, item 4)
# and writes bench/caughtup.txt:
#
#   BenchmarkCaughtUpMix  reader CPU per example serving the same caught-up
#                         units of ctr_small (8 blocks of 25k rows) with a
#                         share p of their (input, block) pairs pending in
#                         SIG, so computed locally, and the rest read from
#                         memo objects; p = 1 is pure LIG, the paper's
#                         caught-up phase. Same run, alternating.
#
# p is swept because what a stream of late events and updates leaves
# pending at the head depends on the stream and on the workers' latency;
# a run's p is the readers' sig_reader_inputs_total{mode="local"}
# over all input columns.
#
#   bench/caughtup.sh                # about 1 minute
#   COUNT=3 BENCHTIME=5x bench/caughtup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-5x}
out=bench/caughtup.txt
source bench/lib.sh
bench_go_test ./reader -run '^$' -bench '^BenchmarkCaughtUpMix$' -cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m

{
	echo "# caught-up readers: SIG where ready, LIG where pending, against pure LIG"
	echo "# command: bench/caughtup.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs; CPU is getrusage of the reader's process (measured)"
	echo
	echo "## ctr_small: reader CPU per example by pending share p (p = 1: pure LIG)"
	printf "%-8s %14s %22s\n" p "CPU ns/ex" "saved vs pure LIG"
	for p in 0 0.1 0.25 0.5 1; do
		t=BenchmarkCaughtUpMix/ctr_small
		printf "%-8s %14s %22s\n" "$p" "$(median $t cpu-ns/ex@$p)" "$(median $t saved@$p)"
	done
	echo
	echo "## raw"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
