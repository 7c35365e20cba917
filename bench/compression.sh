#!/usr/bin/env bash
# Benchmarks Arrow IPC buffer compression of block segments (raw blocks and
# memo objects; block.Compression) and writes bench/compression.txt:
#
#   BenchmarkCompression (workers/memo)  the same raw blocks (100k Ads events
#       each) and the ctr_small pipeline's memo objects over them, stored
#       uncompressed, with LZ4 frame and with ZSTD, alternating in every
#       iteration of the same run: stored bytes per block, worker CPU per
#       block (memo.Runner: every component of a block, read + decompress +
#       run + compress + PUT), ingestion's encoding CPU per raw block, and
#       reader CPU per example (a SIG unit served by reader.Server) with the
#       bytes it fetched per example.
#
# CPU is getrusage of the benchmark process; MinIO runs in its own. The
# summary is the median of COUNT runs; the raw output follows it.
#
#   bench/compression.sh                  # about three minutes
#   COUNT=3 BENCHTIME=2x bench/compression.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-4x}
out=bench/compression.txt
source bench/lib.sh
bench_go_test ./workers/memo -run '^$' -bench '^BenchmarkCompression$' -cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m

t=BenchmarkCompression
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.3f", a / b }'; }
{
	echo "# segment compression: uncompressed vs LZ4 frame vs ZSTD (Arrow IPC buffer compression), same run"
	echo "# command: bench/compression.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs; 100k-row Ads blocks; ctr_small's 3 components; GC at reader.DefaultGCPercent"
	echo
	printf "%-6s %12s %12s %14s %14s %14s %10s\n" "" "raw B/block" "memo B/block" "worker ms/blk" "ingest ms/blk" "reader ns/ex" "reader B/ex"
	for c in none lz4 zstd; do
		printf "%-6s %12s %12s %14s %14s %14s %10s\n" "$c" "$(median $t $c-raw-B/block)" "$(median $t $c-memo-B/block)" \
			"$(median $t $c-worker-cpu-ms/block)" "$(median $t $c-ingest-encode-cpu-ms/block)" \
			"$(median $t $c-reader-cpu-ns/ex)" "$(median $t $c-reader-B/ex)"
	done
	echo
	echo "relative to uncompressed (x):"
	for c in lz4 zstd; do
		printf "%-6s stored raw %s  memo %s  worker CPU %s  ingest CPU %s  reader CPU %s  reader bytes %s\n" "$c" \
			"$(ratio "$(median $t $c-raw-B/block)" "$(median $t none-raw-B/block)")" \
			"$(ratio "$(median $t $c-memo-B/block)" "$(median $t none-memo-B/block)")" \
			"$(ratio "$(median $t $c-worker-cpu-ms/block)" "$(median $t none-worker-cpu-ms/block)")" \
			"$(ratio "$(median $t $c-ingest-encode-cpu-ms/block)" "$(median $t none-ingest-encode-cpu-ms/block)")" \
			"$(ratio "$(median $t $c-reader-cpu-ns/ex)" "$(median $t none-reader-cpu-ns/ex)")" \
			"$(ratio "$(median $t $c-reader-B/ex)" "$(median $t none-reader-B/ex)")"
	done
	echo
	echo "medians of each run's ratio to uncompressed (same run, same blocks):"
	for c in lz4 zstd; do
		printf "%-6s reader CPU %s  worker CPU %s\n" "$c" "$(median $t $c/none-reader-cpu)" "$(median $t $c/none-worker-cpu)"
	done
	echo
	echo "# break-even (derived from the medians above): the reader's extra CPU per byte it no longer fetches;"
	echo "# compression lowers a reader's CPU only where moving a byte to it (network, TLS, kernel) costs more than this."
	for c in lz4 zstd; do
		awk -v c="$c" -v dc="$(median $t $c-reader-cpu-ns/ex)" -v d0="$(median $t none-reader-cpu-ns/ex)" \
			-v bc="$(median $t $c-reader-B/ex)" -v b0="$(median $t none-reader-B/ex)" \
			'BEGIN { printf "%-6s %.3f ns per byte saved\n", c, (dc - d0) / (b0 - bc) }'
	done
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
