package partition

import (
	"math"
	"sort"
)

// This file is the cost model (paper VII.D: "the optimization goal is
// minimizing the execution time for embedding lookups and updates, and the
// constraints are hardware-imposed"). All times are nanoseconds of SparseCore
// time per training step.
//
// A shard holds columns [ColFrom, ColTo) of the rows of one row part of one
// table. Per step its SparseCore looks up and updates each unique row of the
// part that the batch touches (U, from the dedup model in profile.go). For
// one such row it moves
//
//	accessBytes(w) = passes · ⌈w·e / g⌉·g  (+ 2·⌈4·rowSlots / g⌉·g for row-wise state)
//	passes         = 1 + 2·(1 + slotsPerElement)
//
// bytes: one forward read of the embedding slice, and on the backward pass a
// read and a write of the slice and of each per-element optimizer slot. Each
// access is rounded up to the HBM access granularity g, so a column shard
// narrower than g pays for g: this is the bandwidth cost of narrow column
// shards (VII.D). The shard's time is
//
//	time = U · (accessBytes(w) / bandwidthPerSparseCore + lookupOverhead) + shardOverhead
//
// where the chip's HBM bandwidth is split evenly among its SparseCores, the
// lookup overhead is paid per unique row per shard (a feature value indexes
// every column shard of its row part, V.A), and the shard overhead is paid
// once per shard per step. A SparseCore's time is the sum over its shards and
// the plan's cost is the largest SparseCore time: every SparseCore must finish
// before the step goes on. The bytes a SparseCore accesses, B_i = Σ U ·
// accessBytes, define the load imbalance N·max B_i / Σ B_i (Eq. 1).
//
// A shard's HBM footprint is rows · (w·e·(1 + slotsPerElement) + 4·rowSlots).

// tableModel is what the cost model knows about one table.
type tableModel struct {
	idx  int
	tb   *Table
	prof rowProfile
	// partCache holds expected unique rows per row part, by (parts, dist).
	partCache map[partKey][]float64
	// layouts are the candidate layouts that fit a chip's HBM, sorted by
	// total work, then largest shard.
	layouts []*layout
	hull    hull // the LP's view of the layouts (bound.go)
}

type partKey struct {
	parts int
	dist  RowDist
}

// layout is one way to split a table: cols column shards times parts row
// parts under dist.
type layout struct {
	cols, parts int
	dist        RowDist
	u           []float64 // unique rows per batch of each row part
	work        float64   // total time of all shards
	maxShard    float64   // time of the largest shard
	maxMem      int64     // HBM of the largest shard
	mem         int64     // HBM of all shards
}

func (l *layout) shards() int { return l.cols * l.parts }

type costModel struct {
	topo       Topology
	nodes      int
	perChip    int
	hbm        int64
	bw         float64 // bytes per ns per SparseCore
	batch      int
	tables     []*tableModel
	tableIndex map[string]int
}

func newCostModel(p *Problem) *costModel {
	topo := p.Topology.withDefaults()
	cm := &costModel{
		topo:       topo,
		nodes:      topo.SparseCores(),
		perChip:    topo.SparseCoresPerChip,
		hbm:        topo.HBMBytesPerChip,
		bw:         topo.HBMBandwidth / float64(topo.SparseCoresPerChip) / 1e9,
		batch:      p.BatchSize,
		tableIndex: make(map[string]int, len(p.Tables)),
	}
	for i := range p.Tables {
		tb := &p.Tables[i]
		cm.tables = append(cm.tables, &tableModel{
			idx:       i,
			tb:        tb,
			prof:      buildProfile(tb, p.BatchSize),
			partCache: make(map[partKey][]float64),
		})
		cm.tableIndex[tb.Name] = i
	}
	return cm
}

func (tm *tableModel) partUniques(parts int, dist RowDist) []float64 {
	if parts == 1 {
		dist = RowsAll
	}
	k := partKey{parts, dist}
	if u, ok := tm.partCache[k]; ok {
		return u
	}
	u := tm.prof.parts(parts, dist)
	tm.partCache[k] = u
	return u
}

// accessBytes is the bytes moved per unique row of a shard of width w.
func (cm *costModel) accessBytes(tb *Table, w int) float64 {
	g := int64(cm.topo.AccessGranularity)
	e := int64(tb.bytesPerElement())
	slice := (int64(w)*e + g - 1) / g * g
	b := float64(int64(1+2*(1+tb.Optimizer.SlotsPerElement)) * slice)
	if rs := int64(tb.Optimizer.SlotsPerRow); rs > 0 {
		b += float64(2 * ((4*rs + g - 1) / g * g))
	}
	return b
}

// shardTime is the modeled time of a shard of width w with u unique rows.
func (cm *costModel) shardTime(tb *Table, w int, u float64) float64 {
	return u*(cm.accessBytes(tb, w)/cm.bw+cm.topo.LookupOverheadNS) + cm.topo.ShardOverheadNS
}

