#!/usr/bin/env bash
# The fleet at scale (issue 18, paper IV.A and VII.B-C): `sigctl fleet` runs
# a generated fleet on real sigd, `sigd worker` processes and a SIG and a LIG
# reader, and measures hit rate per epoch, exact reuse per memo block, each
# process's CPU (SIG: workers + SIG reader; LIG: the LIG reader) as the fleet
# grows, Table I and a Figure 6 analog, against the issue's targets.
#
# make bench runs a reduced fleet (100 pipelines over 12 clients, 8 epochs,
# 2000-row blocks; a couple of minutes) into bench/fleet-run.json and
# bench/fleet-run.txt. FLEET_FULL=1 runs the full default fleet (300
# pipelines over 24 clients, 12 epochs, 10000-row blocks; about 7 minutes on
# 2 busy cores) into bench/fleet-full.json and bench/fleet-full.txt.
#
# CPU figures are per process (the kernel's clock of each pid), so other
# work on the machine slows the run without changing them; the load
# averages at the start and end are in the header and the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" ./cmd/sigctl ./cmd/sigd ./cmd/reader
if [ "${FLEET_FULL:-}" = 1 ]; then
	name=fleet-full
	args=(--seed 1)
else
	name=fleet-run
	args=(--seed 1 --pipelines 100 --clients 12 --epochs 8 --rows-per-block 2000)
fi
{
	echo "# bench/fleet-run.sh${FLEET_FULL:+ (FLEET_FULL=1)}: sigctl fleet ${args[*]} --out bench/$name.json"
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
	echo
	"$bin/sigctl" fleet "${args[@]}" --out "bench/$name.json"
} >"bench/$name.txt"
cat "bench/$name.txt"
