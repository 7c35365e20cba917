#!/usr/bin/env bash
# make bench: every benchmark suite; each writes its report under bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench
for s in bench/*.sh; do
  case "$(basename "$s")" in run.sh|lib.sh) continue ;; esac
  echo "== $s"
  bash "$s"
done
echo "== matching"
go test ./matching/... -run '^$' -bench . -benchmem -cpu 1 -count 3 | tee bench/matching.txt
