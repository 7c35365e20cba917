#!/usr/bin/env bash
# Benchmarks the CPU parameter servers (package trainer/embedding/ps) and writes
# bench/ps.txt:
#
#   BenchmarkCoalescing  caught-up training steps against 4 parameter servers
#                        over loopback gRPC, 100 tables (widths 8-64, eight
#                        stacks), 8 TPU cores of 32 examples: the uncoalesced
#                        baseline (one Lookup and one Apply per core, table
#                        and server: 2·8·100·4 = 6400 RPCs per step), fetch
#                        and update coalescing (one pair per server: 8), and
#                        coalescing with table stacking. The clients take
#                        turns step by step in the same run, each on its own
#                        servers. Wall ms per step (Lookup + Apply) and RPCs
#                        per step; speedup = uncoalesced / coalesced step
#                        time. Target: >= 3x.
#
# Servers and clients share the benchmark process (GOMAXPROCS = all cores).
# The summary is the median of COUNT runs; the raw output follows it.
#
#   bench/ps.sh                       # about 2 minutes
#   COUNT=3 BENCHTIME=10x bench/ps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-20x}
out=bench/ps.txt
source bench/lib.sh
bench_go_test ./trainer/embedding/ps -run '^$' -bench '^BenchmarkCoalescing$' -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m

{
	echo "# bench/ps.sh: parameter servers, 100 tables, 8 TPU cores, 4 servers, loopback gRPC"
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs; median of $COUNT runs of $BENCHTIME"
	echo
	printf '%-20s %12s %12s\n' mode ms/step rpcs/step
	for m in uncoalesced coalesced coalesced_stacked; do
		printf '%-20s %12s %12s\n' "$m" "$(median BenchmarkCoalescing "${m}_ms/step")" "$(median BenchmarkCoalescing "${m}_rpcs/step")"
	done
	echo
	echo "speedup (uncoalesced / coalesced step time):         $(median BenchmarkCoalescing speedup)x   target >= 3x"
	echo "speedup (uncoalesced / coalesced+stacked step time): $(median BenchmarkCoalescing speedup_stacked)x"
	echo
	echo "# raw"
	cat "$raw"
} >"$out"
cat "$out"
