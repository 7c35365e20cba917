#!/usr/bin/env bash
# Trainer benchmarks (issue 5). Writes bench/trainer.txt.
#  1. Input-stall fraction of trainer time (initial phase, from the goodput
#     accounting) when hosts scale their in-flight work units by buffer
#     fullness (paper IV.B) versus one unit in flight per host. Each reader
#     stream is paced to one reader task's capacity (see
#     trainer/bench_test.go): readers, hosts and controller share this
#     machine's CPUs, the paper's readers have their own machines.
#  2. Preemption notices at random moments of real runs, notices uniform in
#     [0, 1.5s]: preempted epochs that still commit (paper VII.G: 61%).
#  3. The virtual-time fleet: Table II (chips training / queued / on hold),
#     preempted epochs that commit, fleet goodput; seeds 1-3.
#  4. The CPU cost of one emulated step.
#  5. The goodput accounting (trainer/accounting/goodput): one Recorder Step call, and
#     Compute over 16 jobs x 1000 checkpointed stretches (a scrape or an
#     exit report).
set -euo pipefail
cd "$(dirname "$0")/.."
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## 1. input stall: buffer-driven in-flight units (scaling, 1..8) vs one unit in flight (fixed1)"
  go test ./trainer -run '^$' -bench 'InputStall' -benchtime 1x -count 3
  echo
  echo "## 2. preemption notices on real runs (notice uniform in [0, 1.5s], 6 runs per iteration)"
  go test ./trainer -run '^$' -bench 'PreemptionCommits' -benchtime 3x -count 1
  echo
  echo "## 3. fleet simulation (trainer fleet), seeds 1-3"
  go build -o /tmp/sig-bench-trainer ./cmd/trainer
  for s in 1 2 3; do
    /tmp/sig-bench-trainer fleet --seed "$s"
    echo
  done
  echo "## 4. one step of the emulated model (batch 512, ctr_small)"
  go test ./trainer/model -run '^$' -bench 'Step' -benchtime 2s -count 3
  echo
  echo "## 5. goodput accounting: one Recorder Step, Compute of 16 jobs x 1000 checkpointed stretches"
  go test ./trainer/accounting/goodput -run '^$' -bench . -benchmem -benchtime 1s -count 3
} 2>&1 | grep -v 'level=' | tee bench/trainer.txt
