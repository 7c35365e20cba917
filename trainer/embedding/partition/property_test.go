package partition

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// smallSpec is a random problem small enough to check cell by cell: up to
// eight tables, up to a few thousand rows, up to 3 chips of up to 4
// SparseCores, HBM from tight to ample.
func smallSpec(rng *rand.Rand) genSpec {
	g := modelSpec(1+rng.IntN(8), 1+rng.IntN(3), 1+rng.IntN(4), 3000)
	g.vocabLo = 1
	g.dims = []int{1, 3, 8, 16, 17, 64, 100}
	g.withRowFreq = true
	g.withMeasured = true
	g.withValencyDist = true
	g.batch = 1 + rng.IntN(2048)
	g.shardOverheadNS = []float64{0, 10, 1000}[rng.IntN(3)]
	g.lookupOverheadNS = []float64{0, 0.1, 5}[rng.IntN(3)]
	g.accessGranularity = []int{1, 32, 64, 256}[rng.IntN(4)]
	g.hbm = int64(logUniform(rng, 1<<14, 1<<26))
	return g
}

// checkPlan verifies a plan from first principles, without the code that
// built it: every cell (row, column) of every table is on exactly one shard,
// shards and Locate agree, column splits only for element-wise optimizers,
// chip HBM is respected, the load imbalance is Eq. 1 of the per-SparseCore
// bytes and at least 1, and the bound is at most the cost.
func checkPlan(t *testing.T, p *Problem, plan *Plan) {
	t.Helper()
	N := p.Topology.SparseCores()
	byName := map[string]*Table{}
	for i := range p.Tables {
		byName[p.Tables[i].Name] = &p.Tables[i]
	}
	cover := map[string][]int{}
	for i := range p.Tables {
		tb := &p.Tables[i]
		cover[tb.Name] = make([]int, tb.Vocab*int64(tb.Dim))
	}
	chipMem := make([]int64, p.Topology.Chips)
	scBytes := make([]float64, N)
	for si, s := range plan.Shards {
		tb := byName[s.Table]
		if tb == nil {
			t.Fatalf("shard %d: unknown table %q", si, s.Table)
		}
		if s.SparseCore < 0 || s.SparseCore >= N {
			t.Fatalf("shard %d: SparseCore %d out of range", si, s.SparseCore)
		}
		if s.ColTo-s.ColFrom < tb.Dim && !tb.Optimizer.ElementWise {
			t.Errorf("table %q: column split with non-element-wise optimizer %q", tb.Name, tb.Optimizer.Name)
		}
		var rows int64
		for r := int64(0); r < tb.Vocab; r++ {
			if _, ok := s.HoldsRow(tb.Vocab, r); !ok {
				continue
			}
			rows++
			for c := s.ColFrom; c < s.ColTo; c++ {
				cover[tb.Name][r*int64(tb.Dim)+int64(c)]++
			}
		}
		if rows != s.Rows {
			t.Errorf("shard %d: holds %d rows, reports %d", si, rows, s.Rows)
		}
		w := int64(s.ColTo - s.ColFrom)
		e := int64(tb.bytesPerElement())
		mem := rows * (w*e*int64(1+tb.Optimizer.SlotsPerElement) + 4*int64(tb.Optimizer.SlotsPerRow))
		chipMem[s.SparseCore/p.Topology.SparseCoresPerChip] += mem
		scBytes[s.SparseCore] += s.Bytes
	}
	for name, cells := range cover {
		for i, n := range cells {
			if n != 1 {
				tb := byName[name]
				t.Fatalf("table %q row %d column %d is on %d shards, want 1", name, int64(i)/int64(tb.Dim), int64(i)%int64(tb.Dim), n)
			}
		}
	}
	var maxMem int64
	for c, m := range chipMem {
		if m > p.Topology.HBMBytesPerChip {
			t.Errorf("chip %d holds %d bytes, HBM is %d", c, m, p.Topology.HBMBytesPerChip)
		}
		maxMem = max(maxMem, m)
	}
	if maxMem != plan.MaxHBMBytesPerChip {
		t.Errorf("max HBM per chip %d, plan reports %d", maxMem, plan.MaxHBMBytesPerChip)
	}
	var sum, mx float64
	for _, b := range scBytes {
		sum += b
		mx = math.Max(mx, b)
	}
	if sum > 0 {
		if li := float64(N) * mx / sum; math.Abs(li-plan.LoadImbalance) > 1e-9*li {
			t.Errorf("load imbalance %v, Eq. 1 gives %v", plan.LoadImbalance, li)
		}
	}
	if plan.LoadImbalance < 1 {
		t.Errorf("load imbalance %v < 1", plan.LoadImbalance)
	}
	if !(plan.BoundNS <= plan.CostNS) || plan.BoundNS < 0 {
		t.Errorf("bound %v not in [0, cost %v]", plan.BoundNS, plan.CostNS)
	}
	if !(plan.Gap >= 0 && plan.Gap < 1) {
		t.Errorf("gap %v not in [0, 1)", plan.Gap)
	}
	// Locate agrees with the shards.
	rng := rand.New(rand.NewPCG(uint64(len(plan.Shards)), 1))
	for i := range p.Tables {
		tb := &p.Tables[i]
		for k := 0; k < 20; k++ {
			row := rng.Int64N(tb.Vocab)
			ps, err := plan.Locate(tb.Name, row)
			if err != nil {
				t.Fatal(err)
			}
			at := 0
			for _, pl := range ps {
				s := &plan.Shards[pl.Shard]
				local, ok := s.HoldsRow(tb.Vocab, row)
				if !ok || local != pl.LocalRow || local >= s.Rows || pl.SparseCore != s.SparseCore || pl.ColFrom != at || s.Table != tb.Name {
					t.Fatalf("Locate(%q, %d) = %+v, inconsistent with shard %+v", tb.Name, row, pl, *s)
				}
				at = pl.ColTo
			}
			if at != tb.Dim {
				t.Fatalf("Locate(%q, %d) covers columns [0, %d), want [0, %d)", tb.Name, row, at, tb.Dim)
			}
		}
	}
}

