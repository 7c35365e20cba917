#!/usr/bin/env bash
# Trainer benchmarks (issue 5). Writes bench/trainer.txt.
#  1. Input-stall fraction of trainer time (initial phase, from the goodput
#     accounting) when hosts scale their in-flight work units by buffer
#     fullness (paper IV.B) versus one unit in flight per host. Each reader
#     stream is paced to one reader task's capacity (see
#     trainer/bench_test.go): readers, hosts and controller share this
#     machine's CPUs, the paper's readers have their own machines.
#  2. Preemption notices at random moments of real runs: the preempted epochs
#     that still commit with notices uniform in [0, 1.5s] (paper VII.G: 61%;
#     the 1.5 s is a choice and decides the fraction), every run's time from
#     notice to committed checkpoint with notices that never bind (the
#     fraction under any notice bound, swept), and a complete job's program
#     goodput and input stall. Writes bench/preemption.json (figures and the
#     measurements the fleet simulation takes) and prints its figures.
#  3. The virtual-time fleet (every figure modelled, printed with its
#     constants, their sources and sweeps), seeds 1-8: first fed with this
#     system's measurements from bench/preemption.json (program goodput,
#     input stall, notice-to-checkpoint times; bench/fleet.json), then with
#     the defaults alone (bench/fleet-defaults.json).
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
  echo "## 2. preemption notices on real runs: 18 runs with notices uniform in [0, 1.5s], 8 with 30s notices, one complete job"
  SIG_BENCH_PREEMPTION_JSON="$PWD/bench/preemption.json" go test ./trainer -run '^$' -bench 'PreemptionCommits' -benchtime 1x -count 1
  go build -o /tmp/sig-bench-trainer ./cmd/trainer
  echo
  echo "figures of bench/preemption.json (trainer figures):"
  /tmp/sig-bench-trainer figures bench/preemption.json
  echo
  echo "## 3a. fleet simulation fed with this system's measurements (trainer fleet --measured bench/preemption.json), seeds 1-8"
  /tmp/sig-bench-trainer fleet --seeds 8 --measured bench/preemption.json --report bench/fleet.json
  echo
  echo "## 3b. fleet simulation with its default constants only (trainer fleet), seeds 1-8"
  /tmp/sig-bench-trainer fleet --seeds 8 --report bench/fleet-defaults.json
  echo
  echo "## 4. one step of the emulated model (batch 512, ctr_small)"
  go test ./trainer/model -run '^$' -bench 'Step' -benchtime 2s -count 3
  echo
  echo "## 5. goodput accounting: one Recorder Step, Compute of 16 jobs x 1000 checkpointed stretches"
  go test ./trainer/accounting/goodput -run '^$' -bench . -benchmem -benchtime 1s -count 3
} 2>&1 | grep -v 'level=' | tee bench/trainer.txt
