package partition

import (
	"math"
	"sort"
	"time"
)

// The exact solver: depth-first branch and bound over the integer program in
// bound.go, for models with tens of tables.
//
// Search space. Each table takes one of its candidate layouts (cost.go) and
// each shard of that layout one SparseCore; a table's shards sit on distinct
// SparseCores (two shards of a table on one SparseCore do the work of a
// coarser layout plus an extra shard overhead), and no chip's HBM is
// exceeded. "Optimal" and "gap 0" are relative to this space.
//
// Branching. Tables are taken heaviest first (by least work), layouts in
// order of total work, and a layout's shards largest first, each tried on
// the SparseCores in order of load. Symmetric branches are cut: two
// SparseCores of one chip with equal load are interchangeable, as are two
// empty chips, so only the first is tried; shards of one layout with equal
// time and HBM are interchangeable, so they take increasing SparseCore
// indices. Layouts dominated by another layout of the same table (no more
// shards, each no slower and no larger) are never tried: they cannot beat it.
//
// Bounding. A node is pruned unless a completion could beat the incumbent
// (the heuristic's plan to start with): its most loaded SparseCore, its
// largest unplaced shard and every remaining table's smallest possible
// largest shard must be below the incumbent's cost; the remaining tables'
// least HBM must fit in the free HBM; the LP relaxation of the completion
// (the water-filling form in bound.go) must be feasible at the incumbent's
// cost; and so must its integral counterpart, in which every remaining table
// takes one whole layout whose shards fit the free room of distinct
// SparseCores, and room smaller than any shard still to place counts as
// lost. The root bound is the larger of the LP relaxation, solved by
// gonum's simplex, and the integral-layout bound.
//
// Stopping. NodeLimit and TimeBudget stop the search; the plan is then the
// best found and its bound is the root bound, so the reported gap is honest.
// A search that runs to the end has proved its bound: the least lower bound
// of any pruned node, which is at least the final cost less GapTolerance
// (or a relative 1e-12 for roundoff when the tolerance is 0, which is then
// reported as gap 0: optimal).

type bbResult struct {
	best        *assignment
	complete    bool
	nodes       int64
	provenBound float64
}

type bbSpec struct {
	shardSpec
	orig int // index in shardSpecs order
}

type bbState struct {
	cm    *costModel
	order []int        // tables, heaviest first
	specs [][][]bbSpec // [table][layout] shards sorted by time, then HBM, descending

	load       []float64
	chipMem    []int64
	chipShards []int
	curLayout  []int
	curSC      [][]int // [table] SparseCore of each sorted shard

	suffixHulls    [][]*hull // hulls of order[i:]
	suffixMinShard []float64 // largest over order[i:] of the least largest shard
	suffixMinMem   []int64
	suffixTiny     []float64 // smallest shard of any layout of order[i:]
	candidates     [][]int   // per table: layouts not dominated by another

	best      float64
	bestA     *assignment
	minPruned float64

	keep         float64 // prune nodes whose bound is at least best·keep
	nodes, limit int64
	clk          func() time.Time
	deadline     time.Time
	stopped      bool
	depth        int     // shards placed on the current path
	scratch      [][]int // per depth: SparseCore order (the loop at each depth owns one)
	room         []float64
}

func (cm *costModel) branchAndBound(incumbent *assignment, rootBound float64, opts Options, start time.Time) bbResult {
	T := len(cm.tables)
	b := &bbState{
		cm:         cm,
		specs:      make([][][]bbSpec, T),
		load:       make([]float64, cm.nodes),
		chipMem:    make([]int64, cm.topo.Chips),
		chipShards: make([]int, cm.topo.Chips),
		curLayout:  make([]int, T),
		curSC:      make([][]int, T),
		best:       math.Inf(1),
		minPruned:  math.Inf(1),
		limit:      opts.NodeLimit,
		keep:       1 - math.Max(opts.GapTolerance, 1e-12),
		clk:        opts.Clock.Now,
	}
	if opts.TimeBudget > 0 {
		b.deadline = start.Add(opts.TimeBudget)
	}
	for t := range cm.tables {
		b.order = append(b.order, t)
	}
	sort.SliceStable(b.order, func(i, j int) bool {
		return cm.tables[b.order[i]].hull.minWork() > cm.tables[b.order[j]].hull.minWork()
	})
	maxDepth := 0
	for t, tm := range cm.tables {
		b.specs[t] = make([][]bbSpec, len(tm.layouts))
		most := 0
		for _, l := range tm.layouts {
			most = max(most, l.shards())
		}
		maxDepth += most
	}
	b.candidates = make([][]int, T)
	for t := range cm.tables {
		b.candidates[t] = b.undominated(t)
	}
	b.suffixHulls = make([][]*hull, T+1)
	b.suffixMinShard = make([]float64, T+1)
	b.suffixMinMem = make([]int64, T+1)
	b.suffixTiny = make([]float64, T+1)
	b.suffixTiny[T] = math.Inf(1)
	for i := T - 1; i >= 0; i-- {
		t := b.order[i]
		tm := cm.tables[t]
		b.suffixHulls[i] = append([]*hull{&tm.hull}, b.suffixHulls[i+1]...)
		b.suffixMinShard[i] = math.Max(b.suffixMinShard[i+1], tm.hull.minShard())
		b.suffixMinMem[i] = b.suffixMinMem[i+1] + tm.minLayoutMem()
		tiny := b.suffixTiny[i+1]
		for _, li := range b.candidates[t] {
			sp := b.sortedSpecs(t, li)
			tiny = math.Min(tiny, sp[len(sp)-1].time)
		}
		b.suffixTiny[i] = tiny
	}
	b.scratch = make([][]int, maxDepth+1)
	for i := range b.scratch {
		b.scratch[i] = make([]int, cm.nodes)
	}
	if incumbent != nil {
		b.best, b.bestA = incumbent.cost, incumbent
	}
	if b.best*b.keep <= rootBound {
		// The incumbent meets the root bound: optimal without search.
		return bbResult{best: b.bestA, complete: true, provenBound: rootBound}
	}
	b.table(0)
	res := bbResult{best: b.bestA, complete: !b.stopped, nodes: b.nodes}
	if res.complete && res.best != nil {
		res.provenBound = math.Min(b.minPruned, res.best.cost)
	}
	return res
}

