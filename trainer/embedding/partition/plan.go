package partition

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sigdata/sig/internal/units"
)

// RowDist says how a table's rows are split into row parts (paper V.A).
type RowDist uint8

const (
	// RowsAll: the table is not row partitioned; its one row part holds
	// every row.
	RowsAll RowDist = iota
	// RowsBlock: part k of K holds the contiguous rows
	// [⌊k·V/K⌋, ⌊(k+1)·V/K⌋). Places the hottest rows of a frequency-sorted
	// vocabulary together.
	RowsBlock
	// RowsCyclic: part k of K holds rows k, k+K, k+2K, ..., spreading the
	// hottest rows over all parts.
	RowsCyclic
)

func (d RowDist) String() string {
	switch d {
	case RowsAll:
		return "all"
	case RowsBlock:
		return "block"
	case RowsCyclic:
		return "cyclic"
	}
	return fmt.Sprintf("RowDist(%d)", uint8(d))
}

// MarshalText writes "all", "block" or "cyclic".
func (d RowDist) MarshalText() ([]byte, error) {
	if d > RowsCyclic {
		return nil, fmt.Errorf("partition: bad RowDist %d", uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads "all", "block" or "cyclic".
func (d *RowDist) UnmarshalText(b []byte) error {
	switch string(b) {
	case "all":
		*d = RowsAll
	case "block":
		*d = RowsBlock
	case "cyclic":
		*d = RowsCyclic
	default:
		return fmt.Errorf("partition: unknown row distribution %q (want all, block or cyclic)", b)
	}
	return nil
}

// Shard is one piece of one table placed on one SparseCore: the columns
// [ColFrom, ColTo) of the rows in row part RowPart of RowParts.
type Shard struct {
	Table      string  `json:"table"`
	ColFrom    int     `json:"col_from"`
	ColTo      int     `json:"col_to"`
	RowDist    RowDist `json:"row_dist"`
	RowPart    int     `json:"row_part"`
	RowParts   int     `json:"row_parts"`
	SparseCore int     `json:"sparsecore"`

	// Filled by the cost model (Evaluate).
	Rows       int64   `json:"rows"`
	HBMBytes   int64   `json:"hbm_bytes"`
	UniqueRows float64 `json:"unique_rows_per_batch"`
	Bytes      float64 `json:"bytes_per_step"`
	TimeNS     float64 `json:"time_ns"`
}

// HoldsRow reports whether the shard's row part holds row and, if so, the
// row's index inside the shard.
func (s *Shard) HoldsRow(vocab, row int64) (local int64, ok bool) {
	if row < 0 || row >= vocab {
		return 0, false
	}
	switch s.RowDist {
	case RowsBlock:
		first, n := partRange(vocab, RowsBlock, s.RowPart, s.RowParts)
		if row >= first && row < first+n {
			return row - first, true
		}
		return 0, false
	case RowsCyclic:
		K := int64(s.RowParts)
		if row%K == int64(s.RowPart) {
			return row / K, true
		}
		return 0, false
	default:
		return row, true
	}
}

// RowCount is the number of table rows the shard's row part holds.
func (s *Shard) RowCount(vocab int64) int64 {
	_, n := partRange(vocab, s.RowDist, s.RowPart, s.RowParts)
	return n
}

// TableRow is the table row of the shard's local row (the inverse of
// HoldsRow).
func (s *Shard) TableRow(vocab, local int64) int64 {
	first, _ := partRange(vocab, s.RowDist, s.RowPart, s.RowParts)
	if s.RowDist == RowsCyclic {
		return first + local*int64(s.RowParts)
	}
	return first + local
}

// Layout summarizes how one table is split. Shards[k*ColSplits+i] is the
// index in Plan.Shards of row part k, column range i.
type Layout struct {
	Table     string  `json:"table"`
	Vocab     int64   `json:"vocab"`
	Dim       int     `json:"dim"`
	ColSplits int     `json:"col_splits"`
	RowParts  int     `json:"row_parts"`
	RowDist   RowDist `json:"row_dist"`
	// Strategy is the paper's name for the split: "table", "column", "row"
	// or "column+row" (V.A, Figure 4).
	Strategy string `json:"strategy"`
	Shards   []int  `json:"shards"`
}

func strategyName(cols, parts int) string {
	switch {
	case cols == 1 && parts == 1:
		return "table"
	case parts == 1:
		return "column"
	case cols == 1:
		return "row"
	}
	return "column+row"
}

// Report is what a plan costs under the model. Times are SparseCore
// nanoseconds per step.
type Report struct {
	// CostNS is the largest SparseCore time: the step's embedding time.
	CostNS float64 `json:"cost_ns"`
	// BoundNS is a lower bound on CostNS over every plan in the search
	// space; Gap = (CostNS - BoundNS) / CostNS.
	BoundNS   float64 `json:"bound_ns"`
	BoundKind string  `json:"bound_kind"`
	Gap       float64 `json:"gap"`
	// LoadImbalance is N·max_i B_i / Σ_i B_i over the bytes B_i each
	// SparseCore accesses (paper Eq. 1).
	LoadImbalance      float64   `json:"load_imbalance"`
	MaxHBMBytesPerChip int64     `json:"max_hbm_bytes_per_chip"`
	HBMBytesPerChip    int64     `json:"hbm_bytes_per_chip"`
	SparseCoreBytes    []float64 `json:"sparsecore_bytes_per_step"`
	SparseCoreTimeNS   []float64 `json:"sparsecore_time_ns"`
	ChipHBMBytes       []int64   `json:"chip_hbm_bytes"`
	// Solver is "heuristic", "exact" or "row-sharding". Optimal is set
	// when the exact solver proved the plan optimal within its search space;
	// Nodes counts its branch-and-bound nodes.
	Solver    string        `json:"solver"`
	Optimal   bool          `json:"optimal"`
	Nodes     int64         `json:"nodes,omitempty"`
	SolveTime time.Duration `json:"-"`
}

// Plan places every row and column of every table on exactly one
// SparseCore. The trainer executes embedding lookups by following it: Locate
// gives, for (table, row), the shards holding the row's column ranges.
//
// A Plan returned by Solve or RowSharding is validated and indexed. A Plan
// built by hand or decoded from JSON must be validated with Validate before
// Locate; after that it is safe for concurrent readers.
type Plan struct {
	SparseCores        int      `json:"sparsecores"`
	SparseCoresPerChip int      `json:"sparsecores_per_chip"`
	Layouts            []Layout `json:"layouts"`
	Shards             []Shard  `json:"shards"`
	Report

	tableIdx map[string]int
}

// Placement is one column range of a looked-up row: the shard that holds it,
// where that shard lives, and the row's index inside the shard.
type Placement struct {
	Shard      int
	SparseCore int
	ColFrom    int
	ColTo      int
	LocalRow   int64
}

// ErrNotIndexed is returned by Locate on a plan that was not validated.
var ErrNotIndexed = errors.New("partition: plan not validated; call Validate first")

// Locate returns the shards holding row of table, one per column range in
// column order.
func (p *Plan) Locate(table string, row int64) ([]Placement, error) {
	if p.tableIdx == nil {
		return nil, ErrNotIndexed
	}
	t, ok := p.tableIdx[table]
	if !ok {
		return nil, fmt.Errorf("partition: plan has no table %q", table)
	}
	return p.LocateAppend(nil, t, row)
}

// TableIndex returns the position of table in Layouts, for LocateAppend.
func (p *Plan) TableIndex(table string) (int, bool) {
	t, ok := p.tableIdx[table]
	return t, ok
}

// LocateAppend is Locate by table position, appending to dst so that the
// lookup path does not allocate.
func (p *Plan) LocateAppend(dst []Placement, table int, row int64) ([]Placement, error) {
	if p.tableIdx == nil {
		return dst, ErrNotIndexed
	}
	if table < 0 || table >= len(p.Layouts) {
		return dst, fmt.Errorf("partition: table index %d out of range", table)
	}
	l := &p.Layouts[table]
	if row < 0 || row >= l.Vocab {
		return dst, fmt.Errorf("partition: table %q has no row %d (vocab %d)", l.Table, row, l.Vocab)
	}
	var part int
	var local int64
	switch l.RowDist {
	case RowsBlock:
		// Part k starts at ⌊k·V/K⌋; the candidate ⌊row·K/V⌋ is off by at
		// most one.
		K, V := int64(l.RowParts), l.Vocab
		k := row * K / V
		for k+1 < K && (k+1)*V/K <= row {
			k++
		}
		for k > 0 && k*V/K > row {
			k--
		}
		part, local = int(k), row-k*V/K
	case RowsCyclic:
		K := int64(l.RowParts)
		part, local = int(row%K), row/K
	default:
		part, local = 0, row
	}
	for _, si := range l.Shards[part*l.ColSplits : (part+1)*l.ColSplits] {
		s := &p.Shards[si]
		dst = append(dst, Placement{Shard: si, SparseCore: s.SparseCore, ColFrom: s.ColFrom, ColTo: s.ColTo, LocalRow: local})
	}
	return dst, nil
}

// ShardsOn lists the indices of the shards placed on SparseCore sc.
func (p *Plan) ShardsOn(sc int) []int {
	var out []int
	for i := range p.Shards {
		if p.Shards[i].SparseCore == sc {
			out = append(out, i)
		}
	}
	return out
}

// Validate checks that the plan places every row and column of every table
// in tables exactly once, on SparseCores that exist, with column splits only
// for element-wise optimizers, and rebuilds Layouts and the lookup index. It
// does not check memory or compute costs; Evaluate does.
//
// Every table's shards must form a grid: one row distribution and part count
// K (1 ≤ K ≤ vocab) for the table, and the same column ranges, tiling
// [0, dim), in every row part.
func (p *Plan) Validate(tables []Table) error {
	if p.SparseCores <= 0 || p.SparseCoresPerChip <= 0 || p.SparseCores%p.SparseCoresPerChip != 0 {
		return fmt.Errorf("%w: plan has %d SparseCores, %d per chip", ErrInvalidProblem, p.SparseCores, p.SparseCoresPerChip)
	}
	idx := make(map[string]int, len(tables))
	for i := range tables {
		idx[tables[i].Name] = i
	}
	byTable := make([][]int, len(tables))
	for si := range p.Shards {
		s := &p.Shards[si]
		t, ok := idx[s.Table]
		if !ok {
			return fmt.Errorf("%w: shard %d: unknown table %q", ErrInvalidProblem, si, s.Table)
		}
		if s.SparseCore < 0 || s.SparseCore >= p.SparseCores {
			return fmt.Errorf("%w: shard %d of table %q: SparseCore %d out of range [0, %d)", ErrInvalidProblem, si, s.Table, s.SparseCore, p.SparseCores)
		}
		byTable[t] = append(byTable[t], si)
	}
	layouts := make([]Layout, len(tables))
	for t := range tables {
		tb := &tables[t]
		l, err := gridLayout(tb, p.Shards, byTable[t])
		if err != nil {
			return fmt.Errorf("%w: table %q: %v", ErrInvalidProblem, tb.Name, err)
		}
		layouts[t] = l
	}
	p.Layouts = layouts
	p.tableIdx = idx
	return nil
}

func gridLayout(tb *Table, shards []Shard, ids []int) (Layout, error) {
	if len(ids) == 0 {
		return Layout{}, errors.New("no shards")
	}
	first := &shards[ids[0]]
	K, dist := first.RowParts, first.RowDist
	if K < 1 || int64(K) > tb.Vocab {
		return Layout{}, fmt.Errorf("row_parts %d out of range [1, vocab=%d]", K, tb.Vocab)
	}
	if (K == 1) != (dist == RowsAll) || dist > RowsCyclic {
		return Layout{}, fmt.Errorf("row_dist %v does not fit row_parts %d", dist, K)
	}
	parts := make([][]int, K)
	for _, si := range ids {
		s := &shards[si]
		if s.RowParts != K || s.RowDist != dist {
			return Layout{}, fmt.Errorf("shards disagree on the row split (%d %v vs %d %v)", s.RowParts, s.RowDist, K, dist)
		}
		if s.RowPart < 0 || s.RowPart >= K {
			return Layout{}, fmt.Errorf("row_part %d out of range [0, %d)", s.RowPart, K)
		}
		parts[s.RowPart] = append(parts[s.RowPart], si)
	}
	cols := len(parts[0])
	for k, ps := range parts {
		// Paper V.A: optimizers that work on a whole row cannot have their
		// rows split across column shards.
		if len(ps) > 1 && !tb.Optimizer.ElementWise {
			return Layout{}, fmt.Errorf("row part %d is column partitioned, but optimizer %q is not element-wise", k, tb.Optimizer.Name)
		}
	}
	l := Layout{Table: tb.Name, Vocab: tb.Vocab, Dim: tb.Dim, ColSplits: cols, RowParts: K, RowDist: dist, Strategy: strategyName(cols, K)}
	var bounds []int
	for k, ps := range parts {
		sort.Slice(ps, func(a, b int) bool { return shards[ps[a]].ColFrom < shards[ps[b]].ColFrom })
		if len(ps) != cols {
			return Layout{}, fmt.Errorf("row part %d has %d column shards, row part 0 has %d", k, len(ps), cols)
		}
		at := 0
		for i, si := range ps {
			s := &shards[si]
			if s.ColFrom != at {
				if s.ColFrom < at {
					return Layout{}, fmt.Errorf("row part %d: columns [%d, %d) overlap", k, s.ColFrom, at)
				}
				return Layout{}, fmt.Errorf("row part %d: columns [%d, %d) not placed", k, at, s.ColFrom)
			}
			if s.ColTo <= s.ColFrom {
				return Layout{}, fmt.Errorf("row part %d: empty column range [%d, %d)", k, s.ColFrom, s.ColTo)
			}
			if k == 0 {
				bounds = append(bounds, s.ColFrom)
			} else if bounds[i] != s.ColFrom {
				return Layout{}, fmt.Errorf("row part %d splits columns differently from row part 0", k)
			}
			at = s.ColTo
		}
		if at != tb.Dim {
			return Layout{}, fmt.Errorf("row part %d: columns [%d, %d) not placed", k, at, tb.Dim)
		}
		l.Shards = append(l.Shards, ps...)
	}
	return l, nil
}

// Evaluate validates plan against p and fills in the cost model's view:
// every shard's rows, HBM, unique rows, bytes and time, and the Report's
// cost, load imbalance, HBM use and lower bound (the LP relaxation). It
// returns ErrOutOfMemory if a chip's HBM is exceeded. Solver, Optimal, Nodes
// and SolveTime are left as they are.
func Evaluate(p *Problem, plan *Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	cm := newCostModel(p)
	if plan.SparseCores != cm.nodes || plan.SparseCoresPerChip != cm.perChip {
		return fmt.Errorf("%w: plan is for %d SparseCores (%d per chip), topology has %d (%d per chip)",
			ErrInvalidProblem, plan.SparseCores, plan.SparseCoresPerChip, cm.nodes, cm.perChip)
	}
	if err := plan.Validate(p.Tables); err != nil {
		return err
	}
	bound, kind, err := cm.bound(false)
	if err != nil {
		return err
	}
	cm.fillReport(plan, bound, kind)
	return cm.checkMemory(plan)
}

// fillReport computes per-shard and per-SparseCore figures of a validated
// plan.
func (cm *costModel) fillReport(plan *Plan, bound float64, kind string) {
	r := &plan.Report
	r.SparseCoreBytes = make([]float64, cm.nodes)
	r.SparseCoreTimeNS = make([]float64, cm.nodes)
	r.ChipHBMBytes = make([]int64, cm.topo.Chips)
	r.HBMBytesPerChip = cm.hbm
	for i := range plan.Shards {
		s := &plan.Shards[i]
		tm := cm.tables[cm.tableIndex[s.Table]]
		tb := tm.tb
		_, s.Rows = partRange(tb.Vocab, s.RowDist, s.RowPart, s.RowParts)
		w := s.ColTo - s.ColFrom
		s.HBMBytes = s.Rows * tb.rowStateBytes(w)
		s.UniqueRows = tm.partUniques(s.RowParts, s.RowDist)[s.RowPart]
		s.Bytes = s.UniqueRows * cm.accessBytes(tb, w)
		s.TimeNS = cm.shardTime(tb, w, s.UniqueRows)
		r.SparseCoreBytes[s.SparseCore] += s.Bytes
		r.SparseCoreTimeNS[s.SparseCore] += s.TimeNS
		r.ChipHBMBytes[s.SparseCore/cm.perChip] += s.HBMBytes
	}
	r.CostNS = 0
	for _, t := range r.SparseCoreTimeNS {
		r.CostNS = math.Max(r.CostNS, t)
	}
	r.MaxHBMBytesPerChip = 0
	for _, m := range r.ChipHBMBytes {
		r.MaxHBMBytesPerChip = max(r.MaxHBMBytesPerChip, m)
	}
	r.LoadImbalance = LoadImbalance(r.SparseCoreBytes)
	// Floating-point error can put an exact bound a hair above the cost of a
	// plan that meets it; anything more is a real disagreement and stays
	// visible.
	if bound > r.CostNS && bound-r.CostNS <= 1e-9*r.CostNS {
		bound = r.CostNS
	}
	r.BoundNS, r.BoundKind = bound, kind
	r.Gap = 0
	if r.CostNS > 0 {
		r.Gap = (r.CostNS - bound) / r.CostNS
	}
	if math.Abs(r.Gap) < 1e-9 {
		r.Gap = 0 // floating-point noise
	}
}

// LoadImbalance is paper Eq. 1 over the bytes B_i each of N SparseCores
// accesses, N·max_i B_i / Σ_i B_i; 1 when nothing is accessed. Values
// within 1e-12 below 1 are summation roundoff and reported as 1.
func LoadImbalance(b []float64) float64 {
	var sum, mx float64
	for _, x := range b {
		sum += x
		mx = math.Max(mx, x)
	}
	if sum <= 0 {
		return 1
	}
	li := float64(len(b)) * mx / sum
	if li < 1 && li > 1-1e-12 {
		li = 1
	}
	return li
}

func (cm *costModel) checkMemory(plan *Plan) error {
	for c, m := range plan.ChipHBMBytes {
		if m > cm.hbm {
			return fmt.Errorf("%w: chip %d holds %s of embedding shards, HBM is %s", ErrOutOfMemory, c, units.Bytes(m), units.Bytes(cm.hbm))
		}
	}
	return nil
}

// RowSharding is the trainer's default plan before the solver runs, the
// paper's baseline (VII.D): every table is row partitioned over all
// SparseCores (or over vocab of them, for tables with fewer rows) with cyclic
// distribution, part k on SparseCore k. It spreads bytes evenly when rows
// are evenly used, but puts the hottest row of every table on SparseCore 0.
// The returned plan is validated and has its HBM figures; call Evaluate for
// its costs. It fails with ErrOutOfMemory if a chip's HBM is exceeded.
func RowSharding(tables []Table, topo Topology) (*Plan, error) {
	p := &Problem{Tables: tables, Topology: topo, BatchSize: 1}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	n := topo.SparseCores()
	plan := &Plan{SparseCores: n, SparseCoresPerChip: topo.SparseCoresPerChip}
	for i := range tables {
		tb := &tables[i]
		K := int(min(int64(n), tb.Vocab))
		dist := RowsCyclic
		if K == 1 {
			dist = RowsAll
		}
		for k := 0; k < K; k++ {
			plan.Shards = append(plan.Shards, Shard{Table: tb.Name, ColFrom: 0, ColTo: tb.Dim, RowDist: dist, RowPart: k, RowParts: K, SparseCore: k})
		}
	}
	if err := plan.Validate(tables); err != nil {
		return nil, err
	}
	plan.Solver = "row-sharding"
	plan.ChipHBMBytes = make([]int64, topo.Chips)
	for i := range plan.Shards {
		s := &plan.Shards[i]
		tb := &tables[plan.tableIdx[s.Table]]
		_, s.Rows = partRange(tb.Vocab, s.RowDist, s.RowPart, s.RowParts)
		s.HBMBytes = s.Rows * tb.rowStateBytes(tb.Dim)
		plan.ChipHBMBytes[s.SparseCore/topo.SparseCoresPerChip] += s.HBMBytes
	}
	plan.HBMBytesPerChip = topo.HBMBytesPerChip
	for c, m := range plan.ChipHBMBytes {
		plan.MaxHBMBytesPerChip = max(plan.MaxHBMBytesPerChip, m)
		if m > topo.HBMBytesPerChip {
			return nil, fmt.Errorf("%w: row sharding puts %s on chip %d, HBM is %s", ErrOutOfMemory, units.Bytes(m), c, units.Bytes(topo.HBMBytesPerChip))
		}
	}
	return plan, nil
}
