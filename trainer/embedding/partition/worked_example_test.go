package partition

import (
	"math"
	"os"
	"testing"
)

// workedExample is the paper's example (VII.D): two tables of 4 rows × 64
// columns on 4 SparseCores, each table's rows looked up 0.6, 0.3, 0.2 and 0.1
// times per batch after deduplication.
func workedExample() *Problem {
	lookups := []float64{0.6, 0.3, 0.2, 0.1}
	sgd, _ := OptimizerByName("sgd")
	tb := func(name string) Table {
		return Table{
			Name: name, Vocab: 4, Dim: 64, Optimizer: sgd,
			Valency:  Valency{Mean: 1},
			Measured: &Measured{RowLookups: lookups},
		}
	}
	return &Problem{
		Tables: []Table{tb("T1"), tb("T2")},
		Topology: Topology{
			Chips: 1, SparseCoresPerChip: 4, HBMBytesPerChip: 1 << 20,
			LookupOverheadNS: DefaultLookupOverheadNS, ShardOverheadNS: DefaultShardOverheadNS,
		},
		BatchSize: 1,
	}
}

func TestWorkedExampleRowPartitioning(t *testing.T) {
	p := workedExample()
	plan, err := RowSharding(p.Tables, p.Topology)
	if err != nil {
		t.Fatal(err)
	}
	if err := Evaluate(p, plan); err != nil {
		t.Fatal(err)
	}
	// Each row on its own SparseCore: SC0 gets row 0 of both tables,
	// 4 × 0.6 / (0.6+0.3+0.2+0.1) = 2.
	if math.Abs(plan.LoadImbalance-2) > 1e-12 {
		t.Errorf("row partitioning: load imbalance %v, want 2", plan.LoadImbalance)
	}
	for _, s := range plan.Shards {
		if s.RowParts != 4 || s.RowDist != RowsCyclic || s.SparseCore != s.RowPart || s.ColTo-s.ColFrom != 64 {
			t.Errorf("row sharding shard %+v: want row part k of 4 on SparseCore k, all columns", s)
		}
	}
}

func TestWorkedExampleTableAndColumnPartitioning(t *testing.T) {
	p := workedExample()
	// The paper's plan: T1 on SC0 and SC1, T2 on SC2 and SC3, columns
	// 0-31 on SC0 and SC2, columns 32-63 on SC1 and SC3.
	plan := &Plan{SparseCores: 4, SparseCoresPerChip: 4, Shards: []Shard{
		{Table: "T1", ColFrom: 0, ColTo: 32, RowParts: 1, SparseCore: 0},
		{Table: "T1", ColFrom: 32, ColTo: 64, RowParts: 1, SparseCore: 1},
		{Table: "T2", ColFrom: 0, ColTo: 32, RowParts: 1, SparseCore: 2},
		{Table: "T2", ColFrom: 32, ColTo: 64, RowParts: 1, SparseCore: 3},
	}}
	if err := Evaluate(p, plan); err != nil {
		t.Fatal(err)
	}
	if plan.LoadImbalance != 1 {
		t.Errorf("table+column partitioning: load imbalance %v, want 1", plan.LoadImbalance)
	}
}

func TestWorkedExampleSolversFindTableAndColumn(t *testing.T) {
	for _, overheads := range []bool{true, false} {
		for _, solver := range []Solver{Heuristic, Exact} {
			p := workedExample()
			if !overheads { // the pure byte model of the paper's arithmetic
				p.Topology.LookupOverheadNS, p.Topology.ShardOverheadNS = 0, 0
			}
			plan, err := Solve(p, Options{Solver: solver})
			if err != nil {
				t.Fatalf("%s: %v", solver, err)
			}
			if math.Abs(plan.LoadImbalance-1) > 1e-12 {
				t.Errorf("%s overheads=%v: load imbalance %v, want 1", solver, overheads, plan.LoadImbalance)
			}
			if solver == Exact && !plan.Optimal {
				t.Errorf("exact: not proved optimal (gap %v)", plan.Gap)
			}
			if !overheads {
				continue // column splits of any width tie without overheads
			}
			// With the per-shard overhead, two column halves per table,
			// one per SparseCore, is strictly best.
			used := map[int]bool{}
			for _, l := range plan.Layouts {
				if l.Strategy != "column" || l.ColSplits != 2 || l.RowParts != 1 {
					t.Errorf("%s: table %s has layout %+v, want 2 column shards", solver, l.Table, l)
				}
				for _, si := range l.Shards {
					sc := plan.Shards[si].SparseCore
					if used[sc] {
						t.Errorf("%s: SparseCore %d holds two shards", solver, sc)
					}
					used[sc] = true
				}
			}
			if plan.Gap != 0 {
				t.Errorf("%s: gap %v, want 0 (the plan meets the LP bound)", solver, plan.Gap)
			}
		}
	}
}

// The example configuration shipped in examples/ is the same problem.
func TestWorkedExampleConfigFile(t *testing.T) {
	data, err := os.ReadFile("../../../examples/partition/worked_example.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := RowSharding(p.Tables, p.Topology)
	if err != nil {
		t.Fatal(err)
	}
	if err := Evaluate(p, rows); err != nil {
		t.Fatal(err)
	}
	plan, err := Solve(p, Options{Solver: Exact})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rows.LoadImbalance-2) > 1e-12 || math.Abs(plan.LoadImbalance-1) > 1e-12 {
		t.Errorf("example file: row sharding imbalance %v (want 2), solved %v (want 1)", rows.LoadImbalance, plan.LoadImbalance)
	}
}
