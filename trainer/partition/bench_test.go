package partition

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkHeuristic500x64 partitions an Ads-like model of 500 tables over
// 64 SparseCores (16 chips of 4) with the heuristic. Target: under 2 s on one
// core, gap to the LP bound at most 5%. Reports the gap (percent), the load
// imbalance and the shard count.
func BenchmarkHeuristic500x64(b *testing.B) {
	p := genProblem(rand.New(rand.NewPCG(500, 64)), modelSpec(500, 16, 4, 1e7))
	var plan *Plan
	for b.Loop() {
		var err error
		plan, err = Solve(p, Options{Solver: Heuristic})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100*plan.Gap, "gap_%")
	b.ReportMetric(plan.LoadImbalance, "load_imbalance")
	b.ReportMetric(float64(len(plan.Shards)), "shards")
}

// BenchmarkExact20x8 partitions 20 tables over 8 SparseCores (2 chips of 4)
// with the exact solver. Target: gap 0 (proven optimal). Reports the gap
// (percent), whether it was proven optimal, and the nodes searched.
func BenchmarkExact20x8(b *testing.B) {
	p := genProblem(rand.New(rand.NewPCG(20, 8)), modelSpec(20, 2, 4, 1e6))
	var plan *Plan
	for b.Loop() {
		var err error
		plan, err = Solve(p, Options{Solver: Exact})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100*plan.Gap, "gap_%")
	optimal := 0.0
	if plan.Optimal {
		optimal = 1
	}
	b.ReportMetric(optimal, "optimal")
	b.ReportMetric(float64(plan.Nodes), "nodes")
}
