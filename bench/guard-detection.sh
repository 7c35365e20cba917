#!/usr/bin/env bash
# The shared-fate guard's detection rate (issue 27) and writes
# bench/guard-detection.txt: a memo block of 10000 rows with m wrong rows,
# read by k jobs, each read recomputing 16 sampled rows with the guard's own
# code (reader.BenchmarkGuardDetection: readSeed, guardRows, checkSample, as
# guardColumn runs them, without the I/O); 2000 blocks per m, each with other
# wrong rows and its own unit id (a trainer's unit id is its block's ref).
#
#   measured per read   blocks caught by any of the k reads, each read drawing
#                       its sample from the unit's seed and a nonce of its own
#                       (HEAD)
#   measured per unit   the same with the unit's seed alone (before issue 27:
#                       every job checked the same rows)
#   computed exact      1 - (C(n-m,s)/C(n,s))^k (s rows drawn without
#                       replacement, as Floyd's algorithm draws them)
#   computed approx     1 - (1 - m/n)^(k*s), the issue's formula
#
#   bench/guard-detection.sh         # about a minute
set -euo pipefail
cd "$(dirname "$0")/.."

out=bench/guard-detection.txt
source bench/lib.sh
bench_go_test ./reader -run '^$' -bench '^BenchmarkGuardDetection$' -benchtime 1x -count 1 -cpu 1 -timeout 30m

{
	echo "# the shared-fate guard's detection rate: a memo block of n=10000 rows with m wrong, read by k jobs,"
	echo "# s=16 sampled rows a read (cmd/reader's default), 2000 blocks per m"
	echo "# command: bench/guard-detection.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# measured: fraction of the 2000 blocks caught by at least one of the k reads (95% interval about"
	echo "# +-2*sqrt(p(1-p)/2000), 0.022 at most); computed: exact = 1-(C(n-m,s)/C(n,s))^k, approx = 1-(1-m/n)^(k*s)"
	echo
	printf "%5s %7s %4s  %18s %18s  %16s %16s\n" m m/n k "measured per read" "measured per unit" "computed exact" "computed approx"
	for m in 1 10 50 200; do
		for k in 1 2 4 8 16 22 64; do
			t=BenchmarkGuardDetection/m=$m/k=$k
			printf "%5s %7s %4s  %18.4f %18.4f  %16.4f %16.4f\n" "$m" "$(awk -v m="$m" 'BEGIN { printf "%.2f%%", 100*m/10000 }')" "$k" \
				"$(median "$t" per-read)" "$(median "$t" per-unit)" "$(median "$t" exact)" "$(median "$t" approx)"
		done
		echo
	done
	echo "per read (HEAD): each read draws its own sample, so the rate grows with k as computed; per unit (before):"
	echo "every job sends the same unit and checked the same rows, so k jobs catch what one job catches."
	echo "A wrong row is another row's value (sound bytes, wrong values: the faulty worker of paper VIII.E)."
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