func (b *bbState) sortedSpecs(t, li int) []bbSpec {
	if s := b.specs[t][li]; s != nil {
		return s
	}
	tm := b.cm.tables[t]
	raw := b.cm.shardSpecs(tm, tm.layouts[li])
	s := make([]bbSpec, len(raw))
	for i, r := range raw {
		s[i] = bbSpec{r, i}
	}
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].time != s[j].time {
			return s[i].time > s[j].time
		}
		return s[i].mem > s[j].mem
	})
	b.specs[t][li] = s
	return s
}

// undominated lists the layouts of table t that no other layout dominates.
// Layout A dominates B if it has no more shards and, pairing shards in
// order of decreasing time, each of A's is no slower and no larger in HBM
// than B's: any placement of B then becomes one of A that is no worse, by
// putting A's i-th shard where B's i-th was (and dropping B's extra
// shards). Of identical layouts the first is kept. Dropping dominated
// layouts leaves the optimum unchanged.
func (b *bbState) undominated(t int) []int {
	n := len(b.cm.tables[t].layouts)
	dominates := func(a, c int) bool {
		sa, sc := b.sortedSpecs(t, a), b.sortedSpecs(t, c)
		if len(sa) > len(sc) {
			return false
		}
		for i := range sa {
			if sa[i].time > sc[i].time || sa[i].mem > sc[i].mem {
				return false
			}
		}
		return true
	}
	var keep []int
	for c := 0; c < n; c++ {
		dominated := false
		for a := 0; a < n && !dominated; a++ {
			if a == c || !dominates(a, c) {
				continue
			}
			// Identical layouts dominate each other; keep the first.
			dominated = !dominates(c, a) || a < c
		}
		if !dominated {
			keep = append(keep, c)
		}
	}
	return keep
}

func (b *bbState) table(ti int) {
	if ti == len(b.order) {
		b.leaf()
		return
	}
	t := b.order[ti]
	for _, li := range b.candidates[t] {
		specs := b.sortedSpecs(t, li)
		b.curLayout[t] = li
		if cap(b.curSC[t]) < len(specs) {
			b.curSC[t] = make([]int, len(specs))
		}
		b.curSC[t] = b.curSC[t][:len(specs)]
		var rem float64
		for _, s := range specs {
			rem += s.time
		}
		b.shard(ti, t, specs, 0, rem)
		if b.stopped {
			return
		}
	}
}

func (b *bbState) leaf() {
	cost := 0.0
	for _, l := range b.load {
		cost = math.Max(cost, l)
	}
	if cost >= b.best {
		b.minPruned = math.Min(b.minPruned, cost)
		return
	}
	a := &assignment{layouts: make([]int, len(b.order)), scs: make([][]int, len(b.order)), cost: cost}
	for t := range b.order {
		li := b.curLayout[t]
		a.layouts[t] = li
		specs := b.specs[t][li]
		a.scs[t] = make([]int, len(specs))
		for k, s := range specs {
			a.scs[t][s.orig] = b.curSC[t][k]
		}
	}
	b.best, b.bestA = cost, a
}

