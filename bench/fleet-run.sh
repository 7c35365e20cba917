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
# FLEET_FULL_DEFAULT=1 runs the same full fleet at ingestion's default block
# size (127,469 rows, 16 MiB of Ads events) into bench/fleet-full-default.json
# and .txt: 13 times the events, about an hour.
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
# FLEET_READS=1 measures what read planning can do about the SIG reader's
# requests and bytes: the same small fleet at 10,000-row blocks with the SIG
# reader's hole limit at its default (1.5 MiB), at 256 KiB and at 64 KiB, at
# 64 KiB with a 64 KiB tail read, and with the guard once in 8 reads, a line each into
# bench/fleet-reads.txt, with the bytes its reads wanted (the reader's own
# count, sig_reader_object_wanted_bytes_total), the floor under the bytes
# sent. About 6 minutes.
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
if [ "${FLEET_READS:-}" = 1 ]; then
	# The read planning's trade of requests for bytes, at the fleet: the
	# SIG reader's hole limit and tail read swept (cmd/reader
	# --read-hole-limit, --read-tail), and the guard once in 8 reads, each
	# beside the default, with the bytes the reads wanted (the readers'
	# own count) as the floor no planning goes below.
	small=(--seed 1 --pipelines 30 --clients 6 --epochs 4 --rows-per-block 10000)
	{
		echo "# bench/fleet-run.sh (FLEET_READS=1): sigctl fleet ${small[*]} --sig-reader-flag F"
		echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
		echo "# req/u = object-store requests MinIO served the SIG reader per unit read (the LIG reader: 1); sent and wanted = MiB a unit MinIO sent the SIG reader and the bytes its reads wanted (the reader's own count);"
		echo "# lig sent = MiB a unit MinIO sent the LIG reader; minio sig/lig = MinIO's CPU serving the SIG reader over serving the LIG reader (target <= 1);"
		echo "# SIG/LIG = (workers + SIG reader) / LIG reader; +storage = the same with MinIO's CPU each side caused (target <= 0.45 at 300 pipelines)"
		printf '%-44s %6s %6s %7s %8s %9s %9s %9s %8s %9s %6s\n' 'SIG reader flags' 'req/u' sent wanted 'lig sent' 'minio sig' 'minio lig' 'sig/lig' SIG/LIG '+storage' checks
		i=0
		for flags in "" "--read-hole-limit=262144" "--read-hole-limit=65536" "--read-hole-limit=65536,--read-tail=65536" "--guard-every=8"; do
			fl=()
			[ -n "$flags" ] && fl=(--sig-reader-flag "$flags") # comma-separated: the flag is one list
			i=$((i + 1))
			"$bin/sigctl" fleet "${small[@]}" "${fl[@]}" --out "$bin/reads-$i.json" >/dev/null
			jq -r --arg flags "${flags:-(defaults)}" '.cpu as $c | .store as $s | [$flags,
				(($s.sig_reader.by_api // {}) | add // 0) / $s.units, $s.sig_reader.sent_bytes / 1048576 / $s.units,
				($s.readers.sig_reader.wanted_raw_bytes + $s.readers.sig_reader.wanted_memo_bytes) / 1048576 / $s.units,
				$s.lig_reader.sent_bytes / 1048576 / $s.units, $c.minio_sig_reader, $c.minio_lig_reader, $c.minio_sig_reader / $c.minio_lig_reader,
				($c.worker + $c.sig_reader) / $c.lig_reader,
				($c.worker + $c.sig_reader + $c.minio_worker + $c.minio_sig_reader) / ($c.lig_reader + $c.minio_lig_reader),
				(if all(.checks[]; .ok) then "ok" else "FAILED" end)] |
				"\(.[0])\t\(.[1]*100|round/100)\t\(.[2]*100|round/100)\t\(.[3]*100|round/100)\t\(.[4]*100|round/100)\t\(.[5]*100|round/100)\t\(.[6]*100|round/100)\t\(.[7]*100|round/100)\t\(.[8]*1000|round/1000)\t\(.[9]*1000|round/1000)\t\(.[10])"' \
				"$bin/reads-$i.json" | awk -F'\t' '{ printf "%-44s %6s %6s %7s %8s %9s %9s %9s %8s %9s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }'
		done
		# MinIO's CPU serving the SIG reader against its requests and MiB,
		# least squares through the origin over the read-limit runs (1-4:
		# the knob moves requests up and bytes down together, which the
		# run's own fit over its phases cannot separate).
		for j in 1 2 3 4; do
			jq -r '[(.store.sig_reader.by_api // {} | add // 0), .store.sig_reader.sent_bytes / 1048576, .cpu.minio_sig_reader] | @tsv' "$bin/reads-$j.json"
		done | awk '{ s11 += $1*$1; s12 += $1*$2; s22 += $2*$2; s1y += $1*$3; s2y += $2*$3 }
			END { d = s11*s22 - s12*s12; a = (s1y*s22 - s2y*s12) / d; b = (s2y*s11 - s1y*s12) / d
				printf "# MinIO CPU serving the SIG reader, fitted over the 4 read-limit runs (requests and MiB as the knob moves them): %.3g ms per request + %.3g ms per MiB: a request costs what %.2g MiB do\n", a*1e3, b*1e3, a/b }'
		echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	} >bench/fleet-reads.txt
	cat bench/fleet-reads.txt
	exit 0
fi
if [ "${FLEET_FULL_DEFAULT:-}" = 1 ]; then
	# The full fleet again at ingestion's default block (16 MiB as it
	# holds Ads events: 127,469 rows, bench/block-bytes.txt), issue 28's
	# second full run: 13 times the events of the 10,000-row run.
	name=fleet-full-default
	args=(--seed 1 --rows-per-block 127469)
elif [ "${FLEET_FULL:-}" = 1 ]; then
	name=fleet-full
	args=(--seed 1)
else
	name=fleet-run
	args=(--seed 1 --pipelines 100 --clients 12 --epochs 8 --rows-per-block 2000)
fi
{
	echo "# bench/fleet-run.sh${FLEET_FULL:+ (FLEET_FULL=1)}${FLEET_FULL_DEFAULT:+ (FLEET_FULL_DEFAULT=1)}: sigctl fleet ${args[*]} --out bench/$name.json"
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
	echo
	"$bin/sigctl" fleet "${args[@]}" --out "bench/$name.json"
} >"bench/$name.txt"
cat "bench/$name.txt"
