#!/usr/bin/env bash
# Requests and CPU per unit read, before and after the planned read path of
# issue 28 (item 3), in one run; writes bench/requests.txt:
#
#   BenchmarkUnitCost   per block size (700 rows: sigd dev's default seal,
#                       --seal-after 1s; 10,000: the fleet's blocks;
#                       100,000: the other reader benchmarks'), SIG units of
#                       ctr_small (its 3 inputs from their memo objects,
#                       one component each; the guard at its default): the
#                       object store requests per unit the first time a
#                       reader sees the block and again, the reader's CPU
#                       per example serving them SIG and LIG without gRPC
#                       (Serve), and MinIO's CPU per SIG unit.
#   BenchmarkRangeCost  a ranged GET's cost against its length, the
#                       reader's and MinIO's CPU (after only): where the
#                       hole limit and the tail read come from
#                       (warehouse/block, fetch.go).
#
# BEFORE is the commit the read path started from. The benchmark file uses
# only what the package had then, so it is built into a test binary at
# BEFORE (an export of the commit, not a worktree) and at the working
# tree, and the two binaries run alternately COUNT times: both see the same
# machine in the same hour. Servers and MinIO are the benchmark process's
# and its child's; CPU is getrusage of the process and /proc of MinIO.
# Medians of the runs; the raw output follows the tables.
#
#   bench/requests.sh                      # about 8 minutes
#   COUNT=3 BENCHTIME=5x BEFORE=7d730bd bench/requests.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-5x}
BEFORE=${BEFORE:-7d730bd}
out=bench/requests.txt
source bench/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$raw" "$tmp"' EXIT
export SIG_MINIO_BIN=${SIG_MINIO_BIN:-$PWD/bin/minio}

echo "building the benchmark at $BEFORE and at the working tree" >&2
mkdir "$tmp/before"
git archive "$BEFORE" | tar -x -C "$tmp/before"
cp reader/unitcost_bench_test.go "$tmp/before/reader/"
(cd "$tmp/before" && go test -c -o "$tmp/before.test" ./reader)
go test -c -o "$tmp/after.test" ./reader

# run WHICH ARGS...: the WHICH test binary in its package directory, its
# benchmark lines renamed WHICH/Benchmark...
run() {
	local which=$1 dir=reader
	shift
	[ "$which" = before ] && dir=$tmp/before/reader
	echo "running: $which.test $*" >&2
	(cd "$dir" && "$tmp/$which.test" -test.run '^$' -test.cpu 1 "$@") | tee /dev/stderr | sed -n "s|^Benchmark|$which/Benchmark|p" >>"$raw"
}
for i in $(seq "$COUNT"); do
	# Alternate which goes first.
	if [ $((i % 2)) = 1 ]; then order="before after"; else order="after before"; fi
	for which in $order; do
		run "$which" -test.bench '^BenchmarkUnitCost$' -test.benchtime "$BENCHTIME" -test.timeout 30m
	done
done
run after -test.bench '^BenchmarkRangeCost$' -test.benchtime "$BENCHTIME" -test.count "$COUNT" -test.timeout 30m

{
	echo "# requests and CPU per unit read, before and after the planned read path (issue 28, item 3)"
	echo "# command: bench/requests.sh  (COUNT=$COUNT BENCHTIME=$BENCHTIME: BenchmarkUnitCost at $BEFORE and at the working tree, alternately, then BenchmarkRangeCost)"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  before $(git rev-parse --short "$BEFORE")  after $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- reader warehouse || echo ' (working tree differs)')"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs; SIG units of ctr_small: 3 inputs, each from its memo object (one component per object),"
	echo "# the guard at its default (16 rows per input); CPU per example of Serve (no gRPC), SIG and LIG alternating"
	echo
	echo "## Object store requests per unit"
	printf "%-10s %22s %22s\n" "" "first read of a block" "read again"
	printf "%-10s %10s %11s %10s %11s\n" rows before after before after
	for s in rows700 rows10k rows100k; do
		printf "%-10s %10s %11s %10s %11s\n" "$s" \
			"$(median before/BenchmarkUnitCost/$s cold-req/unit)" "$(median after/BenchmarkUnitCost/$s cold-req/unit)" \
			"$(median before/BenchmarkUnitCost/$s req/unit)" "$(median after/BenchmarkUnitCost/$s req/unit)"
	done
	echo "before: the raw footer, each span of raw segments (64 KiB holes) and one request per memo object;"
	echo "after: one planned read per object (a footer cache, a 1.5 MiB tail read, 1.5 MiB holes). With the memo"
	echo "columns of a unit packed in one object (issue 28, item 1) the three memo requests are one."
	echo
	echo "## Reader CPU per example (ns) and MinIO CPU per SIG unit (us)"
	printf "%-10s %9s %9s %9s %9s %9s %9s %10s %10s\n" rows "SIG bef" "SIG aft" "LIG bef" "LIG aft" "LIG/SIG b" "LIG/SIG a" "MinIO bef" "MinIO aft"
	for s in rows700 rows10k rows100k; do
		b=before/BenchmarkUnitCost/$s a=after/BenchmarkUnitCost/$s
		printf "%-10s %9s %9s %9s %9s %9s %9s %10s %10s\n" "$s" \
			"$(median $b sig-cpu-ns/ex)" "$(median $a sig-cpu-ns/ex)" "$(median $b lig-cpu-ns/ex)" "$(median $a lig-cpu-ns/ex)" \
			"$(median $b lig/sig)" "$(median $a lig/sig)" "$(median $b minio-cpu-us/unit)" "$(median $a minio-cpu-us/unit)"
	done
	echo "SIG per example at 700 rows over 100,000 rows: before $(awk -v s="$(median before/BenchmarkUnitCost/rows700 sig-cpu-ns/ex)" -v l="$(median before/BenchmarkUnitCost/rows100k sig-cpu-ns/ex)" 'BEGIN { printf "%.1fx", s / l }'), after $(awk -v s="$(median after/BenchmarkUnitCost/rows700 sig-cpu-ns/ex)" -v l="$(median after/BenchmarkUnitCost/rows100k sig-cpu-ns/ex)" 'BEGIN { printf "%.1fx", s / l }')"
	echo "(LIG gains too: its plan, the LOCAL inputs' program, is now built once per input set, not per unit)"
	echo
	echo "## What a ranged GET costs (BenchmarkRangeCost, after): CPU per request of one length, sequential"
	t=after/BenchmarkRangeCost
	printf "%-10s %14s %14s\n" length "reader us" "MinIO us"
	for k in 1 64 256 1024 4096; do
		printf "%-10s %14s %14s\n" "${k} KiB" "$(median $t client-us/${k}KiB)" "$(median $t minio-us/${k}KiB)"
	done
	printf "fit: %s us + %s us/MiB (reader), %s us + %s us/MiB (MinIO)\n" "$(median $t client-us/req)" "$(median $t client-us/MiB)" \
		"$(median $t minio-us/req)" "$(median $t minio-us/MiB)"
	echo "a request costs what $(median $t hole-KiB) KiB of its bytes do (reader and MinIO), $(median $t client-hole-KiB) KiB (reader alone):"
	echo "block.HoleLimit and block.TailRead are 1536 KiB, block.RangeLimit 16 MiB"
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
