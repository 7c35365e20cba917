package partition

import (
	"encoding/binary"
	"math"
	"sort"
	"time"
)

// The exact solver: bin completion, for models with tens of tables. Instead
// of placing shards one at a time on any SparseCore (which leaves every
// SparseCore open until the last table and lets the search wander through
// placements that can no longer fill the machine), it fills the SparseCores
// one after another, each completely, the way bin-completion algorithms
// solve bin packing and multiway number partitioning (Korf; Schreiber and
// Korf). What makes it prove optimality quickly is a budget every decision
// draws on.
//
// Slack. With θ just below the incumbent's cost, a plan that beats it needs
// every SparseCore's time ≤ θ, so the R SparseCores still to fill must take
// all remaining work: Σ remaining work ≤ R·θ. Call the difference the
// slack. Closing a SparseCore at time ℓ < θ spends θ-ℓ of it for good, and so
// does giving a table a layout with more work than its cheapest one (an extra
// row part costs a shard overhead, a column split more bytes). On the
// benchmark of 20 tables over 8 SparseCores the slack at the optimum is
// about 10 µs against SparseCore times near half a millisecond
// (BenchmarkExact20x8 reports both: slack_cheapest_us, cost_us), so every
// SparseCore must be filled to within a hair of θ and only a few tables may
// be split beyond what they must: the subsets of shards that qualify are
// few, and the search tree is narrow. The LP relaxation, which spreads shards fractionally, can
// never see this; it is why the shard-by-shard search (shardsearch_test.go)
// could not close the last fraction of a percent.
//
// Symmetry. Permuting the SparseCores of one chip, or permuting whole chips,
// turns a plan into an equivalent one. Items (shards) are ranked by time,
// larger first, then by table index; a SparseCore's key is its first-ranked
// item. The search only builds plans whose SparseCores, within each chip,
// have keys in rank order, and whose chips are in the rank order of their
// first SparseCore's key, so the first SparseCore of a chip holds the
// first-ranked item of everything still unplaced. When no chip's HBM can
// ever be exceeded (every table at its largest layout fits one chip
// together), all SparseCore permutations are symmetries and every
// SparseCore's key is the first-ranked remaining item. Tables commit to a
// layout when their first shard is placed; a table whose key shard opens a
// SparseCore in that way must have all its other shards ranked after it, so
// it takes that layout's largest shard, and every uncommitted table is
// restricted to layouts whose largest shard ranks after it too.
//
// Filling a SparseCore: after its key, every other table contributes one
// shard that ranks after the key (a table's shards sit on distinct
// SparseCores) or none, by depth-first search in decreasing order of the
// tables' largest shards. A partial fill is cut when the SparseCore is over
// θ, or when even the best completion of the fill leaves more work than the
// SparseCores after it can take: Σ over tables of the least work each can
// still leave for later, less what still fits in this SparseCore, must be at
// most ·θ.
//
// Remainders. The search below a SparseCore depends only on what is left
// to place (each table's layout and unplaced shards, or the layouts still
// open to it), the chip's HBM and the rank bounds, not on how the closed
// SparseCores were filled; many fills of the first SparseCores leave the
// same remainder, so a remainder searched to the end is remembered and never
// searched again (θ only falls, so what had no plan then has none now). On
// the 20-table benchmark this cut the search about six-fold when it was
// added: 8.7 million nodes (BenchmarkExact20x8's nodes) against 53 million
// without it.
//
// Search space. Each table takes one of its candidate layouts (cost.go) and
// each shard of that layout one SparseCore; a table's shards sit on distinct
// SparseCores (two shards of a table on one SparseCore do the work of a
// coarser layout plus an extra shard overhead), and no chip's HBM is
// exceeded. Layouts dominated by another layout of the same table (no more
// shards, each no slower and no larger) are never tried: they cannot beat
// it. "Optimal" and "gap 0" are relative to this space. The search starts
// from the heuristic's plan.
//
// Stopping. NodeLimit and TimeBudget stop the search; the plan is then the
// best found and its bound is the root bound (bound.go), so the reported gap
// is honest. A search that runs to the end has proved that no plan costs θ
// or less: θ is the final cost less GapTolerance (or a relative 1e-12 for
// roundoff when the tolerance is 0, which is then reported as gap 0:
// optimal). The shard-by-shard branch and bound this search replaced is kept
// in the tests as an independent oracle (shardsearch_test.go).

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

