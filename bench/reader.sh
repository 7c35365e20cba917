#!/usr/bin/env bash
# Benchmarks the input readers (package reader) and writes bench/reader.txt:
#
#   BenchmarkThroughput  a reader serving SIG units of ctr_small (100k-row
#                        blocks, every input from its memo object) side by
#                        side with a bare gRPC server streaming the very same
#                        responses from memory, alternating in the same run,
#                        over loopback; MB/s (wall) and MB and examples per
#                        CPU-second of the server process ("per core").
#                        Target: ratio/core >= 0.7.
#   BenchmarkInputCost   reader CPU per example serving the same units in SIG
#                        mode and in LIG mode, per example pipeline
#                        (examples/fleet), same run. Target: lig/sig >= 7.5
#                        for ctr_small (the paper reports 4.3x-7.5x).
#   BenchmarkServe       the reader's own work without gRPC (responses
#                        discarded), SIG and LIG.
#   BenchmarkGuard       the shared-fate guard's cost: the same SIG units served
#                        by readers without the guard, with the default sample
#                        (16 rows per memo input per read, drawn per read),
#                        with it in one read of 8 (--guard-every 8) and with 1024 rows,
#                        alternating, per example pipeline; reader CPU per
#                        example and the ratio to unguarded, and the raw column
#                        bytes per example the guard adds to a unit's fetch.
#                        The other benchmarks run readers as configured by
#                        default, i.e. with the guard.
#   BenchmarkFetch       the object store requests of the same SIG units and
#                        nothing else (one planned read of the raw block's
#                        event_id and labels and one per memo object, footers
#                        cached as a reader keeps them; checksums, no decoding
#                        or encoding): what receiving the bytes from MinIO over
#                        HTTP costs, which the bare server does not pay, and
#                        the requests per unit.
#
# Requests and CPU per unit by block size, before and after the planned read
# path (issue 28), are bench/requests.sh's (bench/requests.txt).
#
# Servers run in the benchmark process, the consumer (reader.Client) in a
# child process, MinIO in its own; CPU is getrusage of the benchmark process.
# The summary is the median of COUNT runs; the raw output follows it.
#
#   bench/reader.sh                  # about 2 minutes
#   COUNT=3 BENCHTIME=5x bench/reader.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-10x}
out=bench/reader.txt
source bench/lib.sh
bench_go_test ./reader -run '^$' -bench '^(BenchmarkThroughput|BenchmarkInputCost|BenchmarkServe|BenchmarkFetch|BenchmarkGuard)$' \
	-cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 60m

