package partition

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bruteForce is the optimum over the exact solver's search space by
// enumeration: every candidate layout of every table, every placement of
// its shards on distinct SparseCores within chip HBM. Only for tiny
// problems.
func bruteForce(cm *costModel) float64 {
	best := math.Inf(1)
	load := make([]float64, cm.nodes)
	mem := make([]int64, cm.topo.Chips)
	var rec func(t int)
	var place func(t int, specs []shardSpec, i int, used []bool)
	rec = func(t int) {
		if t == len(cm.tables) {
			m := 0.0
			for _, l := range load {
				m = math.Max(m, l)
			}
			best = math.Min(best, m)
			return
		}
		tm := cm.tables[t]
		for _, l := range tm.layouts {
			place(t, cm.shardSpecs(tm, l), 0, make([]bool, cm.nodes))
		}
	}
	place = func(t int, specs []shardSpec, i int, used []bool) {
		if i == len(specs) {
			rec(t + 1)
			return
		}
		s := specs[i]
		for j := range load {
			c := j / cm.perChip
			if used[j] || mem[c]+s.mem > cm.hbm {
				continue
			}
			used[j] = true
			load[j] += s.time
			mem[c] += s.mem
			place(t, specs, i+1, used)
			used[j] = false
			load[j] -= s.time
			mem[c] -= s.mem
		}
	}
	rec(0)
	return best
}

// tinySpec is a problem small enough for bruteForce.
func tinySpec(rng *rand.Rand) genSpec {
	g := modelSpec(1+rng.IntN(3), 1+rng.IntN(2), 1+rng.IntN(2), 2e5)
	g.vocabLo = 50
	g.dims = []int{4, 8, 16, 64}
	g.withRowFreq = true
	g.withMeasured = true
	g.withValencyDist = true
	g.batch = 256
	if rng.IntN(2) == 0 {
		g.shardOverheadNS = 0
	}
	g.hbm = int64(logUniform(rng, 1<<16, 1<<28))
	return g
}

const bruteIters = 300

// TestExactMatchesBruteForce checks the exact search (its bounds,
// symmetry breaking and layout dominance) against enumeration.
func TestExactMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	checked := 0
	iters := bruteIters
	if testing.Short() {
		iters = 60
	}
	for iter := 0; iter < iters; iter++ {
		p := genProblem(rng, tinySpec(rng))
		cm := newCostModel(p)
		if p.Validate() != nil || cm.prepare() != nil {
			continue
		}
		want := bruteForce(cm)
		plan, err := Solve(p, Options{Solver: Exact, NodeLimit: 1e7})
		if math.IsInf(want, 1) {
			if err == nil {
				t.Fatalf("iter %d: exact found a plan (cost %v), enumeration found none", iter, plan.CostNS)
			}
			continue
		}
		if err != nil {
			t.Fatalf("iter %d: exact: %v; enumeration found cost %v", iter, err, want)
		}
		if !plan.Optimal {
			t.Fatalf("iter %d: exact did not finish on a tiny problem (%d nodes)", iter, plan.Nodes)
		}
		if math.Abs(plan.CostNS-want) > 1e-9*want {
			t.Fatalf("iter %d: exact cost %v, enumeration %v (tables %d, SparseCores %d)", iter, plan.CostNS, want, len(p.Tables), cm.nodes)
		}
		checked++
	}
	if checked < iters/3 {
		t.Fatalf("only %d of %d random problems were usable", checked, iters)
	}
}
