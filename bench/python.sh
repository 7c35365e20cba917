#!/usr/bin/env bash
# Benchmarks the Python client (python/sig_client) against the Go client
# (reader.Client) reading the same units, and writes bench/python.txt:
#
#   a local stack (sigd dev, workers, one reader; binaries built from the
#   tree) holding EVENTS Ads events in blocks of ROWS_PER_BLOCK rows,
#   ctr_small memoized; then, alternating COUNT times: `sigctl read` (the Go
#   client, every batch decoded, nothing written), and the Python client
#   reading through Arrow Flight as pyarrow RecordBatches, as numpy dicts,
#   through the JAX input iterator, through the PyTorch DataLoader adapter
#   (in the process, and with 2 fork-start workers) and through the tf.data
#   adapter. examples/s of one stream (wall) and CPU per example of the
#   client (its process, and its DataLoader workers).
#
# Needs the Python client's .venv (make python-venv, which this runs).
#
#   bench/python.sh                       # about five minutes
#   COUNT=3 EVENTS=100000 bench/python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
make -s python-venv
go build -o "${TMPDIR:-/tmp}/sig-bench-python-bin/" ./cmd/sigd ./cmd/sigctl ./cmd/reader
out=bench/python.txt
report=$(SIG_PY_BIN="${TMPDIR:-/tmp}/sig-bench-python-bin" SIG_MINIO_BIN=${SIG_MINIO_BIN:-$PWD/bin/minio} \
	.venv/bin/python bench/python_client.py)
{
	echo "# the Python client vs the Go client, same units, same run"
	echo "# command: bench/python.sh  (EVENTS=${EVENTS:-200000} ROWS_PER_BLOCK=${ROWS_PER_BLOCK:-50000} COUNT=${COUNT:-5})"
	echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  $(go version)  $(.venv/bin/python -c 'import sys, pyarrow; print("python", sys.version.split()[0], "pyarrow", pyarrow.__version__)')  commit $(git rev-parse --short HEAD)"
	echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')  ($(nproc) cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "$report"
} >"$out"
cat "$out"
echo "wrote $out" >&2
