#!/usr/bin/env bash
# Benchmarks the insertion policies (issue 20, matching/insertion) on a
# fleet of the fleet generator (fleet/gen) and writes bench/insertion.txt:
#
#   BenchmarkInsertion  the same fleet (SIG_BENCH_PIPELINES pipelines over 3
#                       epochs, arrivals and re-submissions) on a fresh sigd
#                       per policy, same warehouse (SIG_BENCH_BLOCKS blocks
#                       of SIG_BENCH_ROWS rows), side by side in one run:
#                       --insertion=all (the paper's: every model input's
#                       component memoized whole) against --insertion=cost
#                       at its default constants and at other prices of
#                       storage (S, ns/byte) and reader CPU (W).
#
# Per policy: memo bytes stored (ready objects at the end), worker CPU (the
# sigd process while its one in-process worker memoizes, every epoch;
# getrusage), reader CPU per example (an in-process reader serving every
# active pipeline's units, second pass), the block hit rate of the
# submissions, the share of model inputs readers compute. Every policy's
# units are byte-identical (checked). Targets (issue 20), against all:
# storage >= 2x less, worker CPU >= 1.5x less, reader CPU per example
# <= 1.2x.
#
#   bench/insertion.sh               # about a minute
#   SIG_BENCH_PIPELINES=48 bench/insertion.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-1}
out=bench/insertion.txt
source bench/lib.sh
export SIG_MINIO_BIN=${SIG_MINIO_BIN:-$PWD/bin/minio}
bench_go_test ./sigd -run '^$' -bench '^BenchmarkInsertion$' -benchtime 1x -count "$COUNT" -timeout 30m

t=BenchmarkInsertion
met() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { if (v == "n/a") print "n/a"; else if ((op == ">=" && v >= t) || (op == "<=" && v <= t)) print "met"; else print "NOT met" }'; }
{
	echo "# insertion policies on a generated fleet: memoize every component whole (the paper) vs cost-aware covers"
	echo "# command: bench/insertion.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# fleet: fleet/gen seed 20, ${SIG_BENCH_PIPELINES:-24} pipelines, 3 epochs; ${SIG_BENCH_BLOCKS:-3} blocks of ${SIG_BENCH_ROWS:-20000} rows; medians of $COUNT run(s)"
	echo
	printf "%-12s %10s %14s %16s %9s %16s\n" policy memo-MB worker-cpu-s reader-ns/ex hit-rate computed-inputs
	for p in all cost cost-S8-W2 cost-S8-W1; do
		printf "%-12s %10s %14s %16s %9s %16s\n" "$p" "$(median $t $p-memo-MB)" "$(median $t $p-worker-cpu-s)" \
			"$(median $t $p-reader-cpu-ns/ex)" "$(median $t $p-hit-rate)" "$(median $t $p-computed-inputs)"
	done
	echo
	printf "%-12s %22s %22s %26s\n" "against all" "storage (>= 2x less)" "worker CPU (>= 1.5x)" "reader CPU/ex (<= 1.2x)"
	for p in cost cost-S8-W2 cost-S8-W1; do
		s=$(median $t $p-storage-x); w=$(median $t $p-worker-cpu-x); r=$(median $t $p-reader-cpu-ratio)
		printf "%-12s %13s %-8s %13s %-8s %17s %-8s\n" "$p" "${s}x" "$(met "$s" ">=" 2)" "${w}x" "$(met "$w" ">=" 1.5)" "${r}x" "$(met "$r" "<=" 1.2)"
	done
	echo
	echo "# cost: the defaults (StorageNsPerByte 2, ReaderWeight 4, CheapFactor 1.25; matching/insertion Config);"
	echo "# cost-S8-W2, cost-S8-W1: storage priced at 8 ns/byte and reader CPU weighted 2 and 1."
	echo "# hit rate: block hits over block requests of the submissions (memo entries only: inputs readers"
	echo "# compute from raw columns request none)."
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