// prune reports whether no completion of the current node can cost less
// than the incumbent, recording the bound it proved.
func (b *bbState) prune(ti int, specs []bbSpec, si int, rem float64) bool {
	theta := b.best * b.keep
	maxLoad := 0.0
	for _, l := range b.load {
		maxLoad = math.Max(maxLoad, l)
	}
	// Memory: the remaining shards and tables must fit in the free HBM.
	var needMem int64
	for _, s := range specs[si:] {
		needMem += s.mem
	}
	needMem += b.suffixMinMem[ti+1]
	var freeMem int64
	for _, m := range b.chipMem {
		freeMem += b.cm.hbm - m
	}
	if needMem > freeMem {
		return true // infeasible: no bound to record
	}
	if math.IsInf(theta, 1) {
		return false
	}
	lb := maxLoad
	if si < len(specs) {
		lb = math.Max(lb, specs[si].time)
	}
	lb = math.Max(lb, b.suffixMinShard[ti+1])
	if lb >= theta || !capacityCovers(b.load, rem, b.suffixHulls[ti+1], theta) || !b.residualsCover(ti, specs, si, rem, theta) {
		b.minPruned = math.Min(b.minPruned, math.Max(lb, theta))
		return true
	}
	return false
}

// residualsCover is the integral counterpart of capacityCovers: every
// remaining table must take one whole layout whose shards fit the free room
// below theta on distinct SparseCores (the i-th largest shard no larger than
// the i-th largest room, which is Hall's condition for this matching), and
// the least work of such layouts, plus the current layout's unplaced shards,
// must fit in the total room. It reports false if not.
func (b *bbState) residualsCover(ti int, specs []bbSpec, si int, rem, theta float64) bool {
	// Room smaller than every shard still to place is dead.
	tiny := b.suffixTiny[ti+1]
	if si < len(specs) {
		tiny = math.Min(tiny, specs[len(specs)-1].time)
	}
	room := b.room[:0]
	var total float64
	for _, l := range b.load {
		if r := theta - l; r >= tiny {
			room = append(room, r)
			total += r
		}
	}
	if len(room) == 0 {
		b.room = room
		// Only a node with nothing left to place survives. (rem is a running
		// float difference, so test what is left, not rem == 0.)
		return si == len(specs) && ti+1 == len(b.order)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(room)))
	b.room = room
	need := rem
	if need > total {
		return false
	}
	for _, t := range b.order[ti+1:] {
		best := math.Inf(1)
		for _, li := range b.candidates[t] {
			l := b.cm.tables[t].layouts[li]
			if l.work >= best || l.shards() > len(room) || l.maxShard > room[0] {
				continue
			}
			sp := b.sortedSpecs(t, li)
			ok := true
			for i := range sp {
				if sp[i].time > room[i] {
					ok = false
					break
				}
			}
			if ok {
				best = l.work
			}
		}
		need += best
		if need > total {
			return false
		}
	}
	return true
}

func (b *bbState) shard(ti, t int, specs []bbSpec, si int, rem float64) {
	if si == len(specs) || rem < 0 {
		rem = 0 // drop the roundoff of the running difference
	}
	b.nodes++
	if b.nodes > b.limit {
		b.stopped = true
		return
	}
	if b.nodes&1023 == 0 && !b.deadline.IsZero() && !b.clk().Before(b.deadline) {
		b.stopped = true
		return
	}
	if b.prune(ti, specs, si, rem) {
		return
	}
	if si == len(specs) {
		b.table(ti + 1)
		return
	}
	s := &specs[si]
	cm := b.cm
	minJ := 0
	if si > 0 && specs[si-1].time == s.time && specs[si-1].mem == s.mem {
		minJ = b.curSC[t][si-1] + 1
	}
	used := b.curSC[t][:si]
	allowed := func(j int) bool {
		if j < minJ || b.chipMem[j/cm.perChip]+s.mem > cm.hbm {
			return false
		}
		for _, u := range used {
			if u == j {
				return false
			}
		}
		return true
	}
	order := b.scratch[b.depth]
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(x, y int) bool { return b.load[order[x]] < b.load[order[y]] })
	for _, j := range order {
		if !allowed(j) || b.dominated(j, allowed) {
			continue
		}
		c := j / cm.perChip
		b.load[j] += s.time
		b.chipMem[c] += s.mem
		b.chipShards[c]++
		b.curSC[t][si] = j
		b.depth++
		b.shard(ti, t, specs, si+1, rem-s.time)
		b.depth--
		b.load[j] -= s.time
		b.chipMem[c] -= s.mem
		b.chipShards[c]--
		if b.stopped {
			return
		}
	}
}

// dominated reports whether an allowed SparseCore with a lower index is
// interchangeable with j: on the same chip with the same load, or on an
// earlier chip that is as empty as j's.
func (b *bbState) dominated(j int, allowed func(int) bool) bool {
	per := b.cm.perChip
	c := j / per
	for k := c * per; k < j; k++ {
		if b.load[k] == b.load[j] && allowed(k) {
			return true
		}
	}
	if b.chipShards[c] == 0 {
		for k := 0; k < c*per; k++ {
			if b.chipShards[k/per] == 0 && allowed(k) {
				return true
			}
		}
	}
	return false
}
