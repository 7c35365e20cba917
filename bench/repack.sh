#!/usr/bin/env bash
# Reclaim at the next pack (issue 28): the 30-pipeline fleet at 10,000-row
# blocks run three times, one after another on the same machine, with
# repacking off (the default), on at its default size tier (--repack,
# --repack-below 2 MiB) and merging every pack (--repack-below -1), and a
# line each into bench/repack.txt: the SIG reader's object-store requests
# per unit read, the workers', MinIO's and the readers' CPU, SIG/LIG
# process CPU with and without MinIO's, and the requests priced at S3's
# published prices (the fleet report's model). The runs' JSON go to
# bench/repack/. About 4 minutes.
#
# REPACK_FULL=1 runs the full fleet (sigctl fleet --seed 1: 300 pipelines,
# 10,000-row blocks) with repacking off and at its default tier, into
# bench/repack-full.txt and bench/repack/full-*.json: whether reclaiming
# small packs pays where reuse is the issue's. About 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" ./cmd/sigctl ./cmd/sigd ./cmd/reader
mkdir -p bench/repack
small=(--seed 1 --pipelines 30 --clients 6 --epochs 4 --rows-per-block 10000)
arms=(off: tier2MiB:--repack all:--repack,--repack-below=-1)
out=bench/repack.txt prefix=
if [ "${REPACK_FULL:-}" = 1 ]; then
	small=(--seed 1)
	arms=(off: tier2MiB:--repack)
	out=bench/repack-full.txt prefix=full-
fi
{
	echo "# bench/repack.sh${REPACK_FULL:+ (REPACK_FULL=1)}: sigctl fleet ${small[*]} --sigd-flag F, F = ${arms[*]}"
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
	echo "# req/unit = object-store requests MinIO served the SIG reader per unit read; CPU seconds per process; SIG/LIG = (workers + SIG reader) / LIG reader;"
	echo "# +MinIO = the same with MinIO's CPU each side caused; USD = requests at S3's prices + CPU at an EC2 core-hour, workers + SIG reader (modelled)"
	printf '%-22s %9s %9s %9s %9s %9s %8s %8s %9s %6s\n' repack 'req/unit' workers 'sig rdr' 'lig rdr' minio SIG/LIG +MinIO 'USD sig' checks
	for arm in "${arms[@]}"; do
		name=$prefix${arm%%:*} flag=${arm#*:}
		"$bin/sigctl" fleet "${small[@]}" ${flag:+--sigd-flag="$flag"} --out "bench/repack/$name.json" >/dev/null
		jq -r --arg name "$name" '.cpu as $c | [$name,
			(.store.sig_reader.by_api // {} | add // 0) / .store.units,
			$c.worker, $c.sig_reader, $c.lig_reader, $c.minio,
			($c.worker+$c.sig_reader)/$c.lig_reader,
			($c.worker+$c.sig_reader+$c.minio_worker+$c.minio_sig_reader)/($c.lig_reader+$c.minio_lig_reader),
			((.costs.requests_usd_workers.value // 0) + (.costs.cpu_usd_workers.value // 0) + (.costs.requests_usd_sig_reader.value // 0) + (.costs.cpu_usd_sig_reader.value // 0)),
			(if all(.checks[]; .ok) then "ok" else "FAILED" end)] |
			"\(.[0]) \(.[1]*100|round/100) \(.[2]*10|round/10) \(.[3]*10|round/10) \(.[4]*10|round/10) \(.[5]*10|round/10) \(.[6]*1000|round/1000) \(.[7]*1000|round/1000) \(.[8]*1e6|round/1e6) \(.[9])"' \
			"bench/repack/$name.json" | awk '{ printf "%-22s %9s %9s %9s %9s %9s %8s %8s %9s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }'
	done
	echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out"
cat "$out"
