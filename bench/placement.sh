#!/usr/bin/env bash
# Program goodput of the same job with its caught-up tables on the slice and
# on parameter servers, on one basis (issue 27, item 3). Writes
# bench/placement.json (figures, internal/figure, and both runs' caught-up
# phase) and bench/placement.txt.
#
#   BenchmarkPlacementPG (package trainer)  ctr_small on real sigd, MinIO and
#                         in-process readers, one host reading one unit at a
#                         time (both runs train the same batches in the same
#                         order): the caught-up phase's tables on its 1-chip
#                         slice, then on two `trainer ps` processes the
#                         controller starts, at the default time scale and
#                         network. PG = ideal over productive chip-time of the
#                         caught-up phase, from each job's report (MPG paper
#                         §4: ideal time over the time the job held its
#                         accelerators, the wait on the servers included).
#
# The servers' PG is decided by a guess, the host's network bandwidth
# (steptime.DefaultNetworkBandwidth, 100 Gbit/s): the figures name it and
# sweep it. The servers' steps last about 1.8 s each at the default time
# scale, so the run takes about 2 minutes.
#
#   bench/placement.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/placement.txt
json=bench/placement.json
source bench/lib.sh
SIG_BENCH_PLACEMENT_JSON="$PWD/$json" bench_go_test ./trainer -run '^$' -bench '^BenchmarkPlacementPG$' -benchtime 1x -count 1 -timeout 30m
go build -o /tmp/sig-bench-trainer ./cmd/trainer

{
	echo "# program goodput of one job, its caught-up tables on the slice and on parameter servers (issue 27)"
	echo "# command: bench/placement.sh  (${cmd[*]})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# every number below is read from $json, which the benchmark wrote from the two jobs' reports"
	echo
	echo "## caught-up phase, same job, same steps (PG = ideal / productive chip-time; step times modelled, unscaled, per step)"
	jq -r '
		def row(name; r): [name, (r.steps|tostring), (r.unique_per_step|round|tostring),
			(r.tensorcore_ns_per_step*100|round/100|tostring), (r.sparsecore_ns_per_step|round|tostring),
			(r.servers_ns_per_step|round|tostring), (r.device_ns_per_step|round|tostring),
			(r.ideal_chip_seconds*10000|round/10000|tostring), (r.productive_chip_seconds*1000|round/1000|tostring),
			(r.pg*100000|round/100000|tostring)] | @tsv;
		(["tables", "steps", "unique/step", "TensorCore_ns", "SparseCore_ns", "servers_ns", "device_ns", "ideal_chip_s", "productive_chip_s", "PG"] | @tsv),
		row("slice"; .slice),
		row("servers(\(.servers.servers))"; .servers)
	' "$json" | column -t
	echo
	jq -r '
		"constants: time scale \(.slice.time_scale) (a choice; PG on one basis does not depend on it); "
		+ "HBM \(.slice.hbm_bandwidth) B/s (TPU v4); host network \(.servers.network_bandwidth) B/s (a guess: 100 Gbit/s); "
		+ "RPC round trip \(.servers.round_trip_ns) ns (not priced)",
		"PG slice / PG servers = \(.figures.caught_up_pg_slice_over_servers.value * 1000 | round / 1000) measured, "
		+ "\(.servers.device_ns_per_step / .slice.device_ns_per_step * 1000 | round / 1000) by the step-time model",
		"",
		"why: \(.figures.caught_up_pg_slice_over_servers.how)"
	' "$json" | fold -s -w 120
	echo
	echo "## figures (trainer figures $json)"
	/tmp/sig-bench-trainer figures "$json"
	echo
	echo "## raw"
	grep -v 'level=' "$raw"
} >"$out"
echo "wrote $out and $json" >&2