// colBound is the first column of column shard i of c: columns are split as
// evenly as possible, widths differing by at most one.
func colBound(dim, c, i int) int { return int(int64(i) * int64(dim) / int64(c)) }

// powersOfTwo lists 1, 2, 4, ... up to limit, plus limit itself when extra
// is set and limit is not a power of two.
func powersOfTwo(limit int64, extra bool) []int {
	var out []int
	for v := int64(1); v <= limit; v *= 2 {
		out = append(out, int(v))
	}
	if extra && limit >= 1 && limit&(limit-1) != 0 {
		out = append(out, int(limit))
	}
	return out
}

// buildLayouts enumerates the candidate layouts of a table: column splits
// c and row parts K that are powers of two (K may also be the SparseCore
// count), with c·K at most the number of SparseCores so that a table's shards
// can sit on distinct SparseCores. Column splits are offered only for
// element-wise optimizers (paper V.A). Layouts whose largest shard exceeds a
// chip's HBM are dropped; if none is left the table cannot be placed.
func (cm *costModel) buildLayouts(tm *tableModel) {
	tb := tm.tb
	colOpts := []int{1}
	if tb.Optimizer.ElementWise {
		colOpts = powersOfTwo(min(int64(tb.Dim), int64(cm.nodes)), false)
	}
	partOpts := powersOfTwo(min(tb.Vocab, int64(cm.nodes)), int64(cm.nodes) <= tb.Vocab)
	tm.layouts = tm.layouts[:0]
	for _, c := range colOpts {
		for _, k := range partOpts {
			if c*k > cm.nodes {
				continue
			}
			dists := []RowDist{RowsAll}
			if k > 1 {
				dists = []RowDist{RowsCyclic, RowsBlock}
			}
			for _, d := range dists {
				l := cm.evalLayout(tm, c, k, d)
				if l.maxMem <= cm.hbm {
					tm.layouts = append(tm.layouts, l)
				}
			}
		}
	}
	sort.SliceStable(tm.layouts, func(i, j int) bool {
		a, b := tm.layouts[i], tm.layouts[j]
		if a.work != b.work {
			return a.work < b.work
		}
		if a.maxShard != b.maxShard {
			return a.maxShard < b.maxShard
		}
		return a.shards() < b.shards()
	})
	tm.hull = buildHull(tm.layouts)
}

func (cm *costModel) evalLayout(tm *tableModel, c, k int, d RowDist) *layout {
	tb := tm.tb
	l := &layout{cols: c, parts: k, dist: d, u: tm.partUniques(k, d)}
	// At most two distinct widths: ⌊D/c⌋ and ⌈D/c⌉.
	type widthCount struct{ w, n int }
	var widths []widthCount
	for i := 0; i < c; i++ {
		w := colBound(tb.Dim, c, i+1) - colBound(tb.Dim, c, i)
		if n := len(widths); n > 0 && widths[n-1].w == w {
			widths[n-1].n++
			continue
		}
		found := false
		for j := range widths {
			if widths[j].w == w {
				widths[j].n++
				found = true
			}
		}
		if !found {
			widths = append(widths, widthCount{w, 1})
		}
	}
	for part := 0; part < k; part++ {
		_, rows := partRange(tb.Vocab, d, part, k)
		for _, wc := range widths {
			t := cm.shardTime(tb, wc.w, l.u[part])
			l.work += float64(wc.n) * t
			l.maxShard = math.Max(l.maxShard, t)
			m := rows * tb.rowStateBytes(wc.w)
			l.maxMem = max(l.maxMem, m)
			l.mem += int64(wc.n) * m
		}
	}
	return l
}

// shardSpec is one shard of a layout with its modeled cost.
type shardSpec struct {
	table          int
	colFrom, colTo int
	part           int
	time, bytes    float64
	mem            int64
}

// shardSpecs lists a layout's shards, row part major.
func (cm *costModel) shardSpecs(tm *tableModel, l *layout) []shardSpec {
	tb := tm.tb
	out := make([]shardSpec, 0, l.shards())
	for part := 0; part < l.parts; part++ {
		_, rows := partRange(tb.Vocab, l.dist, part, l.parts)
		for i := 0; i < l.cols; i++ {
			from, to := colBound(tb.Dim, l.cols, i), colBound(tb.Dim, l.cols, i+1)
			w := to - from
			out = append(out, shardSpec{
				table:   tm.idx,
				colFrom: from, colTo: to,
				part:  part,
				time:  cm.shardTime(tb, w, l.u[part]),
				bytes: l.u[part] * cm.accessBytes(tb, w),
				mem:   rows * tb.rowStateBytes(w),
			})
		}
	}
	return out
}

// minLayoutMem is the smallest total HBM any candidate layout of the table
// needs (layouts differ only in duplicated row-wise state).
func (tm *tableModel) minLayoutMem() int64 {
	m := int64(math.MaxInt64)
	for _, l := range tm.layouts {
		m = min(m, l.mem)
	}
	return m
}
