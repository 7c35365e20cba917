#!/usr/bin/env bash
# The bench report (issue 18): `sigctl report` reads the JSON files the
# suites wrote under bench/ (fleet-run.json, fleet-full.json,
# fleet-full-default.json, scale.json,
# fleet.json, preemption.json, embeddings.json) and writes bench/REPORT.md
# with its SVG plots in bench/report/. bench/run.sh runs it last, after
# every suite, so that `make bench` ends with a report of what it measured;
# run it alone to refresh the report from the files present. A file that is
# not there is a section saying which command writes it.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o /tmp/sig-bench-sigctl ./cmd/sigctl
/tmp/sig-bench-sigctl report --bench bench