{
	echo "# input readers: throughput vs bare gRPC, and SIG vs LIG input cost"
	echo "# command: bench/reader.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs; per core = per CPU-second of the server process (getrusage);"
	echo "# GC at reader.DefaultGCPercent as cmd/reader runs; 100k-row blocks, 4096-row batches"
	echo "# no forced GC between the alternating runs (since 2026-11-22: it emptied the reader's fetch buffer"
	echo "# pool before every run; before, ratio/core was 0.26-0.30); collections count where they come"
	echo
	echo "## Reader throughput vs a bare gRPC stream of the same bytes (ctr_small, SIG)"
	t=BenchmarkThroughput/sig-vs-bare
	printf "%-28s %12s %12s\n" "" reader bare
	printf "%-28s %12s %12s\n" "MB/s (wall, one stream)" "$(median $t reader-MB/s)" "$(median $t bare-MB/s)"
	printf "%-28s %12s %12s\n" "MB/s per core" "$(median $t reader-MB/cpu-s)" "$(median $t bare-MB/cpu-s)"
	printf "%-28s %12s %12s\n" "examples/s per core" "$(median $t reader-ex/cpu-s)" "$(median $t bare-ex/cpu-s)"
	echo "ratio reader/bare per core:  $(median $t ratio/core)   (target >= 0.7)"
	echo "ratio reader/bare wall:      $(median $t ratio/wall)"
	echo
	echo "## SIG vs LIG: reader CPU per example, same units, same run"
	printf "%-12s %14s %14s %10s %8s\n" pipeline "SIG ns/ex" "LIG ns/ex" "LIG/SIG" "B/ex"
	for p in ctr_small ctr_wide cvr explore ranking; do
		t=BenchmarkInputCost/$p
		printf "%-12s %14s %14s %10s %8s\n" "$p" "$(median $t sig-cpu-ns/ex)" "$(median $t lig-cpu-ns/ex)" "$(median $t lig/sig)" "$(median $t B/ex)"
	done
	echo "target: LIG/SIG >= 7.5 for ctr_small (paper IV.B: 4.3x-7.5x)"
	echo
	echo "## The shared-fate guard: reader CPU per example, same SIG units, same run (readers above run it)"
	printf "%-12s %9s %9s %7s %14s %10s %9s %8s %6s\n" pipeline "off ns/ex" "16 ns/ex" "16/off" "16,every8/off" "1024 ns/ex" "1024/off" "+raw B/ex" "B/ex"
	for p in ctr_small ctr_wide cvr explore ranking; do
		t=BenchmarkGuard/$p
		printf "%-12s %9s %9s %7s %14s %10s %9s %8s %6s\n" "$p" "$(median $t off-cpu-ns/ex)" "$(median $t guard16-cpu-ns/ex)" \
			"$(median $t guard16/off)" "$(median $t guard16every8/off)" "$(median $t guard1024-cpu-ns/ex)" "$(median $t guard1024/off)" \
			"$(median $t guard-raw-B/ex)" "$(median $t sent-B/ex)"
	done
	echo "16 rows per memo input in every read, drawn per read, is cmd/reader's default (--guard-sample-rows 16 --guard-every 1); its cost"
	echo "is mostly fetching the raw columns the components read, whole (+raw B/ex), not the rows it recomputes;"
	echo "--guard-every 8 guards each input in one read of 8 (drawn per read: about 1/8 of the units in a run)"
	echo
	echo "## The reader's own work, without gRPC (ctr_small, CPU ns per example)"
	printf "SIG %s   LIG %s\n" "$(median BenchmarkServe/sig cpu-ns/example)" "$(median BenchmarkServe/lig cpu-ns/example)"
	echo
	echo "## What bounds a SIG reader (ctr_small, CPU ns per example, medians)"
	fetch=$(median BenchmarkFetch cpu-ns/example)
	serve=$(median BenchmarkServe/sig cpu-ns/example)
	bare=$(median BenchmarkThroughput/sig-vs-bare bare-ex/cpu-s)
	reader=$(median BenchmarkThroughput/sig-vs-bare reader-ex/cpu-s)
	lig=$(median BenchmarkInputCost/ctr_small lig-cpu-ns/ex)
	echo "object store requests per unit (BenchmarkFetch, footers cached):     $(median BenchmarkFetch req/unit)"
	awk -v f="$fetch" -v s="$serve" -v b="$bare" -v r="$reader" -v l="$lig" 'BEGIN {
		printf "%-66s %7.1f\n", "object store requests alone (BenchmarkFetch: the reader requests)", f
		printf "%-66s %7.1f\n", "checksums, decoding, encoding, the rest (BenchmarkServe/sig - fetch)", s - f
		printf "%-66s %7.1f\n", "reader own work (BenchmarkServe/sig)", s
		printf "%-66s %7.1f\n", "gRPC send of the same bytes (bare server, 1e9 / bare-ex/cpu-s)", 1e9 / b
		printf "%-66s %7.1f\n", "reader serving over gRPC (1e9 / reader-ex/cpu-s)", 1e9 / r
		printf "%-66s %7.2f\n", "ratio/core if the reader did nothing but fetch and send", (1e9 / b) / (f + 1e9 / b)
		printf "%-66s %7.2f\n", "LIG/SIG if the SIG reader did nothing but fetch and send", l / (f + 1e9 / b)
	}'
	echo "Receiving the bytes from MinIO over HTTP (kernel copies of the bodies, a signed request per"
	echo "coalesced range of each object: at 100k rows the raw block's event_id and its labels are two) is a cost"
	echo "the bare server does not pay;"
	echo "with the gRPC send it bounds ratio/core and LIG/SIG. The last two lines are those"
	echo "bounds, from this run: a reader that checked, decoded and encoded nothing would reach them."
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
