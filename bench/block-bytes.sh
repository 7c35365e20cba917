#!/usr/bin/env bash
# The block-size sweep that chooses ingestion's default block size by bytes
# (ingest.DefaultBlockBytes, --block-bytes; issue 28), replacing the
# row-count sweep of bench/fleet-blocks.txt. Writes bench/block-bytes.txt
# (summary and raw output) and bench/block-bytes.json (the figures).
#
#   BenchmarkBlockBytes (warehouse/ingest)  the same generated Ads events
#       (ROWS, default 600,000: 79 MB encoded) cut into blocks of each target size
#       (SIZES, bytes), as ingestion cuts them by their encoded size; per
#       size, in every iteration: the fleet's ranking pipeline memoized over
#       every block by a worker (worker CPU per block and per example), then
#       read unit by unit by a SIG reader (every input memoized, the guard
#       at its default) and by a LIG reader (every input computed from raw):
#       reader CPU per example and object-store requests per 1,000 examples.
#
# CPU is getrusage of the benchmark process (MinIO runs in its own). The
# figures are the medians of COUNT runs. The choice (KNEE below) is made
# here from them, never typed in: the smallest size whose SIG reader CPU
# per example is within KNEE of the lowest measured, and whose worker CPU
# per block stays under TASK_MS (a task is the unit of scheduling,
# retries and the guard's recomputation: one that runs for seconds makes
# a retry and a guard repair cost seconds).
#
#   bench/block-bytes.sh                          # about ten minutes on 2 cores
#   COUNT=1 ROWS=300000 SIZES=1048576,16777216 bench/block-bytes.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
ROWS=${ROWS:-600000}
SIZES=${SIZES:-262144,1048576,4194304,16777216,67108864}
KNEE=${KNEE:-0.10}      # within 10% of the lowest SIG reader CPU per example
TASK_MS=${TASK_MS:-1000} # worker CPU per block (all the pipeline's tasks) under 1 s
out=bench/block-bytes.txt
json=bench/block-bytes.json
source bench/lib.sh
BLOCK_BYTES_ROWS=$ROWS BLOCK_BYTES_SIZES=$SIZES \
	bench_go_test ./warehouse/ingest -run '^$' -bench '^BenchmarkBlockBytes$' -cpu 1 -benchtime 1x -count "$COUNT" -timeout 60m

t=BenchmarkBlockBytes
IFS=, read -r -a sizes <<<"$SIZES"
lowest=$(for s in "${sizes[@]}"; do median $t "$s-sig-reader-ns/ex"; done | sort -g | head -1)
chosen=""
for s in "${sizes[@]}"; do
	sig=$(median $t "$s-sig-reader-ns/ex")
	ms=$(median $t "$s-worker-ms/block")
	if [ -z "$chosen" ] && awk -v a="$sig" -v l="$lowest" -v k="$KNEE" -v m="$ms" -v tm="$TASK_MS" 'BEGIN { exit !(a <= l * (1 + k) && m < tm) }'; then
		chosen=$s
	fi
done
default=$(( $(sed -n 's/^const DefaultBlockBytes = \(.*\)$/\1/p' warehouse/ingest/size.go) ))
{
	echo "# block size by bytes: the same Ads events cut into blocks of each size, the fleet's ranking pipeline memoized and read SIG and LIG"
	echo "# command: bench/block-bytes.sh  (${cmd[*]}; BLOCK_BYTES_ROWS=$ROWS BLOCK_BYTES_SIZES=$SIZES)"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs of $ROWS events each; reader and worker CPU is the benchmark process's (getrusage); requests are object-store requests"
	echo
	printf "%-10s %7s %10s %9s %14s %14s %12s %13s %13s %14s %12s\n" "bytes" "blocks" "B/block" "rows/blk" "SIG ns/ex" "LIG ns/ex" "SIG/LIG" "SIG req/kex" "LIG req/kex" "worker ms/blk" "worker ns/ex"
	for s in "${sizes[@]}"; do
		mark=""
		[ "$s" = "$chosen" ] && mark="  <- chosen"
		printf "%-10s %7s %10s %9s %14s %14s %12s %13s %13s %14s %12s%s\n" "$s" "$(median $t "$s-blocks")" "$(median $t "$s-B/block")" \
			"$(median $t "$s-rows/block")" "$(median $t "$s-sig-reader-ns/ex")" "$(median $t "$s-lig-reader-ns/ex")" \
			"$(median $t "$s-sig/lig-reader")" "$(median $t "$s-sig-requests/kex")" "$(median $t "$s-lig-requests/kex")" \
			"$(median $t "$s-worker-ms/block")" "$(median $t "$s-worker-ns/ex")" "$mark"
	done
	echo
	echo "# rule: the smallest size whose SIG reader CPU per example is within KNEE=$KNEE of the lowest measured ($lowest ns)"
	echo "#       and whose worker CPU per block is under TASK_MS=$TASK_MS ms: $chosen bytes"
	if [ "$default" = "$chosen" ]; then agree="the rule's choice"; else agree="NOT the rule's choice: update it or the rule"; fi
	echo "# ingest.DefaultBlockBytes in warehouse/ingest/size.go: $default bytes, $agree"
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
{
	echo "{"
	echo "  \"schema\": \"sig.block-bytes/v1\","
	echo "  \"command\": \"bench/block-bytes.sh\","
	echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%MZ)\", \"commit\": \"$(git rev-parse --short HEAD)\", \"cores\": $(nproc),"
	echo "  \"runs\": $COUNT, \"events\": $ROWS, \"pipeline\": \"examples/fleet/ranking.sig\","
	echo "  \"rule\": {\"knee\": $KNEE, \"task_ms\": $TASK_MS, \"lowest_sig_reader_ns_per_example\": $lowest},"
	echo "  \"chosen_bytes\": ${chosen:-null}, \"default_block_bytes\": $default,"
	echo "  \"sizes\": ["
	n=${#sizes[@]}
	for i in "${!sizes[@]}"; do
		s=${sizes[$i]}
		sep=","
		[ "$i" -eq $((n - 1)) ] && sep=""
		echo "    {\"target_bytes\": $s, \"blocks\": $(median $t "$s-blocks"), \"bytes_per_block\": $(median $t "$s-B/block"), \"rows_per_block\": $(median $t "$s-rows/block"), \"sig_reader_ns_per_example\": $(median $t "$s-sig-reader-ns/ex"), \"lig_reader_ns_per_example\": $(median $t "$s-lig-reader-ns/ex"), \"sig_over_lig_reader\": $(median $t "$s-sig/lig-reader"), \"sig_requests_per_1000_examples\": $(median $t "$s-sig-requests/kex"), \"lig_requests_per_1000_examples\": $(median $t "$s-lig-requests/kex"), \"worker_ms_per_block\": $(median $t "$s-worker-ms/block"), \"worker_ns_per_example\": $(median $t "$s-worker-ns/ex")}$sep"
	done
	echo "  ]"
	echo "}"
} >"$json"
jq . "$json" >/dev/null
echo "wrote $out and $json (chosen: $chosen bytes; default in size.go: $default)" >&2