func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	planned, oom := 0, 0
	iters := 150
	if testing.Short() {
		iters = 40
	}
	for iter := 0; iter < iters; iter++ {
		p := genProblem(rng, smallSpec(rng))
		if rng.IntN(2) == 0 {
			// Tight memory: all chips together hold 1.0 to 1.6 times the
			// tables, so placement must respect HBM to succeed.
			var total int64
			for _, tb := range p.Tables {
				total += tb.HBMBytes()
			}
			p.Topology.HBMBytesPerChip = max(1, int64(float64(total)*(1+0.6*rng.Float64()))/int64(p.Topology.Chips))
		}
		var costs [2]float64
		for k, solver := range []Solver{Heuristic, Exact} {
			plan, err := Solve(p, Options{Solver: solver, NodeLimit: 20000, Seed: uint64(iter)})
			if errors.Is(err, ErrOutOfMemory) {
				oom++
				if solver == Heuristic {
					// The heuristic's out-of-memory must be real: the exact
					// search, which enforces HBM itself, must not find a plan
					// (a memory-blind heuristic would fail here).
					if ex, exErr := Solve(p, Options{Solver: Exact, NodeLimit: 200000}); exErr == nil {
						t.Errorf("iter %d: heuristic reported %v, exact found a plan (max HBM %d of %d)",
							iter, err, ex.MaxHBMBytesPerChip, p.Topology.HBMBytesPerChip)
					}
				}
				break
			}
			if err != nil {
				t.Fatalf("iter %d %s: %v", iter, solver, err)
			}
			planned++
			checkPlan(t, p, plan)
			costs[k] = plan.CostNS
			if k == 1 && costs[1] > costs[0]*(1+1e-12) {
				t.Errorf("iter %d: exact cost %v worse than heuristic %v", iter, costs[1], costs[0])
			}
		}
		if t.Failed() {
			t.Fatalf("iter %d failed (tables %d, %d chips × %d)", iter, len(p.Tables), p.Topology.Chips, p.Topology.SparseCoresPerChip)
		}
	}
	t.Logf("%d plans checked, %d out-of-memory results", planned, oom)
	if planned < iters || oom == 0 {
		// Both outcomes must be exercised, or the generator drifted.
		t.Fatalf("%d plans, %d out-of-memory results: generator no longer covers both", planned, oom)
	}
}

// Problems whose tables need more HBM than all chips hold are always
// reported as ErrOutOfMemory, by both solvers.
func TestOutOfMemoryIsReported(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 50; iter++ {
		p := genProblem(rng, smallSpec(rng))
		var total int64
		for _, tb := range p.Tables {
			total += tb.HBMBytes()
		}
		// Just too little HBM: chips·hbm < total.
		p.Topology.HBMBytesPerChip = (total - 1) / int64(p.Topology.Chips)
		if p.Topology.HBMBytesPerChip <= 0 {
			continue
		}
		for _, solver := range []Solver{Heuristic, Exact} {
			if _, err := Solve(p, Options{Solver: solver, NodeLimit: 1000}); !errors.Is(err, ErrOutOfMemory) {
				t.Fatalf("iter %d %s: tables need %d bytes, chips hold %d: got %v, want ErrOutOfMemory",
					iter, solver, total, int64(p.Topology.Chips)*p.Topology.HBMBytesPerChip, err)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 20; iter++ {
		p := genProblem(rng, smallSpec(rng))
		for _, solver := range []Solver{Heuristic, Exact} {
			a, errA := Solve(p, Options{Solver: solver, NodeLimit: 5000, Seed: 9})
			b, errB := Solve(p, Options{Solver: solver, NodeLimit: 5000, Seed: 9})
			if (errA == nil) != (errB == nil) {
				t.Fatalf("iter %d %s: errors differ: %v vs %v", iter, solver, errA, errB)
			}
			if errA != nil {
				continue
			}
			if !reflect.DeepEqual(a.Shards, b.Shards) || a.CostNS != b.CostNS {
				t.Fatalf("iter %d %s: two solves of one problem differ", iter, solver)
			}
		}
	}
}

// The large-model path: 200 Ads-like tables over 32 SparseCores, checked
// for the properties that do not need cell-by-cell enumeration.
func TestHeuristicLargeModel(t *testing.T) {
	p := genProblem(rand.New(rand.NewPCG(200, 32)), modelSpec(200, 8, 4, 1e7))
	plan, err := Solve(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Gap > 0.05 {
		t.Errorf("gap %v to the LP bound, want at most 5%%", plan.Gap)
	}
	for c, m := range plan.ChipHBMBytes {
		if m > p.Topology.HBMBytesPerChip {
			t.Errorf("chip %d over HBM", c)
		}
	}
	if plan.LoadImbalance < 1 || plan.BoundNS > plan.CostNS {
		t.Errorf("imbalance %v, bound %v, cost %v", plan.LoadImbalance, plan.BoundNS, plan.CostNS)
	}
}
