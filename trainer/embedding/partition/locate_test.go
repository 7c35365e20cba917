package partition

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func locateTables() []Table {
	ada, _ := OptimizerByName("adagrad")
	lamb, _ := OptimizerByName("lamb")
	return []Table{
		{Name: "a", Vocab: 10, Dim: 8, Optimizer: ada, Valency: Valency{Mean: 1}},
		{Name: "b", Vocab: 7, Dim: 4, Optimizer: lamb, Valency: Valency{Mean: 1}},
	}
}

// a: 2 column shards × 3 block row parts; b: 2 cyclic row parts.
func locatePlan() *Plan {
	p := &Plan{SparseCores: 4, SparseCoresPerChip: 2}
	for k := 0; k < 3; k++ {
		p.Shards = append(p.Shards,
			Shard{Table: "a", ColFrom: 0, ColTo: 5, RowDist: RowsBlock, RowPart: k, RowParts: 3, SparseCore: k},
			Shard{Table: "a", ColFrom: 5, ColTo: 8, RowDist: RowsBlock, RowPart: k, RowParts: 3, SparseCore: 3 - k})
	}
	p.Shards = append(p.Shards,
		Shard{Table: "b", ColFrom: 0, ColTo: 4, RowDist: RowsCyclic, RowPart: 1, RowParts: 2, SparseCore: 0},
		Shard{Table: "b", ColFrom: 0, ColTo: 4, RowDist: RowsCyclic, RowPart: 0, RowParts: 2, SparseCore: 2})
	return p
}

func TestLocate(t *testing.T) {
	plan := locatePlan()
	if _, err := plan.Locate("a", 0); !errors.Is(err, ErrNotIndexed) {
		t.Fatalf("Locate before Validate: %v, want ErrNotIndexed", err)
	}
	if err := plan.Validate(locateTables()); err != nil {
		t.Fatal(err)
	}
	// Block parts of 10 rows in 3: [0,3), [3,6), [6,10).
	for _, c := range []struct {
		table     string
		row       int64
		part      int
		local     int64
		sparecore []int
	}{
		{"a", 0, 0, 0, []int{0, 3}},
		{"a", 2, 0, 2, []int{0, 3}},
		{"a", 3, 1, 0, []int{1, 2}},
		{"a", 6, 2, 0, []int{2, 1}},
		{"a", 9, 2, 3, []int{2, 1}},
		{"b", 0, 0, 0, []int{2}},
		{"b", 5, 1, 2, []int{0}},
		{"b", 6, 0, 3, []int{2}},
	} {
		ps, err := plan.Locate(c.table, c.row)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != len(c.sparecore) {
			t.Fatalf("Locate(%s, %d): %d placements, want %d", c.table, c.row, len(ps), len(c.sparecore))
		}
		for i, pl := range ps {
			s := plan.Shards[pl.Shard]
			if s.RowPart != c.part || pl.LocalRow != c.local || pl.SparseCore != c.sparecore[i] || pl.ColFrom != s.ColFrom || pl.ColTo != s.ColTo {
				t.Errorf("Locate(%s, %d)[%d] = %+v (shard %+v), want part %d local %d SparseCore %d", c.table, c.row, i, pl, s, c.part, c.local, c.sparecore[i])
			}
		}
	}
	for _, bad := range []struct {
		table string
		row   int64
		want  string
	}{{"a", 10, "no row 10"}, {"a", -1, "no row -1"}, {"zz", 0, `no table "zz"`}} {
		if _, err := plan.Locate(bad.table, bad.row); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Locate(%s, %d): %v, want %q", bad.table, bad.row, err, bad.want)
		}
	}
	// LocateAppend reuses the caller's buffer.
	buf := make([]Placement, 0, 4)
	ti, _ := plan.TableIndex("a")
	out, err := plan.LocateAppend(buf, ti, 4)
	if err != nil || len(out) != 2 || &out[0] != &buf[:1][0] {
		t.Errorf("LocateAppend: %v %v, want 2 placements in the given buffer", out, err)
	}
}

