#!/usr/bin/env bash
# Benchmarks incremental invalidation (issue 21, matching/versions.go) and
# writes bench/invalidation.txt: the memo tasks one change to a sealed raw
# block schedules (Frontend.BlockChanged: the components reading a column
# the change made new, memoized over the block), against recomputing every
# component memoized over the block (what memo entries keyed by block
# version, or a whole-block recompute, would do), per kind of change:
#
#   label        click and conversion updated (a conversion arriving late)
#   feature:C    one feature column C updated; one-feature is their mean
#   late-row     rows appended to the block's window: the row set changes,
#                so every column does (memo objects stay row-aligned)
#   delete       rows removed (events flagged as spam): likewise
#
# over the fleet generator's pipelines (fleet/gen seed 21,
# SIG_BENCH_PIPELINES pipelines, default 120, whole components memoized)
# registered over one block per slot, every entry ready before each change,
# each change undone before the next. Counts are measured (the tasks
# BlockChanged scheduled on a real Pebble cache); the time per change too.
#
#   bench/invalidation.sh                # a few seconds
#   SIG_BENCH_PIPELINES=300 bench/invalidation.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-1}
out=bench/invalidation.txt
source bench/lib.sh
bench_go_test ./matching -run '^$' -bench '^BenchmarkInvalidation$' -benchtime 1x -count "$COUNT" -timeout 30m

t=BenchmarkInvalidation
{
	echo "# incremental invalidation: memo tasks per changed block, against recomputing every component memoized over it"
	echo "# command: bench/invalidation.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# fleet: fleet/gen seed 21, ${SIG_BENCH_PIPELINES:-120} pipelines, 3 epochs; $(median $t components) components over $(median $t blocks) blocks read; medians of $COUNT run(s)"
	echo "# all figures measured"
	echo
	printf "%-24s %14s %14s %10s %14s\n" change tasks/block all/block fraction ms/change
	for c in label one-feature $(awk '{ for (i = 3; i < NF; i += 2) if ($(i+1) ~ /^tasks\/block:feature:/) { sub("tasks/block:", "", $(i+1)); print $(i+1) } }' "$raw" | sort -u) late-row delete; do
		tk=$(median $t "tasks/block:$c"); all=$(median $t "all/block:$c"); ns=$(median $t "ns/change:$c")
		frac=$(awk -v a="$tk" -v b="$all" 'BEGIN { if (b == "n/a" || b == 0) print "n/a"; else printf "%.3f", a / b }')
		ms=$(awk -v n="$ns" 'BEGIN { if (n == "n/a") print "n/a"; else printf "%.2f", n / 1e6 }')
		printf "%-24s %14s %14s %10s %14s\n" "$c" "$tk" "$all" "$frac" "$ms"
	done
	echo
	echo "# tasks/block: memo tasks BlockChanged scheduled per changed block (measured); all/block: components"
	echo "# memoized over the block, what recomputing the block's components costs (measured); fraction: their"
	echo "# ratio; one-feature is the mean over the feature columns. ms/change: BlockChanged's time per change (one synced Pebble write per task; measured)."
	echo "# Late rows and deletions change the row set, so they recompute everything: the floor of a row-aligned"
	echo "# memo, not a shortcoming of the index."
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
