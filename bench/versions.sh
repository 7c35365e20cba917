#!/usr/bin/env bash
# Benchmarks sigd's first version pass after a restart (issue 26) and writes
# bench/versions.txt: sigd (sigd.New, every store opened anew) over a
# catalog of 50,000 raw blocks (SIG_BENCH_BLOCKS), one in 20 at version 2,
# then one pass of its versions.Manager (sigd/versions_bench_test.go,
# BenchmarkFirstVersionPass), in one run:
#
#   rescan     what every first pass did before the catalog had a change
#              feed: list every block of every source (Catalog.Blocks) and
#              pick the versioned ones (1.3 s at 50,000 blocks, timed once by
#              hand before this benchmark existed)
#   feed       the first pass from the position sigd stored, nothing new
#   behind100  the same with 100 versions committed while sigd was down
#   from0      no stored position (the first start on a catalog written
#              before the feed): every block through the feed
#
# Wall time and the process's CPU time (getrusage) of the pass; the machine
# is shared, so the ratios of one run are the figures to read.
#
#   bench/versions.sh                 # about 5 minutes at COUNT=3
#   COUNT=1 SIG_BENCH_BLOCKS=5000 bench/versions.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-3x}
out=bench/versions.txt
source bench/lib.sh
bench_go_test ./sigd -run '^$' -bench '^BenchmarkFirstVersionPass$' -benchtime "$BENCHTIME" -count "$COUNT" -timeout 60m

t=BenchmarkFirstVersionPass
{
	echo "# sigd's first version pass after a restart: the change feed from the stored position vs the full rescan it replaces"
	echo "# command: bench/versions.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# catalog: $(median $t/rescan blocks) blocks of $(median $t/rescan bytes/block) bytes of metadata each (a real footer), one in 20 at version 2;"
	echo "# no pipeline registered; medians of $COUNT run(s), -benchtime $BENCHTIME (a restart per iteration); all figures measured"
	echo
	printf "%-12s %14s %14s %12s %16s %16s\n" pass wall-ms cpu-ms versions "wall/rescan" "cpu/rescan"
	rw=$(median $t/rescan ns/op); rc=$(median $t/rescan cpu-ns/op)
	for p in rescan feed behind100 from0; do
		ns=$(median $t/$p ns/op); cpu=$(median $t/$p cpu-ns/op); v=$(median $t/$p versions/op)
		awk -v p="$p" -v ns="$ns" -v cpu="$cpu" -v v="$v" -v rw="$rw" -v rc="$rc" 'BEGIN {
			f = (ns == "n/a" || rw == "n/a") ? "n/a" : sprintf("%.2g", ns / rw)
			g = (cpu == "n/a" || rc == "n/a") ? "n/a" : sprintf("%.2g", cpu / rc)
			printf "%-12s %14.3f %14.3f %12s %16s %16s\n", p, ns / 1e6, cpu / 1e6, v, f, g
		}'
	done
	echo
	echo "# rescan: Catalog.Sources and Catalog.Blocks of every source after the restart, the versioned blocks picked"
	echo "# (the old pass then called BlockChanged for every one of them, at every start; not counted here);"
	echo "# feed: versions.Manager.Follow from the stored position (a read of the position and of the catalog's"
	echo "# sequence number); behind100: the same, 100 versions committed while down (ChangedSince, BlockChanged for"
	echo "# each, the new position stored with one synced write); from0: Follow without a stored position."
	echo "# The old pass's 1.3 s at 50,000 blocks was timed once by hand (commit 1b1bf9c); rescan is that pass in this run."
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