// A plan survives JSON: decoded, validated, it locates rows the same way.
func TestPlanJSONRoundTrip(t *testing.T) {
	plan := locatePlan()
	if err := plan.Validate(locateTables()); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"row_dist":"cyclic"`) {
		t.Errorf("row distribution not written by name: %s", data)
	}
	var back Plan
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(locateTables()); err != nil {
		t.Fatal(err)
	}
	for row := int64(0); row < 10; row++ {
		a, _ := plan.Locate("a", row)
		b, _ := back.Locate("a", row)
		if len(a) != len(b) || a[0] != b[0] || a[1] != b[1] {
			t.Fatalf("row %d: %v before, %v after the round trip", row, a, b)
		}
	}
	if err := json.Unmarshal([]byte(`{"shards":[{"row_dist":"diagonal"}]}`), &back); err == nil || !strings.Contains(err.Error(), "diagonal") {
		t.Errorf("unknown row_dist: %v", err)
	}
}

func TestPlanValidateErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"unknown table", func(p *Plan) { p.Shards[0].Table = "x" }, `unknown table "x"`},
		{"SparseCore out of range", func(p *Plan) { p.Shards[0].SparseCore = 4 }, "SparseCore 4 out of range"},
		{"columns missing", func(p *Plan) { p.Shards[1].ColTo = 7 }, "columns [7, 8) not placed"},
		{"columns overlap", func(p *Plan) { p.Shards[1].ColFrom = 4 }, "overlap"},
		{"column split of a row-wise optimizer", func(p *Plan) {
			p.Shards[6].ColTo = 2
			p.Shards = append(p.Shards, Shard{Table: "b", ColFrom: 2, ColTo: 4, RowDist: RowsCyclic, RowPart: 1, RowParts: 2})
		}, "not element-wise"},
		{"row parts disagree", func(p *Plan) { p.Shards[0].RowParts = 4 }, "disagree"},
		{"row part missing", func(p *Plan) { p.Shards = p.Shards[:6] }, `table "b"`},
		{"dist without parts", func(p *Plan) {
			for i := 6; i < 8; i++ {
				p.Shards[i].RowDist = RowsAll
			}
		}, "does not fit"},
		{"more parts than rows", func(p *Plan) {
			p.Shards = p.Shards[:6]
			for k := 0; k < 8; k++ {
				p.Shards = append(p.Shards, Shard{Table: "b", ColTo: 4, RowDist: RowsCyclic, RowPart: k, RowParts: 8})
			}
		}, "row_parts 8 out of range"},
		{"columns differ between parts", func(p *Plan) { p.Shards[0].ColTo, p.Shards[1].ColFrom = 4, 4 }, "splits columns differently"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := locatePlan()
			c.edit(plan)
			err := plan.Validate(locateTables())
			if err == nil || !errors.Is(err, ErrInvalidProblem) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want an ErrInvalidProblem mentioning %q", err, c.want)
			}
		})
	}
}

// Evaluate reports ErrOutOfMemory for a plan that overfills a chip, and
// RowSharding for a problem it cannot spread.
func TestEvaluateOutOfMemory(t *testing.T) {
	tables := locateTables()
	plan := locatePlan()
	p := &Problem{Tables: tables, BatchSize: 8, Topology: Topology{Chips: 2, SparseCoresPerChip: 2, HBMBytesPerChip: 200}}
	if err := Evaluate(p, plan); !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "chip") {
		t.Errorf("Evaluate on 200-byte chips: %v, want ErrOutOfMemory naming the chip", err)
	}
	p.Topology.HBMBytesPerChip = 1 << 20
	if err := Evaluate(p, plan); err != nil {
		t.Errorf("Evaluate with room: %v", err)
	}
	p.Topology.HBMBytesPerChip = 300
	if _, err := RowSharding(tables, p.Topology); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("RowSharding on 300-byte chips: %v, want ErrOutOfMemory", err)
	}
}

// TestShardRowCountAndTableRow: RowCount counts the rows HoldsRow accepts
// and TableRow maps each local row back to its table row.
func TestShardRowCountAndTableRow(t *testing.T) {
	for _, vocab := range []int64{1, 5, 17, 64} {
		for _, c := range []struct {
			dist  RowDist
			parts int
		}{{RowsAll, 1}, {RowsBlock, 3}, {RowsBlock, 7}, {RowsCyclic, 4}, {RowsCyclic, 7}} {
			for k := range c.parts {
				s := Shard{RowDist: c.dist, RowPart: k, RowParts: c.parts}
				var n int64
				for row := range vocab {
					local, ok := s.HoldsRow(vocab, row)
					if !ok {
						continue
					}
					n++
					if got := s.TableRow(vocab, local); got != row {
						t.Errorf("vocab %d %v part %d/%d: TableRow(%d) = %d, want %d", vocab, c.dist, k, c.parts, local, got, row)
					}
				}
				if got := s.RowCount(vocab); got != n {
					t.Errorf("vocab %d %v part %d/%d: RowCount = %d, HoldsRow accepts %d", vocab, c.dist, k, c.parts, got, n)
				}
			}
		}
	}
}