// layoutTables holds each layout's shards sorted largest first, built on
// demand, and decides layout dominance.
type layoutTables struct {
	cm    *costModel
	specs [][][]bbSpec // [table][layout] shards sorted by time, then HBM, descending
}

func newLayoutTables(cm *costModel) *layoutTables {
	lt := &layoutTables{cm: cm, specs: make([][][]bbSpec, len(cm.tables))}
	for t, tm := range cm.tables {
		lt.specs[t] = make([][]bbSpec, len(tm.layouts))
	}
	return lt
}

func (b *layoutTables) sortedSpecs(t, li int) []bbSpec {
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
func (b *layoutTables) undominated(t int) []int {
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

type bcClass struct {
	time  float64
	mem   int64
	first int // index in bcLayout.specs of the class's first shard
	count int
}

type bcLayout struct {
	li      int      // index into tableModel.layouts
	specs   []bbSpec // sorted by time, then HBM, descending
	classes []bcClass
	work    float64
	maxT    float64
	n       int
	mem     int64
}

// bcState is the bin-completion search.
type bcState struct {
	cm      *costModel
	ls      [][]bcLayout // per table, candidate (undominated) layouts
	order   []int        // tables by their largest candidate shard, descending
	full    bool         // every permutation of SparseCores is a symmetry
	n, per  int
	minMem  []int64 // per table, least HBM of any candidate layout
	layout  []int   // per table: committed layout (index into ls[t]) or -1
	left    [][]int // per table: unplaced shards per class of its layout
	leftN   []int
	leftW   []float64 // unplaced work
	leftMem []int64
	sc      [][]int // per table: SparseCore of each sorted shard

	// Every item still to place ranks at or after (gT, gTab).
	gT   float64
	gTab int

	load    []float64
	chipMem []int64

	best, theta, keep float64
	bestA             *assignment
	nodes, limit      int64
	clk               func() time.Time
	deadline          time.Time
	stopped           bool

	scratch [][]bcTableBound // per SparseCore: fill bounds of the current key

	// dead holds the states (what is left to place and where) from which
	// the search has been exhausted: no completion costs ≤ θ at the time,
	// hence none at any later, smaller θ. Many orders of filling the first
	// SparseCores leave the same remainder; it is searched once.
	dead   map[string]struct{}
	keyBuf []byte
}

// maxDeadStates bounds the memory of bcState.dead (about 100 bytes a state).
const maxDeadStates = 4 << 20

// stateKey encodes everything the search below SparseCore b depends on:
// b, the rank bounds in force, the current chip's HBM and every table's
// layout and unplaced shards. The loads of closed SparseCores do not matter
// (each is ≤ θ, checked on entry).
func (s *bcState) stateKey(b int, pT float64, pTab int, strong bool) string {
	k := s.keyBuf[:0]
	k = binary.AppendUvarint(k, uint64(b))
	if !s.full {
		if !strong {
			k = binary.LittleEndian.AppendUint64(k, math.Float64bits(pT))
			k = binary.AppendUvarint(k, uint64(pTab))
		}
		k = binary.AppendUvarint(k, uint64(s.chipMem[b/s.per]))
	}
	for t := range s.layout {
		k = binary.AppendUvarint(k, uint64(s.layout[t]+1))
		if s.layout[t] >= 0 {
			for _, n := range s.left[t] {
				k = binary.AppendUvarint(k, uint64(n))
			}
			continue
		}
		// The global rank bound matters only through the layouts it leaves
		// an uncommitted table.
		var allowed uint64
		for i := range s.ls[t] {
			if ranksAtOrAfter(s.ls[t][i].maxT, t, s.gT, s.gTab) {
				allowed++
			}
		}
		k = binary.AppendUvarint(k, allowed)
	}
	s.keyBuf = k
	return string(k)
}

// bcTableBound is what one table can still do in the SparseCore being
// filled: the least work it can leave for later (minRest) if it took the
// largest shard it can (maxW), both as suffix sums over the fill order.
type bcTableBound struct {
	sufMinV, sufMaxW float64
}

// ranksAtOrAfter reports whether an item of time x from table t ranks at or
// after the item (bt, btab): items rank by time descending, then table
// ascending.
func ranksAtOrAfter(x float64, t int, bt float64, btab int) bool {
	return x < bt || (x == bt && t >= btab)
}

func ranksAfter(x float64, t int, bt float64, btab int) bool {
	return x < bt || (x == bt && t > btab)
}

// binCompletion runs the search from an incumbent (nil for none). The result
// is complete when the search ran to the end: then no plan costs at most
// provenBound, which is the incumbent's cost times keep.
func (cm *costModel) binCompletion(incumbent *assignment, rootBound float64, opts Options, start time.Time) bbResult {
	T := len(cm.tables)
	bb := newLayoutTables(cm)
	s := &bcState{
		cm:      cm,
		ls:      make([][]bcLayout, T),
		n:       cm.nodes,
		per:     cm.perChip,
		minMem:  make([]int64, T),
		layout:  make([]int, T),
		left:    make([][]int, T),
		leftN:   make([]int, T),
		leftW:   make([]float64, T),
		leftMem: make([]int64, T),
		sc:      make([][]int, T),
		gT:      math.Inf(1),
		load:    make([]float64, cm.nodes),
		chipMem: make([]int64, cm.topo.Chips),
		best:    math.Inf(1),
		theta:   math.Inf(1),
		keep:    1 - math.Max(opts.GapTolerance, 1e-12),
		limit:   opts.NodeLimit,
		clk:     opts.Clock.Now,
		dead:    make(map[string]struct{}),
	}
	if opts.TimeBudget > 0 {
		s.deadline = start.Add(opts.TimeBudget)
	}
	var maxMemAll int64
	largest := make([]float64, T)
	for t, tm := range cm.tables {
		s.layout[t] = -1
		s.minMem[t] = math.MaxInt64
		var maxMem int64
		for _, li := range bb.undominated(t) {
			specs := bb.sortedSpecs(t, li)
			l := bcLayout{li: li, specs: specs, work: tm.layouts[li].work, maxT: specs[0].time, n: len(specs)}
			for k, sp := range specs {
				l.mem += sp.mem
				if c := len(l.classes); c > 0 && l.classes[c-1].time == sp.time && l.classes[c-1].mem == sp.mem {
					l.classes[c-1].count++
					continue
				}
				l.classes = append(l.classes, bcClass{time: sp.time, mem: sp.mem, first: k, count: 1})
			}
			s.ls[t] = append(s.ls[t], l)
			s.minMem[t] = min(s.minMem[t], l.mem)
			maxMem = max(maxMem, l.mem)
			largest[t] = math.Max(largest[t], l.maxT)
		}
		maxMemAll += maxMem
		s.order = append(s.order, t)
	}
	s.full = maxMemAll <= cm.hbm
	sort.SliceStable(s.order, func(i, j int) bool { return largest[s.order[i]] > largest[s.order[j]] })
	s.scratch = make([][]bcTableBound, cm.nodes)
	for i := range s.scratch {
		s.scratch[i] = make([]bcTableBound, T+1)
	}
	if incumbent != nil {
		s.best, s.bestA = incumbent.cost, incumbent
		s.theta = incumbent.cost * s.keep
	}
	if s.theta <= rootBound {
		return bbResult{best: s.bestA, complete: true, provenBound: rootBound}
	}
	s.bin(0, math.Inf(1), 0)
	res := bbResult{best: s.bestA, complete: !s.stopped, nodes: s.nodes}
	if res.complete && res.best != nil {
		res.provenBound = math.Min(s.theta, res.best.cost)
	}
	return res
}

// slop is the roundoff allowance of a comparison of sums of about n
// SparseCores' times: the bounds compare sums accumulated in different
// orders, and a hair of roundoff must never cut the optimum.
func (s *bcState) slop(n int) float64 {
	if math.IsInf(s.theta, 1) {
		return 0
	}
	return 1e-9 * s.theta * float64(n)
}

func (s *bcState) tick() bool {
	s.nodes++
	if s.nodes > s.limit {
		s.stopped = true
	} else if s.nodes&1023 == 0 && !s.deadline.IsZero() && !s.clk().Before(s.deadline) {
		s.stopped = true
	}
	return s.stopped
}

// restWork is the least work uncommitted table t can bring to the R
// SparseCores still open, with its items ranking at or after (bt, btab);
// +Inf if no layout qualifies.
func (s *bcState) restWork(t int, bt float64, btab, R int) float64 {
	m := math.Inf(1)
	for i := range s.ls[t] {
		l := &s.ls[t][i]
		if s.fits(l, t, bt, btab, R) && l.work < m {
			m = l.work
		}
	}
	return m
}

// fits reports whether uncommitted table t may commit to layout l with R
// SparseCores open and its items ranking at or after (bt, btab): the
// layout's shards fit in those SparseCores and none is over θ.
func (s *bcState) fits(l *bcLayout, t int, bt float64, btab, R int) bool {
	return l.n <= R && l.maxT <= s.theta && ranksAtOrAfter(l.maxT, t, bt, btab)
}

// bin opens SparseCore b. (pT, pTab) is the key of the previous SparseCore
// of the same chip.
func (s *bcState) bin(b int, pT float64, pTab int) {
	if s.tick() {
		return
	}
	for j := 0; j < b; j++ {
		if s.load[j] > s.theta {
			return // θ fell below a closed SparseCore since it was closed
		}
	}
	done := true
	for t := range s.layout {
		if s.layout[t] < 0 || s.leftN[t] > 0 {
			done = false
			break
		}
	}
	if done {
		s.leaf()
		return
	}
	R := s.n - b
	if R == 0 {
		return
	}
	// Slack and HBM: the open SparseCores must take all remaining work, the
	// open chips all remaining memory.
	var need float64
	var needMem int64
	for t := range s.layout {
		if s.layout[t] >= 0 {
			if s.leftN[t] > R {
				return
			}
			need += s.leftW[t]
			needMem += s.leftMem[t]
			continue
		}
		w := s.restWork(t, s.gT, s.gTab, R)
		if math.IsInf(w, 1) {
			return
		}
		need += w
		needMem += s.minMem[t]
	}
	if need > float64(R)*s.theta+s.slop(R) {
		return
	}
	var freeMem int64
	for c := b / s.per; c < len(s.chipMem); c++ {
		freeMem += s.cm.hbm - s.chipMem[c]
	}
	if needMem > freeMem {
		return
	}

	strong := s.full || b%s.per == 0
	key := s.stateKey(b, pT, pTab, strong)
	if _, dead := s.dead[key]; dead {
		return
	}
	defer func() {
		if !s.stopped && len(s.dead) < maxDeadStates {
			s.dead[key] = struct{}{}
		}
	}()
	if strong {
		// The key is the first-ranked remaining item: the first-ranked
		// unplaced shard of a committed table, or the largest shard of a
		// layout an uncommitted table commits to here.
		ct, ctab, ccls := math.Inf(-1), -1, -1
		for t := range s.layout {
			if s.layout[t] < 0 || s.leftN[t] == 0 {
				continue
			}
			l := &s.ls[t][s.layout[t]]
			for k, c := range l.classes {
				if s.left[t][k] > 0 {
					if ctab < 0 || !ranksAtOrAfter(c.time, t, ct, ctab) {
						ct, ctab, ccls = c.time, t, k
					}
					break
				}
			}
		}
		for _, t := range s.order {
			if s.layout[t] >= 0 {
				continue
			}
			for li := range s.ls[t] {
				l := &s.ls[t][li]
				if !s.fits(l, t, s.gT, s.gTab, R) {
					continue
				}
				if ctab >= 0 && !ranksAfter(ct, ctab, l.maxT, t) {
					continue // would not be first-ranked
				}
				s.key(b, t, li, 0, true)
				if s.stopped {
					return
				}
			}
		}
		if ctab >= 0 {
			s.key(b, ctab, s.layout[ctab], ccls, true)
		}
		return
	}
	// A later SparseCore of a chip: its key ranks at or after the previous
	// SparseCore's.
	for _, t := range s.order {
		if s.layout[t] >= 0 {
			l := &s.ls[t][s.layout[t]]
			for k, c := range l.classes {
				if s.left[t][k] > 0 && ranksAtOrAfter(c.time, t, pT, pTab) {
					s.key(b, t, s.layout[t], k, false)
					if s.stopped {
						return
					}
				}
			}
			continue
		}
		for li := range s.ls[t] {
			l := &s.ls[t][li]
			if !s.fits(l, t, s.gT, s.gTab, R) {
				continue
			}
			for k, c := range l.classes {
				if ranksAtOrAfter(c.time, t, pT, pTab) {
					s.key(b, t, li, k, false)
					if s.stopped {
						return
					}
				}
			}
		}
	}
	// Or this SparseCore and the rest of its chip stay empty.
	if next := (b/s.per + 1) * s.per; next <= s.n {
		s.bin(next, math.Inf(1), 0)
	}
}

func (s *bcState) commit(t, li int) {
	l := &s.ls[t][li]
	s.layout[t] = li
	if cap(s.left[t]) < len(l.classes) {
		s.left[t] = make([]int, len(l.classes))
	}
	s.left[t] = s.left[t][:len(l.classes)]
	for k, c := range l.classes {
		s.left[t][k] = c.count
	}
	s.leftN[t], s.leftW[t], s.leftMem[t] = l.n, l.work, l.mem
	if cap(s.sc[t]) < l.n {
		s.sc[t] = make([]int, l.n)
	}
	s.sc[t] = s.sc[t][:l.n]
}

// place puts the next unplaced shard of class k of table t's layout on
// SparseCore b, reporting false (and changing nothing) if its chip's HBM
// cannot take it.
func (s *bcState) place(t, k, b int) bool {
	l := &s.ls[t][s.layout[t]]
	c := &l.classes[k]
	chip := b / s.per
	if s.chipMem[chip]+c.mem > s.cm.hbm {
		return false
	}
	s.sc[t][c.first+c.count-s.left[t][k]] = b
	s.left[t][k]--
	s.leftN[t]--
	s.leftW[t] -= c.time
	s.leftMem[t] -= c.mem
	s.load[b] += c.time
	s.chipMem[chip] += c.mem
	return true
}

func (s *bcState) unplace(t, k, b int) {
	c := &s.ls[t][s.layout[t]].classes[k]
	s.left[t][k]++
	s.leftN[t]++
	s.leftW[t] += c.time
	s.leftMem[t] += c.mem
	s.load[b] -= c.time
	s.chipMem[b/s.per] -= c.mem
}

// key opens SparseCore b with class k of layout li of table t, committing
// the table if needed, then fills the rest of it.
func (s *bcState) key(b, t, li, k int, strong bool) {
	committed := s.layout[t] >= 0
	if !committed {
		s.commit(t, li)
	}
	if s.place(t, k, b) {
		kt := s.ls[t][li].classes[k].time
		gT, gTab := s.gT, s.gTab
		if strong {
			s.gT, s.gTab = kt, t
		}
		s.prepareFill(b, t, kt)
		s.fill(b, 0, t, kt, 0)
		s.gT, s.gTab = gT, gTab
		s.unplace(t, k, b)
	}
	if !committed {
		s.layout[t] = -1
	}
}

// options visits what table t can do in SparseCore b under key (kt, ktab):
// place one shard of a class (committing to a layout if t has none yet), or
// nothing. For each it calls f with the layout (-1: stay uncommitted), the
// class (-1: none) and rest, the least work t then leaves to the SparseCores
// after b. It stops when f returns false.
func (s *bcState) options(b, t int, kt float64, ktab int, f func(li, k int, w, rest float64) bool) {
	R := s.n - b
	if li := s.layout[t]; li >= 0 {
		l := &s.ls[t][li]
		for k, c := range l.classes {
			if s.left[t][k] > 0 && ranksAfter(c.time, t, kt, ktab) {
				if !f(li, k, c.time, s.leftW[t]-c.time) {
					return
				}
			}
		}
		if s.leftN[t] <= R-1 {
			f(li, -1, 0, s.leftW[t])
		}
		return
	}
	for li := range s.ls[t] {
		l := &s.ls[t][li]
		if !s.fits(l, t, s.gT, s.gTab, R) {
			continue
		}
		for k, c := range l.classes {
			if ranksAfter(c.time, t, kt, ktab) {
				if !f(li, k, c.time, l.work-c.time) {
					return
				}
			}
		}
	}
	if w := s.restWork(t, s.gT, s.gTab, R-1); !math.IsInf(w, 1) {
		f(-1, -1, 0, w)
	}
}

// prepareFill computes, for the fill of SparseCore b after key table ktab,
// the suffix sums over s.order of each table's least rest-plus-shard and
// largest shard.
func (s *bcState) prepareFill(b, ktab int, kt float64) {
	tb := s.scratch[b]
	T := len(s.order)
	tb[T] = bcTableBound{}
	for i := T - 1; i >= 0; i-- {
		t := s.order[i]
		minV, maxW := math.Inf(1), 0.0
		if t == ktab {
			minV = s.leftW[t]
		} else {
			s.options(b, t, kt, ktab, func(li, k int, w, rest float64) bool {
				minV = math.Min(minV, rest+w)
				maxW = math.Max(maxW, w)
				return true
			})
		}
		tb[i] = bcTableBound{sufMinV: tb[i+1].sufMinV + minV, sufMaxW: tb[i+1].sufMaxW + maxW}
	}
}

// fill decides what table s.order[i] puts into SparseCore b. rest is the
// work the decided tables leave for the SparseCores after b.
func (s *bcState) fill(b, i, ktab int, kt float64, rest float64) {
	if s.stopped {
		return
	}
	R := s.n - b
	cap := math.Inf(1)
	if !math.IsInf(s.theta, 1) {
		cap = float64(R-1) * s.theta
	}
	free := s.theta - s.load[b]
	if free < 0 {
		return
	}
	tb := s.scratch[b]
	if rest+tb[i].sufMinV-math.Min(free, tb[i].sufMaxW) > cap+s.slop(R) {
		return
	}
	if i == len(s.order) {
		s.bin(b+1, kt, ktab)
		return
	}
	t := s.order[i]
	if t == ktab {
		s.fill(b, i+1, ktab, kt, rest+s.leftW[t])
		return
	}
	if s.tick() {
		return
	}
	s.options(b, t, kt, ktab, func(li, k int, w, r float64) bool {
		if k < 0 { // nothing from t in this SparseCore
			s.fill(b, i+1, ktab, kt, rest+r)
			return !s.stopped
		}
		if s.load[b]+w > s.theta {
			return true
		}
		committed := s.layout[t] >= 0
		if !committed {
			s.commit(t, li)
		}
		if s.place(t, k, b) {
			s.fill(b, i+1, ktab, kt, rest+r)
			s.unplace(t, k, b)
		}
		if !committed {
			s.layout[t] = -1
		}
		return !s.stopped
	})
}

func (s *bcState) leaf() {
	cost := 0.0
	for _, l := range s.load {
		cost = math.Max(cost, l)
	}
	if cost >= s.best {
		return
	}
	a := &assignment{layouts: make([]int, len(s.layout)), scs: make([][]int, len(s.layout)), cost: cost}
	for t := range s.layout {
		l := &s.ls[t][s.layout[t]]
		a.layouts[t] = l.li
		a.scs[t] = make([]int, l.n)
		for k, sp := range l.specs {
			a.scs[t][sp.orig] = s.sc[t][k]
		}
	}
	s.best, s.bestA = cost, a
	s.theta = cost * s.keep
}
