#!/usr/bin/env bash
# The fleet at scale (issue 18, paper IV.A and VII.B-C): `sigctl fleet` runs
# a generated fleet on real sigd, `sigd worker` processes and a SIG and a LIG
# reader, and measures hit rate per epoch, exact reuse per memo block, each
# process's CPU (SIG: workers + SIG reader; LIG: the LIG reader) as the fleet
# grows, the object-store requests (GET, HEAD, PUT, LIST, DELETE) and bytes of
# each side from MinIO's own counters, requests per unit read, and the
# requests priced at S3's published prices beside the CPU at an EC2 core-hour
# (modelled), Table I and a Figure 6 analog, against the issues' targets.
#
# make bench runs a reduced fleet (100 pipelines over 12 clients, 8 epochs,
# 2000-row blocks; a couple of minutes) into bench/fleet-run.json and
# bench/fleet-run.txt. FLEET_FULL=1 runs the full default fleet (300
# pipelines over 24 clients, 12 epochs, 10000-row blocks; about 9 minutes on
# 2 busy cores) into bench/fleet-full.json and bench/fleet-full.txt.
#
# FLEET_BLOCKS=1 measures what bounds the CPU ratio: the same small fleet
# (30 pipelines over 6 clients, 4 epochs) at 2000, 10000, 50000 and 127469
# rows per block, a line each into bench/fleet-blocks.txt: the SIG reader's
# and the LIG reader's CPU per example, the ratios, and each reader's
# object-store requests per unit read. 127,469 rows is what ingestion's
# default block size by bytes (ingest.DefaultBlockBytes, 16 MiB) held of
# Ads events in bench/block-bytes.txt: the fleet plans blocks by rows, so
# the default is run as that many rows, marked in the file. About 20
# minutes.
#
# CPU figures are per process (the kernel's clock of each pid), so other
# work on the machine slows the run without changing them; the load
# averages at the start and end are in the header and the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" ./cmd/sigctl ./cmd/sigd ./cmd/reader
if [ "${FLEET_BLOCKS:-}" = 1 ]; then
	small=(--seed 1 --pipelines 30 --clients 6 --epochs 4)
	{
		echo "# bench/fleet-run.sh (FLEET_BLOCKS=1): sigctl fleet ${small[*]} --rows-per-block R, R = 2000, 10000, 50000, 127469"
		echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
		echo "# CPU seconds per process; ns/ex = CPU per example read (the same examples both ways); reader ratio = SIG reader / LIG reader, the floor of SIG/LIG;"
		echo "# minio sig/lig = MinIO's CPU while the SIG (LIG) reader read; +storage = SIG/LIG with MinIO's CPU each side caused (workers' included)"
		echo "# req/unit sig/lig = the object-store requests MinIO served the SIG (LIG) reader per unit read"
		echo "# 127469 rows: ingestion's default block of 16 MiB (ingest.DefaultBlockBytes) as it held Ads events in bench/block-bytes.txt"
		printf '%-7s %9s %8s %9s %9s %9s %9s %8s %12s %9s %9s %9s %9s %9s %6s\n' rows examples workers sigreader ligreader 'sig ns/ex' 'lig ns/ex' SIG/LIG 'reader ratio' 'minio sig' 'minio lig' '+storage' 'req/u sig' 'req/u lig' checks
		for rows in 2000 10000 50000 127469; do
			"$bin/sigctl" fleet "${small[@]}" --rows-per-block "$rows" --out "$bin/blocks-$rows.json" >/dev/null
			jq -r --arg rows "$rows" '.cpu as $c | [$rows, $c.examples, $c.worker, $c.sig_reader, $c.lig_reader,
				1e9*$c.sig_reader/$c.examples, 1e9*$c.lig_reader/$c.examples, ($c.worker+$c.sig_reader)/$c.lig_reader,
				$c.sig_reader/$c.lig_reader, $c.minio_sig_reader, $c.minio_lig_reader,
				($c.worker+$c.sig_reader+$c.minio_worker+$c.minio_sig_reader)/($c.lig_reader+$c.minio_lig_reader),
				(.store.sig_reader.by_api // {} | add // 0) / .store.units, (.store.lig_reader.by_api // {} | add // 0) / .store.units,
				(if all(.checks[]; .ok) then "ok" else "FAILED" end)] |
				"\(.[0]) \(.[1]) \(.[2]*10|round/10) \(.[3]*10|round/10) \(.[4]*10|round/10) \(.[5]|round) \(.[6]|round) \(.[7]*1000|round/1000) \(.[8]*1000|round/1000) \(.[9]*10|round/10) \(.[10]*10|round/10) \(.[11]*1000|round/1000) \(.[12]*100|round/100) \(.[13]*100|round/100) \(.[14])"' \
				"$bin/blocks-$rows.json" | awk '{ printf "%-7s %9s %8s %9s %9s %9s %9s %8s %12s %9s %9s %9s %9s %9s %6s%s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, ($1 == 127469 ? "  <- the default block size (16 MiB)" : "") }'
		done
		echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	} >bench/fleet-blocks.txt
	cat bench/fleet-blocks.txt
	exit 0
fi
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
