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
#   BenchmarkCaughtUpStream (package e2e)  the real system under a steady
#                         stream: sigd dev ingesting 200 events/s at the head
#                         plus a late share of late events, query updates and
#                         click updates for the two windows before it; two
#                         caught-up jobs of ctr_small, one reading SIG where
#                         ready (--caught-up-inputs sig), one all LIG, each
#                         with its own reader process; reader CPU from /proc,
#                         rows and input modes from the readers' /metrics,
#                         over 60 s. Run at late shares 0.05 and 0.2 with the
#                         readers' default guard (16 rows), and at 0.05 with
#                         the guard off, on sigd dev's 1,000-row blocks sealed
#                         1 s after their first row (a block a second); and at
#                         0.05 with blocks cut when their window closes
#                         (CAUGHTUP_BLOCKS=window: about 4,000 rows).
#
#   bench/caughtup.sh                # about 6 minutes
#   COUNT=3 BENCHTIME=5x STREAM=0 bench/caughtup.sh   # the fixed units only
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-5x}
out=bench/caughtup.txt
source bench/lib.sh
bench_go_test ./reader -run '^$' -bench '^BenchmarkCaughtUpMix$' -cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m
mix=$(mktemp)
cp "$raw" "$mix"
stream=$(mktemp)
trap 'rm -f "$raw" "$mix" "$stream"' EXIT
if [ "${STREAM:-1}" != 0 ]; then
	for cfg in "0.05 16 second" "0.2 16 second" "0.05 0 second" "0.05 16 window"; do
		set -- $cfg
		echo "running: BenchmarkCaughtUpStream late=$1 guard=$2 blocks=$3" >&2
		echo "blocks: $3" >>"$stream"
		CAUGHTUP_LATE=$1 CAUGHTUP_GUARD_ROWS=$2 CAUGHTUP_BLOCKS=$3 go test ./e2e -run '^$' -bench '^BenchmarkCaughtUpStream$' -benchtime 1x -count 1 -timeout 20m \
			| tee -a "$stream" >&2
	done
fi
cp "$mix" "$raw"

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
	echo "## The real system under a steady stream (BenchmarkCaughtUpStream, one run each)"
	echo "# stream: 200 events/s at the head (4,000-event hourly windows: one closes every 20 s); per second,"
	echo "# late share x 200 late events, as many query updates and as many click updates, for the two"
	echo "# windows before the head (chosen constants); 60 s measured after both jobs committed an epoch"
	echo "# blocks: second = sigd dev's 1,000-row blocks sealed 1 s after their first row; window = cut when"
	echo "# the window closes (CAUGHTUP_BLOCKS=window); rows/unit measured"
	echo "# what bounds saved (measured, the readers' sig_reader_transform_seconds_total and an idle reader's CPU):"
	echo "# lig xform = the CPU of the LIG reader's transform programs per example (the serving thread's clock around each):"
	echo "# reading memo columns instead saves at most that, so bound = lig xform / LIG ns/ex is the most SIG could save"
	echo "# with every memo read free; guard = the SIG reader's guard (recomputing and comparing) per example, CPU;"
	echo "# idle = an idle reader's CPU per LIG example (/proc, 10 ms ticks: 0 is less than one tick in the 60 s)"
	printf "%-8s %-6s %-7s %10s %12s %12s %10s %8s %10s %8s %8s %8s\n" "late" "guard" "blocks" "rows/unit" "SIG ns/ex" "LIG ns/ex" "pending p" "saved" "lig xform" "bound" "guard" "idle"
	awk '/^blocks:/ { blocks = $2 }
	/^BenchmarkCaughtUpStream/ {
		for (i = 3; i < NF; i += 2) m[$(i+1)] = $i
		printf "%-8s %-6s %-7s %10.0f %12s %12s %10.3f %8.3f %10.0f %8.3f %8.0f %8.0f\n", m["late-share"], m["guard-rows"], blocks, m["rows/unit"], m["sig-cpu-ns/ex"], m["lig-cpu-ns/ex"], m["pending-share"], m["saved"], m["lig-transform-ns/ex"], m["saved-bound"], m["sig-guard-ns/ex"], m["idle-cpu-ns/ex"]
	}' "$stream"
	echo
	echo "## raw"
	cat "$raw" "$stream"
} >"$out"
echo "wrote $out" >&2
