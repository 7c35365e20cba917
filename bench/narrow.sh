#!/usr/bin/env bash
# Benchmarks narrow stored types (issue 28: a memo value of int64 or
# list<int64> stored in the narrowest integer type that holds it, widened
# on read; warehouse/block, "Narrow stored types") and writes
# bench/narrow.txt:
#
#   BenchmarkNarrow (workers/memo)  every component of the example fleet
#       (examples/fleet, shared components once) over the same raw Ads
#       blocks (warehouse/gen, 10,000 rows), memo objects stored wide (as
#       before, memo.Runner.Wide) and narrow (the default), alternating in
#       every iteration of the same run: memo bytes per example
#       (uncompressed as stored by default, and the same records with LZ4
#       frame and ZSTD), value-segment bytes per example by declared type,
#       reader CPU per example (every model's SIG unit of a block served
#       by reader.Server, widening included) with the bytes it fetched, and
#       worker CPU per block (memo.Runner, every component).
#   BenchmarkDecodeNarrow (warehouse/block)  the widening alone: decoding
#       a 10,000-row value segment stored wide (aliased) and narrow
#       (widened), nanoseconds per value.
#
# CPU is getrusage of the benchmark process; MinIO runs in its own. The
# summary is the median of COUNT runs; the raw output follows it.
#
#   bench/narrow.sh                       # about three minutes
#   COUNT=3 BENCHTIME=8x bench/narrow.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-24x}
out=bench/narrow.txt
source bench/lib.sh
bench_go_test ./warehouse/block -run '^$' -bench '^BenchmarkDecodeNarrow$' -cpu 1 -count "$COUNT"
decode=$(mktemp)
trap 'rm -f "$raw" "$decode"' EXIT
cp "$raw" "$decode"
decodecmd=("${cmd[@]}")
bench_go_test ./workers/memo -run '^$' -bench '^BenchmarkNarrow$' -cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m

t=BenchmarkNarrow
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.3f", a / b }'; }
{
	echo "# narrow stored types: memo values stored wide (declared int64) vs narrow (narrowest integer type), same run"
	echo "# command: bench/narrow.sh  (${cmd[*]}; ${decodecmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	int() { awk -v v="$1" 'BEGIN { if (v == "n/a") print v; else printf "%d", v }'; }
	echo "# medians of $COUNT runs; the example fleet's $(int "$(median $t components)") components ($(int "$(median $t narrowed-components)") stored narrow), 10,000-row Ads blocks; GC at reader.DefaultGCPercent"
	echo
	echo "memo object bytes per example (the fleet's memo objects of a block over its rows):"
	printf "%-7s %12s %12s %12s\n" "" "none" "lz4" "zstd"
	for a in wide narrow; do
		printf "%-7s %12s %12s %12s\n" "$a" "$(median $t $a-memo-B/ex)" "$(median $t $a-lz4-memo-B/ex)" "$(median $t $a-zstd-memo-B/ex)"
	done
	printf "%-7s %12s %12s %12s\n" "n/w" \
		"$(ratio "$(median $t narrow-memo-B/ex)" "$(median $t wide-memo-B/ex)")" \
		"$(ratio "$(median $t narrow-lz4-memo-B/ex)" "$(median $t wide-lz4-memo-B/ex)")" \
		"$(ratio "$(median $t narrow-zstd-memo-B/ex)" "$(median $t wide-zstd-memo-B/ex)")"
	echo
	echo "the same columns packed as a worker's batch writes a block's (block.WritePacks: one event_id and one footer a pack;"
	echo "$(median $t narrow-packs/block) pack a block), bytes per example, and over the object-per-component wide layout above (before issue 28):"
	printf "%-14s %12s %12s %12s\n" "" "none" "lz4" "zstd"
	for a in wide narrow; do
		printf "%-14s %12s %12s %12s\n" "$a packed" "$(median $t $a-packed-memo-B/ex)" "$(median $t $a-packed-lz4-memo-B/ex)" "$(median $t $a-packed-zstd-memo-B/ex)"
	done
	printf "%-14s %12s %12s %12s\n" "narrow packed/" \
		"$(ratio "$(median $t narrow-packed-memo-B/ex)" "$(median $t wide-memo-B/ex)")" \
		"$(ratio "$(median $t narrow-packed-lz4-memo-B/ex)" "$(median $t wide-lz4-memo-B/ex)")" \
		"$(ratio "$(median $t narrow-packed-zstd-memo-B/ex)" "$(median $t wide-zstd-memo-B/ex)")"
	echo "(the object-per-component rows above: Runner.Run's one-member packs, the layout of an object per component)"
	echo
	echo "value segment bytes per example by declared type (uncompressed; event_id segments not included):"
	printf "%-7s %12s %12s %12s\n" "" "int64" "list<int64>" "other"
	for a in wide narrow; do
		printf "%-7s %12s %12s %12s\n" "$a" "$(median $t $a-value-int64-B/ex)" "$(median $t "$a-value-list<int64>-B/ex")" "$(median $t $a-value-other-B/ex)"
	done
	echo
	echo "reader (every model's SIG unit of a block) and worker (every component of a block), uncompressed objects:"
	printf "%-7s %14s %12s %16s\n" "" "reader ns/ex" "reader B/ex" "worker ms/block"
	for a in wide narrow; do
		printf "%-7s %14s %12s %16s\n" "$a" "$(median $t $a-reader-cpu-ns/ex)" "$(median $t $a-reader-B/ex)" "$(median $t $a-worker-cpu-ms/block)"
	done
	echo
	echo "medians of each run's ratio narrow/wide (same run, same blocks):"
	echo "reader CPU per example $(median $t narrow/wide-reader-cpu)  worker CPU per block $(median $t narrow/wide-worker-cpu)"
	echo
	echo "the widening alone (BenchmarkDecodeNarrow: decoding a 10,000-row value segment), ns per value:"
	for v in "list<int64>" "list<int64>-as-list<int32>" "int64" "int64-as-int8"; do
		printf "%-28s %8s\n" "$v" "$(raw=$decode median "BenchmarkDecodeNarrow/$v" ns/value)"
	done
	echo
	echo "# raw go test output"
	cat "$raw" "$decode"
} >"$out"
echo "wrote $out" >&2
