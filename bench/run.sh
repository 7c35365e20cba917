#!/usr/bin/env bash
# make bench: every benchmark suite, each writing its report under bench/,
# then bench/report.sh: bench/REPORT.md and its plots from their JSON files.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench
for s in bench/*.sh; do
  # report.sh reads what the others write: it runs last.
  case "$(basename "$s")" in run.sh|lib.sh|report.sh) continue ;; esac
  echo "== $s"
  bash "$s"
done
echo "== matching"
go test ./canon ./matching/... -run '^$' -bench . -benchmem -cpu 1 -count 3 | tee bench/matching.txt
echo "== report (bench/REPORT.md, bench/report/*.svg)"
bash bench/report.sh
