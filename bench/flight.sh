#!/usr/bin/env bash
# Benchmarks Arrow Flight on the readers (package reader, flight.go) against
# Read and writes bench/flight.txt:
#
#   BenchmarkFlight  one reader serving the same SIG units of ctr_small
#                    (100k-row blocks, every input from its memo object)
#                    through Read, through Flight's DoGet (FlightData
#                    hand-marshaled from the reader's encoder), and through a
#                    DoGet written by Arrow's own Flight writer
#                    (flight.NewRecordWriter over the same loaded columns),
#                    alternating in the same run, over loopback. CPU per
#                    example of the server process ("per core"), and
#                    ratio/core = Read's CPU / DoGet's. Target: >= 0.95.
#
# The server runs in the benchmark process, the consumer in a child process
# (Read: reader.Client; DoGet: Arrow's Flight reader; both decode every
# batch), MinIO in its own; CPU is getrusage of the benchmark process.
# The summary is the median of COUNT runs; the raw output follows it.
#
#   bench/flight.sh                  # about a minute
#   COUNT=3 BENCHTIME=5x bench/flight.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-10x}
out=bench/flight.txt
source bench/lib.sh
bench_go_test ./reader -run '^$' -bench '^BenchmarkFlight$' -cpu 1 -benchtime "$BENCHTIME" -count "$COUNT" -timeout 30m

{
	echo "# readers: Arrow Flight DoGet vs Read, same units, same run"
	echo "# command: bench/flight.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# medians of $COUNT runs; per core = per CPU-second of the server process (getrusage);"
	echo "# ctr_small SIG units, 100k-row blocks, 4096-row batches; GC at reader.DefaultGCPercent"
	echo
	t=BenchmarkFlight/read-vs-doget
	printf "%-40s %14s %14s\n" "" "CPU ns/example" "examples/cpu-s"
	printf "%-40s %14s %14s\n" "Read" "$(median $t read-cpu-ns/ex)" "$(median $t read-ex/cpu-s)"
	printf "%-40s %14s %14s\n" "Flight DoGet (hand-marshaled FlightData)" "$(median $t doget-cpu-ns/ex)" "$(median $t doget-ex/cpu-s)"
	printf "%-40s %14s %14s\n" "Flight DoGet (Arrow's Flight writer)" "$(median $t stock-cpu-ns/ex)" "$(median $t stock-ex/cpu-s)"
	echo
	echo "ratio Read/DoGet per core:               $(median $t ratio/core)   (target >= 0.95)"
	echo "ratio Read/DoGet with Arrow's writer:    $(median $t stock-ratio/core)"
	echo "ratio Read/DoGet wall (one stream):      $(median $t ratio/wall)   (MB/s: Read $(median $t read-MB/s), DoGet $(median $t doget-MB/s))"
	echo
	echo "# raw go test output"
	cat "$raw"
} >"$out"
echo "wrote $out" >&2
