#!/usr/bin/env bash
# Block-batched memoization tasks against one task per component (issue 28,
# "Worker CPU per (component, block), block-batched against one task per
# component, on the fleet generator's graphs: >= 1.5x less"). Writes
# bench/batch.txt:
#
#   BenchmarkBatch (workers/memo)  every component the fleet generator's
#       pipelines use (fleet/gen seed 1, 300 pipelines: 143 canonical
#       components) over BATCH_BLOCKS raw blocks of BATCH_ROWS generated Ads
#       events (defaults 2 and 10,000, the fleet run's blocks) in MinIO, in
#       every iteration, alternating: memo.Runner.Run of each (component,
#       block) alone (raw columns through sigd's default segment cache, one
#       pack each), and memo.Runner.RunBatch over each block's tasks in
#       batches of sigd's default --worker-batch-tasks (32: the batch's raw
#       columns read once, the union of its graphs canonicalized and run
#       once, one pack).
#
# CPU is getrusage of the benchmark process (MinIO runs in its own), per
# (component, block). The figures are the medians of COUNT runs; the ratio
# is also the median of each run's own ratio (the two arms alternate within
# a run, so a run's ratio is free of the machine's drift between runs). The
# stages' wall times (Runner.Observe; -cpu 1) and the kernel runs per task
# say what bounds the ratio.
#
#   bench/batch.sh                         # about three minutes on 2 cores
#   COUNT=3 BENCHTIME=2x bench/batch.sh
#   BATCH_ROWS=2000 bench/batch.sh          # smaller blocks (writes the same file)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-4x}
TARGET=1.5
out=bench/batch.txt
source bench/lib.sh
export BATCH_ROWS=${BATCH_ROWS:-10000} BATCH_BLOCKS=${BATCH_BLOCKS:-2}
bench_go_test ./workers/memo -run '^$' -bench '^BenchmarkBatch$' -cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 60m

t=BenchmarkBatch
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
us() { awk -v a="$1" 'BEGIN { if (a == "n/a") print "n/a"; else printf "%.1f", a / 1000 }'; }
per=$(median $t pertask-cpu-ns/task)
bat=$(median $t batched-cpu-ns/task)
run_ratio=$(awk -v r="$(median $t pertask/batched-cpu)" 'BEGIN { if (r == "n/a") print r; else printf "%.2f", r }')
verdict=$(awk -v r="$run_ratio" -v t="$TARGET" 'BEGIN { if (r == "n/a") print "n/a"; else if (r >= t) print "meets"; else print "does NOT meet" }')
{
	echo "# worker CPU per (component, block): block-batched tasks (memo.Runner.RunBatch) vs one task per component (memo.Runner.Run), same run"
	echo "# command: bench/batch.sh  (${cmd[*]}; BATCH_ROWS=$BATCH_ROWS BATCH_BLOCKS=$BATCH_BLOCKS)"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs of $BENCHTIME; $(median $t tasks/block | cut -d. -f1) tasks a block (the fleet generator's components, seed 1), $BATCH_BLOCKS blocks of $BATCH_ROWS rows; batches of 32"
	echo
	printf "%-9s %14s %12s %14s %14s %14s\n" "" "CPU us/task" "ops/task" "read us/task" "xform us/task" "write us/task"
	for a in pertask batched; do
		printf "%-9s %14s %12s %14s %14s %14s\n" "$a" "$(us "$(median $t $a-cpu-ns/task)")" "$(median $t $a-ops/task)" \
			"$(us "$(median $t $a-read-ns/task)")" "$(us "$(median $t $a-transform-ns/task)")" "$(us "$(median $t $a-write-ns/task)")"
	done
	echo
	echo "worker CPU per (component, block), per task / batched: $(ratio "$per" "$bat")x (ratio of the medians);" \
		"${run_ratio}x (median of each run's ratio)"
	echo "target (issue 28): >= ${TARGET}x less: $verdict"
	echo
	echo "what the batch saves, per task (stage wall times, -cpu 1; the store's latency is in read and write, MinIO's CPU in neither arm's figure):"
	for ph in read transform write; do
		p=$(median $t pertask-$ph-ns/task)
		b=$(median $t batched-$ph-ns/task)
		printf "  %-9s %9s us -> %9s us  (%sx)\n" "$ph" "$(us "$p")" "$(us "$b")" "$(ratio "$p" "$b")"
	done
	echo "  kernel runs (op nodes) per task: $(median $t pertask-ops/task) -> $(median $t batched-ops/task)" \
		"($(ratio "$(median $t pertask-ops/task)" "$(median $t batched-ops/task)")x): the batch's merged graph runs a shared subexpression once"
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
cat "$out" | sed -n '1,/^# raw/p' | head -n -1
