#!/usr/bin/env bash
# Benchmarks `sigctl run` (local input generation over a raw Arrow file) as a
# user runs it, whole process, before and after it read only the graph's
# columns in place (issue 27), in one run, and writes bench/sigctl-run.txt:
#
#   one raw Ads file of EVENTS events (`sigctl gen`: 11 columns, batches of
#   64Ki rows), in the page cache; three graphs: a copy-only graph (event_id
#   and bid_price out as they are: what reading and writing cost), bucketize
#   of bid_price (a cheap op) and the overlap component (tokenizing two text
#   columns: compute-bound); each run by the binary built from BEFORE and by
#   the one built from the working tree, COUNT rounds, alternating, each
#   round every graph once per binary. Wall time and the child's CPU time
#   (user + system, from wait4) and peak RSS; medians; the outputs of both
#   binaries are compared byte for byte.
#
# BEFORE defaults to the parent of the commit that added ReadColumns
# (internal/arrowfile/mapped.go), so the script keeps measuring the same
# change after rebases.
#
#   bench/sigctl-run.sh                    # about a minute
#   COUNT=3 EVENTS=200000 bench/sigctl-run.sh
#   BEFORE=<rev> bench/sigctl-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${EVENTS:-1000000}
COUNT=${COUNT:-7}
added=$(git log --diff-filter=A --format=%H -- internal/arrowfile/mapped.go | tail -1)
BEFORE=${BEFORE:-${added}^}
before=$(git rev-parse --short "$BEFORE")
after="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench' || echo '+changes')"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "building sigctl at $before (before) and from the working tree (after)" >&2
mkdir "$tmp/src"
git archive "$BEFORE" | tar -x -C "$tmp/src"
(cd "$tmp/src" && go build -o "$tmp/sigctl-before" ./cmd/sigctl)
go build -o "$tmp/sigctl-after" ./cmd/sigctl

"$tmp/sigctl-after" gen --out "$tmp/raw.arrow" --events "$EVENTS" --seed 1 >&2
cat "$tmp/raw.arrow" >/dev/null # in the page cache for both binaries
printf 'input x = col("bid_price")\n' >"$tmp/copy.sig"
printf 'input x = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])\n' >"$tmp/bucketize.sig"
printf 'input x = concat(intersect(unigrams(lower(col("query"))), unigrams(lower(col("ad_title")))), col("ad_category"))\n' >"$tmp/overlap.sig"

report=$(python3 - "$tmp" "$COUNT" <<'EOF'
import os, statistics, subprocess, sys, time

tmp, count = sys.argv[1], int(sys.argv[2])
graphs = ["copy", "bucketize", "overlap"]
bins = ["before", "after"]
runs = {(g, b): [] for g in graphs for b in bins}

def run(g, b):
    args = [f"{tmp}/sigctl-{b}", "run", f"{tmp}/{g}.sig", "--raw", f"{tmp}/raw.arrow", "--out", f"{tmp}/{g}-{b}.arrow"]
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024

for i in range(count):
    order = bins if i % 2 == 0 else bins[::-1]
    for g in graphs:
        for b in order:
            runs[(g, b)].append(run(g, b))

for g in graphs:
    with open(f"{tmp}/{g}-before.arrow", "rb") as f1, open(f"{tmp}/{g}-after.arrow", "rb") as f2:
        if f1.read() != f2.read():
            sys.exit(f"{g}: the outputs of before and after differ")

med = {k: tuple(statistics.median(r[j] for r in v) for j in range(3)) for k, v in runs.items()}
print(f"{'graph':<10} {'binary':<7} {'wall ms':>8} {'cpu ms':>8} {'peak RSS MB':>12}   (medians of {count})")
for g in graphs:
    for b in bins:
        w, c, m = med[(g, b)]
        print(f"{g:<10} {b:<7} {w*1e3:8.1f} {c*1e3:8.1f} {m:12.0f}")
print()
print("before/after (how many times faster):")
for g in graphs:
    wb, cb, _ = med[(g, "before")]
    wa, ca, _ = med[(g, "after")]
    print(f"  {g:<10} wall {wb/wa:5.2f}x  cpu {cb/ca:5.2f}x")
print()
print("against the copy-only graph (graph / copy; graph - copy):")
for g in graphs[1:]:
    for b in bins:
        w, c, _ = med[(g, b)]
        w0, c0, _ = med[("copy", b)]
        print(f"  {g:<10} {b:<7} wall {w/w0:5.2f}x ({(w-w0)*1e3:+7.1f} ms)  cpu {c/c0:5.2f}x ({(c-c0)*1e3:+7.1f} ms)")
print()
print("outputs of before and after: byte for byte the same for every graph")
EOF
)
out=bench/sigctl-run.txt
{
	echo "# sigctl run, whole process, before and after it read only the graph's columns in place (issue 27), same run"
	echo "# command: bench/sigctl-run.sh  (EVENTS=$EVENTS COUNT=$COUNT; before $before, after $after)"
	echo "# before: $before $(git log -1 --format=%s "$BEFORE" | cut -c1-100)"
	echo "# raw file: sigctl gen --events $EVENTS --seed 1, $(stat -c %s "$tmp/raw.arrow") bytes, 11 columns, batches of 65536 rows, in the page cache"
	echo "# graphs: copy = input x = col(\"bid_price\"); bucketize = bucketize(col(\"bid_price\"), boundaries=[0.1, 0.5, 1, 5]);"
	echo "#   overlap = concat(intersect(unigrams(lower(col(\"query\"))), unigrams(lower(col(\"ad_title\")))), col(\"ad_category\"))"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores, shared; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "$report"
} >"$out"
cat "$out"
echo "wrote $out" >&2
