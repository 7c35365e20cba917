package model

import (
	"fmt"
	"testing"

	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/transform"
)

// TestAnyPlanIsBitIdentical is the execution-on-the-plan check (paper V.A):
// the real lookups and updates follow the plan's shards, and whatever the
// plan — cyclic row sharding, block rows, column splits, column+row grids,
// the partitioner's own solved plan — every loss, every unique-row count and
// every parameter after training is bit-identical to an unpartitioned
// reference, with tables of different shapes, in serialized mode and with
// stale embedding gradients (pipelined mode, V.C).
func TestAnyPlanIsBitIdentical(t *testing.T) {
	f, ex := adsExamples(t, "ctr_wide", 3, 2400)
	base := Config{Features: f, Vocab: 1000, Dim: 8, Seed: 9}
	// Five sparse inputs (overlap, title_ids, category_ids, geo_device,
	// price_bin) with their own shapes.
	base.Shapes = []Shape{{Vocab: 997, Dim: 12}, {Vocab: 4096, Dim: 5}, {Vocab: 64, Dim: 16}, {Dim: 3}, {Vocab: 7, Dim: 1}}
	if len(f.Sparse) != len(base.Shapes) {
		t.Fatalf("ctr_wide has %d sparse inputs", len(f.Sparse))
	}
	tables := base.Tables()
	topo := partition.Topology{Chips: 2, SparseCoresPerChip: 2, HBMBytesPerChip: 1 << 30, ShardOverheadNS: 50, LookupOverheadNS: 0.1}
	rows, err := partition.RowSharding(tables, topo)
	if err != nil {
		t.Fatal(err)
	}
	// Hand-made: table 0 in 3 block row parts, table 1 a 2x2 column+row
	// (cyclic) grid with uneven column ranges, table 2 column-split in 3,
	// the rest whole on SparseCore 3.
	var grid []partition.Shard
	for k := 0; k < 2; k++ {
		tb := tables[1]
		grid = append(grid,
			partition.Shard{Table: tb.Name, ColFrom: 0, ColTo: 2, RowDist: partition.RowsCyclic, RowPart: k, RowParts: 2, SparseCore: 2 * k},
			partition.Shard{Table: tb.Name, ColFrom: 2, ColTo: tb.Dim, RowDist: partition.RowsCyclic, RowPart: k, RowParts: 2, SparseCore: 2*k + 1})
	}
	hybrid := handMadePlan(tables, map[int][]partition.Shard{
		0: blockRows(tables[0], 3),
		1: grid,
		2: columnSplit(tables[2], 0, 5, 11, 16),
	})
	probTables := append([]partition.Table(nil), tables...)
	probTables[1].Valency = partition.Valency{Mean: 8}
	solved, err := partition.Solve(&partition.Problem{Tables: probTables, Topology: topo, BatchSize: 200}, partition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	strategies := map[string]bool{}
	for _, l := range solved.Layouts {
		strategies[l.Strategy] = true
	}
	t.Logf("solved plan: %d shards, strategies %v, modelled load imbalance %.3f", len(solved.Shards), strategies, solved.LoadImbalance)

	for _, stale := range []bool{false, true} {
		ref := base
		ref.StaleEmbeddingGradients = stale
		for _, pc := range []struct {
			name string
			plan *partition.Plan
		}{{"row-sharding", rows}, {"hybrid", hybrid}, {"solved", solved}} {
			checkPlanBitIdentical(t, fmt.Sprintf("%s stale=%v", pc.name, stale), ref, pc.plan, ex)
		}
	}
}

// checkPlanBitIdentical trains an unpartitioned model of ref and one placed
// by plan on the same batches of 200 examples of ex: initial parameters,
// every step's loss and unique and value counts, and the trained parameters
// must be bit-identical, and every SparseCore of the plan must move bytes.
func checkPlanBitIdentical(t *testing.T, name string, ref Config, plan *partition.Plan, ex *Examples) {
	t.Helper()
	cfg := ref
	cfg.Plan = plan
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r0, err := New(ref)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustMarshal(t, r0), mustMarshal(t, m); string(a) != string(b) {
		t.Fatalf("%s: initial parameters differ", name)
	}
	sawSC := make([]bool, plan.SparseCores)
	for i := 0; i+200 <= ex.Len(); i += 200 {
		b := ex.Slice(i, i+200)
		a, err := r0.Step(b)
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.Step(b)
		if err != nil {
			t.Fatal(err)
		}
		if a.Loss != c.Loss || a.Unique != c.Unique || a.Values != c.Values {
			t.Fatalf("%s: step %d: loss %v vs %v, unique %d vs %d", name, i/200, a.Loss, c.Loss, a.Unique, c.Unique)
		}
		for sc, by := range c.Work.SparseCoreBytes {
			if by > 0 {
				sawSC[sc] = true
			}
		}
	}
	for sc, ok := range sawSC {
		if !ok {
			t.Errorf("%s: SparseCore %d moved no bytes: the plan was not followed", name, sc)
		}
	}
	if a, b := mustMarshal(t, r0), mustMarshal(t, m); string(a) != string(b) {
		t.Fatalf("%s: parameters differ from the unpartitioned model", name)
	}
}

func mustMarshal(t *testing.T, m *Model) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWorkFollowsPlan checks the per-SparseCore work a step reports against
// the plan by hand: one table of 8 rows, width 32, split into two column
// ranges [0,16) on SparseCore 0 and [16,32) on SparseCore 1; a batch looking
// up rows 1, 1 and 5 gathers 2 unique rows, each a 64-byte slice on both
// SparseCores: 2 lookups and 2·3·64 bytes each, and one shard each.
func TestWorkFollowsPlan(t *testing.T) {
	f, err := NewFeatures([]Input{{Name: "ids", Type: transform.ListInt64}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Features: f, Vocab: 8, Dim: 32}
	tb := cfg.Tables()[0]
	plan := &partition.Plan{SparseCores: 2, SparseCoresPerChip: 2, Shards: []partition.Shard{
		{Table: tb.Name, ColFrom: 0, ColTo: 16, RowParts: 1, SparseCore: 0},
		{Table: tb.Name, ColFrom: 16, ColTo: 32, RowParts: 1, SparseCore: 1},
	}}
	cfg.Plan = plan
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := NewExamples(f)
	b.EventIDs, b.Labels = []int64{1, 2}, []float32{0, 1}
	b.Sparse[0] = SparseColumn{Offsets: []int32{0, 2, 3}, IDs: []uint64{1, 9, 5}} // 9 mod 8 = 1
	res, err := m.Step(b)
	if err != nil {
		t.Fatal(err)
	}
	w := res.Work
	for sc := 0; sc < 2; sc++ {
		if w.SparseCoreBytes[sc] != 2*3*64 || w.SparseCoreLookups[sc] != 2 || w.SparseCoreShards[sc] != 1 {
			t.Errorf("SparseCore %d: %v bytes, %v lookups, %d shards", sc, w.SparseCoreBytes[sc], w.SparseCoreLookups[sc], w.SparseCoreShards[sc])
		}
	}
	if res.Values != 3 || res.Unique != 2 || res.PoolingFLOPs != 2*32*3 {
		t.Errorf("values %d unique %d pooling FLOPs %v", res.Values, res.Unique, res.PoolingFLOPs)
	}
}

// handMadePlan is a plan on 4 SparseCores, 2 a chip, written by hand: table
// i has the shards byTable[i], or is whole on SparseCore 3.
func handMadePlan(tables []partition.Table, byTable map[int][]partition.Shard) *partition.Plan {
	p := &partition.Plan{SparseCores: 4, SparseCoresPerChip: 2}
	for i, tb := range tables {
		shards, ok := byTable[i]
		if !ok {
			shards = []partition.Shard{{Table: tb.Name, ColTo: tb.Dim, RowParts: 1, SparseCore: 3}}
		}
		p.Shards = append(p.Shards, shards...)
	}
	return p
}

// blockRows is tb in n block row parts, part k on SparseCore k.
func blockRows(tb partition.Table, n int) []partition.Shard {
	var out []partition.Shard
	for k := 0; k < n; k++ {
		out = append(out, partition.Shard{Table: tb.Name, ColTo: tb.Dim, RowDist: partition.RowsBlock, RowPart: k, RowParts: n, SparseCore: k})
	}
	return out
}

// columnSplit is tb split into the column ranges between consecutive
// bounds, range c on SparseCore c+1.
func columnSplit(tb partition.Table, bounds ...int) []partition.Shard {
	var out []partition.Shard
	for c := 0; c+1 < len(bounds); c++ {
		out = append(out, partition.Shard{Table: tb.Name, ColFrom: bounds[c], ColTo: bounds[c+1], RowParts: 1, SparseCore: c + 1})
	}
	return out
}
