#!/usr/bin/env bash
# The embeddings report (issue 6, paper VII.D Figure 7 and VII.E): five
# synthetic models A-E through Baseline -> +Pipelining -> +Hybrid
# partitioning -> +FDP on the emulated 16-chip slice, and uncoalesced ->
# coalesced parameter servers over loopback gRPC. Writes bench/embeddings.txt
# (the tables) and bench/embeddings.json (the report). About a minute.
#
# The section at the end runs the partitioner benchmarks (500 tables over
# 64 SparseCores heuristic, 20 over 8 exact, and exact on 8 small problems
# of 8 tables over 4); the 100-table coalescing benchmark with the 3x
# target is bench/ps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o /tmp/sig-bench-trainer ./cmd/trainer
{
	echo "# bench/embeddings.sh: trainer embeddings-report --json bench/embeddings.json"
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs, commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
	echo
	/tmp/sig-bench-trainer embeddings-report --quiet --json bench/embeddings.json
	echo
	echo "# partitioner: heuristic on 500 tables / 64 SparseCores, exact on 20 tables / 8 SparseCores and on 8 problems of 8 tables / 4"
	go test ./trainer/embedding/partition -run '^$' -bench . -benchtime 1x -count 1 -timeout 20m
} >bench/embeddings.txt
cat bench/embeddings.txt
