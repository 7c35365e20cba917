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
// with the exact solver. Target: gap 0 (proven optimal) in under 30 s on one
// core; it takes about 9 million nodes, a few seconds. Reports the gap
// (percent), whether it was proven optimal, the nodes searched, the plan's
// cost (cost_us) and two slacks: the SparseCores' time left at that cost
// after the work of each table's cheapest layout (slack_cheapest_us, the
// slack of exact.go's search), and after the work the plan placed, layouts
// as chosen (slack_us).
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
	// The slack at the optimum (exact.go): what the SparseCores could
	// still take, all at the plan's cost, beyond the work placed.
	slack := float64(plan.SparseCores) * plan.CostNS
	for _, t := range plan.SparseCoreTimeNS {
		slack -= t
	}
	b.ReportMetric(slack/1e3, "slack_us")
	b.ReportMetric(plan.CostNS/1e3, "cost_us")
	// exact.go's slack at the optimum: each table at its cheapest layout.
	cm := newCostModel(p)
	if err := cm.prepare(); err != nil {
		b.Fatal(err)
	}
	cheapest := float64(cm.nodes) * plan.CostNS
	for _, tm := range cm.tables {
		cheapest -= tm.hull.minWork()
	}
	b.ReportMetric(cheapest/1e3, "slack_cheapest_us")
}

// BenchmarkExactSmall runs the exact solver on 8 random Ads-like problems of
// 8 tables over 4 SparseCores (default node limit) and reports the fraction
// proved optimal and the largest remaining gap (percent): where exact mode
// closes its gap.
func BenchmarkExactSmall(b *testing.B) {
	var problems []*Problem
	for seed := uint64(1); seed <= 8; seed++ {
		problems = append(problems, genProblem(rand.New(rand.NewPCG(seed, 99)), modelSpec(8, 1, 4, 1e6)))
	}
	var proved int
	var worst float64
	for b.Loop() {
		proved, worst = 0, 0
		for _, p := range problems {
			plan, err := Solve(p, Options{Solver: Exact})
			if err != nil {
				b.Fatal(err)
			}
			if plan.Optimal {
				proved++
			}
			worst = max(worst, plan.Gap)
		}
	}
	b.ReportMetric(float64(proved)/float64(len(problems)), "proved_fraction")
	b.ReportMetric(100*worst, "max_gap_%")
}

// TestExact20x8Optimal is the benchmark's target as a test: exact mode
// proves the 20-table, 8-SparseCore problem optimal, with default options,
// and the plan it returns costs what it claims.
func TestExact20x8Optimal(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of search")
	}
	p := genProblem(rand.New(rand.NewPCG(20, 8)), modelSpec(20, 2, 4, 1e6))
	plan, err := Solve(p, Options{Solver: Exact})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Optimal || plan.Gap != 0 {
		t.Fatalf("not proved optimal: gap %v, bound %v (%s), %d nodes", plan.Gap, plan.BoundNS, plan.BoundKind, plan.Nodes)
	}
	h, err := Solve(p, Options{Solver: Heuristic})
	if err != nil {
		t.Fatal(err)
	}
	if plan.CostNS > h.CostNS {
		t.Fatalf("exact plan costs %v, more than the heuristic's %v", plan.CostNS, h.CostNS)
	}
	if plan.BoundNS > plan.CostNS {
		t.Fatalf("bound %v above cost %v", plan.BoundNS, plan.CostNS)
	}
}
