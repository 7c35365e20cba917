package partition

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// The shard-by-shard branch and bound that was the exact solver before bin
// completion (exact.go). It searches the same space by another route, so the
// tests use it as an independent oracle: wherever both searches finish they
// must agree on the optimum.
//
// Branching. Tables are taken heaviest first (by least work), layouts in
// order of total work, and a layout's shards largest first, each tried on
// the SparseCores in order of load. Symmetric branches are cut: two
// SparseCores of one chip with equal load are interchangeable, as are two
// empty chips, so only the first is tried; shards of one layout with equal
// time and HBM are interchangeable, so they take increasing SparseCore
// indices. Dominated layouts are never tried.
//
// Bounding. A node is pruned unless a completion could beat the incumbent:
// its most loaded SparseCore, its largest unplaced shard and every remaining
// table's smallest possible largest shard must be below the incumbent's
// cost; the remaining tables' least HBM must fit in the free HBM; the LP
// relaxation of the completion (the water-filling form in bound.go) must be
// feasible at the incumbent's cost; and so must its integral counterpart, in
// which every remaining table takes one whole layout whose shards fit the
// free room of distinct SparseCores.

type bbState struct {
	*layoutTables
	order []int // tables, heaviest first

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
		layoutTables: newLayoutTables(cm),
		load:         make([]float64, cm.nodes),
		chipMem:      make([]int64, cm.topo.Chips),
		chipShards:   make([]int, cm.topo.Chips),
		curLayout:    make([]int, T),
		curSC:        make([][]int, T),
		best:         math.Inf(1),
		minPruned:    math.Inf(1),
		limit:        opts.NodeLimit,
		keep:         1 - math.Max(opts.GapTolerance, 1e-12),
		clk:          opts.Clock.Now,
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
	for _, tm := range cm.tables {
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

// TestBinCompletionMatchesShardSearch runs both exact searches on random
// Ads-like problems of 4 to 11 tables over 2 to 8 SparseCores, half of them
// with HBM tight enough to bind (where only permutations within a chip and
// of whole chips are symmetries), and requires the same optimum wherever
// both finish.
func TestBinCompletionMatchesShardSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	iters := 60
	if testing.Short() {
		iters = 20
	}
	agreed := 0
	for iter := 0; iter < iters; iter++ {
		g := modelSpec(4+rng.IntN(8), 1+rng.IntN(2), 2+rng.IntN(3), 1e6)
		if iter%2 == 1 {
			g.hbm = int64(logUniform(rng, 1<<24, 1<<30))
		}
		p := genProblem(rng, g)
		cm := newCostModel(p)
		if p.Validate() != nil || cm.prepare() != nil {
			continue
		}
		o := Options{Solver: Exact, NodeLimit: 300_000}
		o.EnsureDefaults()
		h, herr := cm.heuristic(o)
		var inc *assignment
		if herr == nil && cm.fits(h) {
			inc = h
		}
		root, _, err := cm.bound(true)
		if err != nil {
			t.Fatal(err)
		}
		bb := cm.branchAndBound(inc, root, o, o.Clock.Now())
		bc := cm.binCompletion(inc, root, o, o.Clock.Now())
		if !bb.complete || !bc.complete {
			continue
		}
		if (bb.best == nil) != (bc.best == nil) {
			t.Fatalf("iter %d: shard search found a plan: %v, bin completion: %v", iter, bb.best != nil, bc.best != nil)
		}
		if bb.best == nil {
			continue
		}
		if math.Abs(bb.best.cost-bc.best.cost) > 1e-9*bb.best.cost {
			t.Fatalf("iter %d (%d tables, %d SparseCores): shard search optimum %v, bin completion %v", iter, len(p.Tables), cm.nodes, bb.best.cost, bc.best.cost)
		}
		if !cm.fits(bc.best) {
			t.Fatalf("iter %d: bin completion's plan exceeds a chip's HBM", iter)
		}
		agreed++
	}
	if agreed < iters/4 {
		t.Fatalf("only %d of %d problems finished in both searches", agreed, iters)
	}
}
