package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/sigdata/sig/internal/units"
)

// The heuristic solver, for models with hundreds of tables.
//
//  1. Layout choice, guided by the LP relaxation: its value z is the best
//     cost any plan could reach, so each table takes its least-work layout
//     whose largest shard is at most z. Big tables get row (and, if
//     element-wise, column) splits just fine enough to be packed; small
//     tables stay whole (table partitioning), which costs the least
//     per-shard overhead. If the finished plan is more than multiStartGap
//     above z, the whole heuristic runs again with thresholds z/2, z/4, z/8
//     (smaller shards pack better on few SparseCores) and the best plan wins.
//  2. Greedy placement, largest shard first, each on the least-loaded
//     SparseCore that does not hold the table yet and whose chip has HBM
//     left (longest-processing-time first). If a shard does not fit, its
//     table takes the next layout with smaller shards and placement starts
//     over; if that runs out, a memory-first packing (largest shard first on
//     the chip with the most free HBM) is tried before reporting
//     ErrOutOfMemory.
//  3. Local search on the most loaded SparseCore: the best move of one of
//     its shards elsewhere, else the best swap with a smaller shard
//     elsewhere, else an exact re-partition of its shards and another
//     SparseCore's, else re-splitting one of its tables more finely. A step
//     is taken only if every SparseCore it touches ends below the old
//     maximum, so the sorted load vector falls and the search ends. On up to
//     maxPolishNodes SparseCores, every pair is also re-partitioned in turn
//     (polish), which flattens the loads and opens room for more steps.
//  4. Kicks: a seeded random change — another layout for a table on the
//     most loaded SparseCore, or a move or swap out of it — then local
//     search again, keeping the best plan seen.

type ref struct{ t, i int32 }

type hState struct {
	cm      *costModel
	load    []float64
	chipMem []int64
	layout  []int         // per table: index into layouts
	specs   [][]shardSpec // per table: shards of the current layout
	sc      [][]int       // per table: SparseCore of each shard, -1 if unplaced
	onSC    [][]ref       // per SparseCore: its shards
}

func newHState(cm *costModel) *hState {
	T := len(cm.tables)
	return &hState{
		cm:      cm,
		load:    make([]float64, cm.nodes),
		chipMem: make([]int64, cm.topo.Chips),
		layout:  make([]int, T),
		specs:   make([][]shardSpec, T),
		sc:      make([][]int, T),
		onSC:    make([][]ref, cm.nodes),
	}
}

func (st *hState) chip(j int) int { return j / st.cm.perChip }

func (st *hState) setLayout(t, li int) {
	tm := st.cm.tables[t]
	st.layout[t] = li
	st.specs[t] = st.cm.shardSpecs(tm, tm.layouts[li])
	st.sc[t] = make([]int, len(st.specs[t]))
	for i := range st.sc[t] {
		st.sc[t][i] = -1
	}
}

func (st *hState) hasTable(t, j int) bool {
	for _, s := range st.sc[t] {
		if s == j {
			return true
		}
	}
	return false
}

func (st *hState) place(t, i, j int) {
	s := &st.specs[t][i]
	st.load[j] += s.time
	st.chipMem[st.chip(j)] += s.mem
	st.sc[t][i] = j
	st.onSC[j] = append(st.onSC[j], ref{int32(t), int32(i)})
}

func (st *hState) unplace(t, i int) {
	j := st.sc[t][i]
	s := &st.specs[t][i]
	st.load[j] -= s.time
	st.chipMem[st.chip(j)] -= s.mem
	st.sc[t][i] = -1
	l := st.onSC[j]
	for k, r := range l {
		if r.t == int32(t) && r.i == int32(i) {
			copy(l[k:], l[k+1:])
			st.onSC[j] = l[:len(l)-1]
			return
		}
	}
	panic("partition: unplace of a shard not on its SparseCore")
}

func (st *hState) fits(j int, mem int64) bool {
	return st.chipMem[st.chip(j)]+mem <= st.cm.hbm
}

// leastLoaded is the least-loaded SparseCore that can take shard i of
// table t, or -1.
func (st *hState) leastLoaded(t, i int) int {
	best := -1
	mem := st.specs[t][i].mem
	for j := range st.load {
		if (best < 0 || st.load[j] < st.load[best]) && st.fits(j, mem) && !st.hasTable(t, j) {
			best = j
		}
	}
	return best
}

// sortedRefs lists the unplaced shards of tables, largest time first.
func (st *hState) sortedRefs(tables []int, key func(s *shardSpec) float64) []ref {
	var refs []ref
	for _, t := range tables {
		for i := range st.specs[t] {
			refs = append(refs, ref{int32(t), int32(i)})
		}
	}
	sort.SliceStable(refs, func(a, b int) bool {
		return key(&st.specs[refs[a].t][refs[a].i]) > key(&st.specs[refs[b].t][refs[b].i])
	})
	return refs
}

func byTime(s *shardSpec) float64 { return s.time }
func byMem(s *shardSpec) float64  { return float64(s.mem) }

// greedy places the given shards largest first, each on its least-loaded
// feasible SparseCore. It returns the table of the first shard that did not
// fit, or -1.
func (st *hState) greedy(refs []ref) int {
	for _, r := range refs {
		t, i := int(r.t), int(r.i)
		j := st.leastLoaded(t, i)
		if j < 0 {
			return t
		}
		st.place(t, i, j)
	}
	return -1
}

func (st *hState) clear() {
	st.emptySparseCores()
	for t := range st.sc {
		for i := range st.sc[t] {
			st.sc[t][i] = -1
		}
	}
}

func (st *hState) allTables() []int {
	ts := make([]int, len(st.specs))
	for t := range ts {
		ts[t] = t
	}
	return ts
}

func (st *hState) maxLoad() (int, float64) {
	jm := 0
	for j, l := range st.load {
		if l > st.load[jm] {
			jm = j
		}
	}
	return jm, st.load[jm]
}

// recompute rebuilds loads from scratch, dropping the roundoff that += and
// -= accumulate.
func (st *hState) recompute() {
	for j := range st.load {
		st.load[j] = 0
		for _, r := range st.onSC[j] {
			st.load[j] += st.specs[r.t][r.i].time
		}
	}
}

func (st *hState) snapshot() *assignment {
	st.recompute()
	a := &assignment{layouts: append([]int(nil), st.layout...), scs: make([][]int, len(st.sc))}
	for t := range st.sc {
		a.scs[t] = append([]int(nil), st.sc[t]...)
	}
	_, a.cost = st.maxLoad()
	return a
}

// emptySparseCores takes every shard off the SparseCores and chips (their
// loads, shard lists and HBM), not off the tables' assignments.
func (st *hState) emptySparseCores() {
	for j := range st.load {
		st.load[j] = 0
		st.onSC[j] = st.onSC[j][:0]
	}
	for c := range st.chipMem {
		st.chipMem[c] = 0
	}
}

func (st *hState) restore(a *assignment) {
	st.emptySparseCores()
	for t := range a.layouts {
		st.setLayout(t, a.layouts[t])
		for i, j := range a.scs[t] {
			st.place(t, i, j)
		}
	}
	st.recompute()
}

// multiStartGap is the gap to the LP value above which the heuristic also
// tries finer layouts.
const multiStartGap = 0.005

func (cm *costModel) heuristic(opts Options) (*assignment, error) {
	z := cm.lpValue()
	var best *assignment
	var firstErr error
	// Start 0 takes the least splitting the LP allows. When that packs
	// poorly (few SparseCores, big tables), smaller shards pack better at
	// the price of more shard overhead, so thresholds z/2, z/4, z/8 are
	// tried too and the best plan is kept.
	for k := 0; k < 4; k++ {
		a, err := cm.heuristicStart(opts, z*math.Pow(0.5, float64(k)))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if best == nil || a.cost < best.cost*(1-1e-12) {
			best = a
		}
		if best.cost <= z*(1+multiStartGap) {
			break
		}
	}
	if best == nil {
		return nil, firstErr
	}
	return best, nil
}

// heuristicStart runs the heuristic with every table on its least-work
// layout whose largest shard is at most threshold (or its smallest largest
// shard, if none is).
func (cm *costModel) heuristicStart(opts Options, threshold float64) (*assignment, error) {
	st := newHState(cm)
	threshold *= 1 + 1e-9
	for t, tm := range cm.tables {
		li := -1
		for k, l := range tm.layouts { // sorted by work
			if l.maxShard <= threshold {
				li = k
				break
			}
		}
		if li < 0 {
			li = 0
			for k, l := range tm.layouts {
				if l.maxShard < tm.layouts[li].maxShard {
					li = k
				}
			}
		}
		st.setLayout(t, li)
	}
	if err := st.initialPlacement(); err != nil {
		return nil, err
	}
	st.improve(opts.LocalSearchMoves)
	best := st.snapshot()

	rng := rand.New(rand.NewPCG(opts.Seed, 0x5167_7061_7274)) // "Sigpart"
	for k := 0; k < opts.Kicks; k++ {
		if !st.kick(rng) {
			continue
		}
		st.improve(opts.LocalSearchMoves)
		if a := st.snapshot(); a.cost < best.cost*(1-1e-12) {
			best = a
		} else {
			st.restore(best)
		}
	}
	return best, nil
}

// initialPlacement runs greedy placement, refining the layout of a table
// whose shard did not fit, then falls back to memory-first packing.
func (st *hState) initialPlacement() error {
	for tries := 0; tries <= 4*len(st.specs); tries++ {
		st.clear()
		failed := st.greedy(st.sortedRefs(st.allTables(), byTime))
		if failed < 0 {
			return nil
		}
		if !st.refine(failed) {
			break
		}
	}
	// Memory-first: every table on its layout with the smallest shards,
	// largest shard first onto the chip with the most free HBM.
	for t, tm := range st.cm.tables {
		li := 0
		for k, l := range tm.layouts {
			if l.maxMem < tm.layouts[li].maxMem {
				li = k
			}
		}
		st.setLayout(t, li)
	}
	st.clear()
	for _, r := range st.sortedRefs(st.allTables(), byMem) {
		t, i := int(r.t), int(r.i)
		mem := st.specs[t][i].mem
		best := -1
		for j := range st.load {
			if !st.fits(j, mem) || st.hasTable(t, j) {
				continue
			}
			if best < 0 {
				best = j
				continue
			}
			fj, fb := st.chipMem[st.chip(j)], st.chipMem[st.chip(best)]
			if fj < fb || (fj == fb && st.load[j] < st.load[best]) {
				best = j
			}
		}
		if best < 0 {
			free := make([]string, len(st.chipMem))
			for c, m := range st.chipMem {
				free[c] = units.Bytes(st.cm.hbm - m)
			}
			return fmt.Errorf("%w: table %q: no chip has room for a %s shard (free HBM per chip after packing the larger shards: %v)",
				ErrOutOfMemory, st.cm.tables[t].tb.Name, units.Bytes(mem), free)
		}
		st.place(t, i, best)
	}
	return nil
}

// refine moves table t to the least-work layout whose largest shard needs
// less HBM than now. It reports false if there is none.
func (st *hState) refine(t int) bool {
	tm := st.cm.tables[t]
	cur := tm.layouts[st.layout[t]].maxMem
	for k, l := range tm.layouts {
		if l.maxMem < cur {
			st.setLayout(t, k)
			return true
		}
	}
	return false
}

// maxPolishNodes is the largest SparseCore count polish runs on: it visits
// every pair.
const maxPolishNodes = 16

// improve alternates descend and polish until neither lowers the maximum.
func (st *hState) improve(maxMoves int) {
	for round := 0; round < 16; round++ {
		st.descend(maxMoves)
		if len(st.load) > maxPolishNodes {
			return
		}
		_, before := st.maxLoad()
		st.polish(8)
		st.descend(maxMoves)
		if _, after := st.maxLoad(); after >= before*(1-1e-12) {
			return
		}
	}
}

// descend runs local search on the most loaded SparseCore until no step
// helps or maxMoves steps were taken.
func (st *hState) descend(maxMoves int) {
	for moves := 0; moves < maxMoves; moves++ {
		if moves%256 == 255 {
			st.recompute()
		}
		j, L := st.maxLoad()
		if L <= 0 {
			return
		}
		limit := L - 1e-12*L
		if !st.bestMove(j, L, limit) && !st.bestSwap(j, L, limit) && !st.rebalance(j, limit) && !st.resplit(j, limit) {
			return
		}
	}
}

// bestMove moves the shard of SparseCore jm whose move to another
// SparseCore most lowers the larger of the two loads, if that ends below
// limit.
func (st *hState) bestMove(jm int, L, limit float64) bool {
	bestVal, bestR, bestJ := limit, ref{-1, -1}, -1
	for _, r := range st.onSC[jm] {
		t, i := int(r.t), int(r.i)
		s := &st.specs[t][i]
		for j := range st.load {
			if j == jm {
				continue
			}
			v := math.Max(L-s.time, st.load[j]+s.time)
			if v >= bestVal {
				continue
			}
			if (st.chip(j) != st.chip(jm) && !st.fits(j, s.mem)) || st.hasTable(t, j) {
				continue
			}
			bestVal, bestR, bestJ = v, r, j
		}
	}
	if bestJ < 0 {
		return false
	}
	st.unplace(int(bestR.t), int(bestR.i))
	st.place(int(bestR.t), int(bestR.i), bestJ)
	return true
}

// bestSwap exchanges a shard of jm with a smaller shard elsewhere, choosing
// the pair that most lowers the larger of the two loads, if below limit.
func (st *hState) bestSwap(jm int, L, limit float64) bool {
	bestVal := limit
	var bestA, bestB ref
	bestJ := -1
	cm := st.chip(jm)
	for _, a := range st.onSC[jm] {
		sa := &st.specs[a.t][a.i]
		for j := range st.load {
			// A swap adds at least sa.time - sb.time > 0 to j, so j must
			// have room below the best value found so far.
			if j == jm || st.load[j] >= bestVal {
				continue
			}
			cj := st.chip(j)
			for _, b := range st.onSC[j] {
				sb := &st.specs[b.t][b.i]
				if sb.time >= sa.time {
					continue
				}
				v := math.Max(L-sa.time+sb.time, st.load[j]-sb.time+sa.time)
				if v >= bestVal {
					continue
				}
				if a.t != b.t && (st.hasTable(int(a.t), j) || st.hasTable(int(b.t), jm)) {
					continue
				}
				if cj != cm && (st.chipMem[cm]-sa.mem+sb.mem > st.cm.hbm || st.chipMem[cj]-sb.mem+sa.mem > st.cm.hbm) {
					continue
				}
				bestVal, bestA, bestB, bestJ = v, a, b, j
			}
		}
	}
	if bestJ < 0 {
		return false
	}
	st.swap(bestA, jm, bestB, bestJ)
	return true
}

func (st *hState) swap(a ref, ja int, b ref, jb int) {
	st.unplace(int(a.t), int(a.i))
	st.unplace(int(b.t), int(b.i))
	st.place(int(a.t), int(a.i), jb)
	st.place(int(b.t), int(b.i), ja)
}

// resplit gives one of jm's tables a layout with smaller shards and places
// its shards again, if every SparseCore that changed ends below limit.
func (st *hState) resplit(jm int, limit float64) bool {
	// Tables on jm, by the size of their shard there.
	type cand struct {
		t    int
		time float64
	}
	var cs []cand
	for _, r := range st.onSC[jm] {
		cs = append(cs, cand{int(r.t), st.specs[r.t][r.i].time})
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].time > cs[b].time })
	for _, c := range cs[:min(len(cs), 2)] {
		tm := st.cm.tables[c.t]
		tried := 0
		for li, l := range tm.layouts {
			if tried == 3 {
				break
			}
			if li == st.layout[c.t] || l.maxShard >= c.time {
				continue
			}
			tried++
			if st.tryLayout(c.t, li, limit) {
				return true
			}
		}
	}
	return false
}

func (st *hState) tryLayout(t, li int, limit float64) bool {
	oldLayout := st.layout[t]
	oldSC := append([]int(nil), st.sc[t]...)
	oldSpecs := st.specs[t]
	for i := range oldSC {
		st.unplace(t, i)
	}
	st.setLayout(t, li)
	ok := st.greedy(st.sortedRefs([]int{t}, byTime)) < 0
	if ok {
		// Every SparseCore that gained a shard must stay below the limit;
		// those that only lost shards went down.
		for _, j := range st.sc[t] {
			if st.load[j] >= limit {
				ok = false
				break
			}
		}
	}
	if ok {
		return true
	}
	for i, j := range st.sc[t] {
		if j >= 0 {
			st.unplace(t, i)
		}
	}
	st.layout[t], st.specs[t] = oldLayout, oldSpecs
	st.sc[t] = make([]int, len(oldSC))
	for i, j := range oldSC {
		st.place(t, i, j)
	}
	return false
}

// kick perturbs the plan at random, feasibly but not necessarily for the
// better: half the time it gives a table on the most loaded SparseCore
// another layout and places it greedily, otherwise it moves or swaps a shard
// out of that SparseCore. It reports false if it found nothing to do.
func (st *hState) kick(rng *rand.Rand) bool {
	jm, _ := st.maxLoad()
	if rng.IntN(2) == 0 && len(st.onSC[jm]) > 0 {
		t := int(st.onSC[jm][rng.IntN(len(st.onSC[jm]))].t)
		if n := len(st.cm.tables[t].layouts); n > 1 {
			li := rng.IntN(n - 1)
			if li >= st.layout[t] {
				li++
			}
			if st.tryLayout(t, li, math.Inf(1)) {
				return true
			}
		}
	}
	if len(st.onSC[jm]) == 0 || len(st.load) < 2 {
		return false
	}
	for attempt := 0; attempt < 64; attempt++ {
		a := st.onSC[jm][rng.IntN(len(st.onSC[jm]))]
		sa := &st.specs[a.t][a.i]
		j := rng.IntN(len(st.load) - 1)
		if j >= jm {
			j++
		}
		if len(st.onSC[j]) == 0 || rng.IntN(2) == 0 {
			if (st.chip(j) == st.chip(jm) || st.fits(j, sa.mem)) && !st.hasTable(int(a.t), j) {
				st.unplace(int(a.t), int(a.i))
				st.place(int(a.t), int(a.i), j)
				return true
			}
			continue
		}
		b := st.onSC[j][rng.IntN(len(st.onSC[j]))]
		sb := &st.specs[b.t][b.i]
		if a.t != b.t && (st.hasTable(int(a.t), j) || st.hasTable(int(b.t), jm)) {
			continue
		}
		cj, cm := st.chip(j), st.chip(jm)
		if cj != cm && (st.chipMem[cm]-sa.mem+sb.mem > st.cm.hbm || st.chipMem[cj]-sb.mem+sa.mem > st.cm.hbm) {
			continue
		}
		st.swap(a, jm, b, j)
		return true
	}
	return false
}

// maxPairShards caps the shards repartition splits exhaustively between two
// SparseCores (2^maxPairShards assignments).
const maxPairShards = 12

// rebalance re-partitions the shards of jm and one other SparseCore between
// the two optimally (exhaustively), trying partners from the least loaded
// up, and takes the first re-partition whose larger load ends below limit.
// It balances finely where single moves and swaps cannot: multiway number
// partitioning improved one pair at a time.
func (st *hState) rebalance(jm int, limit float64) bool {
	partners := make([]int, 0, len(st.load)-1)
	for j := range st.load {
		if j != jm {
			partners = append(partners, j)
		}
	}
	sort.SliceStable(partners, func(a, b int) bool { return st.load[partners[a]] < st.load[partners[b]] })
	for _, j := range partners {
		if st.repartition(jm, j, limit) {
			return true
		}
	}
	return false
}

// polish balances every pair of SparseCores in turn (repartition to the
// least larger load of the pair) until a pass changes nothing or maxPasses
// passes ran. No step raises the maximum load; together they flatten the
// load profile so that descend finds room it did not have. Used when the
// pairs are few enough (small models), where single moves stall.
func (st *hState) polish(maxPasses int) {
	n := len(st.load)
	for pass := 0; pass < maxPasses; pass++ {
		changed := false
		for a := 0; a < n; a++ {
			for b := a + 1; b < n; b++ {
				hi := math.Max(st.load[a], st.load[b])
				if st.repartition(a, b, hi-1e-12*hi) {
					changed = true
				}
			}
		}
		if !changed {
			return
		}
	}
}

// repartition splits the shards of SparseCores a and b between them so
// that the larger of the two loads is least, subject to a table's shards
// staying on distinct SparseCores and chip HBM, and applies it if that load
// is below limit.
func (st *hState) repartition(a, b int, limit float64) bool {
	na := len(st.onSC[a])
	n := na + len(st.onSC[b])
	if n > maxPairShards || n == 0 {
		return false
	}
	var items [maxPairShards]ref
	var times [maxPairShards]float64
	var mems [maxPairShards]int64
	copy(items[:], st.onSC[a])
	copy(items[na:], st.onSC[b])
	var total float64
	var totalMem int64
	baseA, baseB := st.load[a], st.load[b]
	for k := 0; k < n; k++ {
		sp := &st.specs[items[k].t][items[k].i]
		times[k], mems[k] = sp.time, sp.mem
		total += sp.time
		totalMem += sp.mem
		if k < na {
			baseA -= sp.time
		} else {
			baseB -= sp.time
		}
	}
	// Shards of one table must be split between a and b.
	var conflicts [][2]int
	for x := 0; x < n; x++ {
		for y := x + 1; y < n; y++ {
			if items[x].t == items[y].t {
				conflicts = append(conflicts, [2]int{x, y})
			}
		}
	}
	ca, cb := st.chip(a), st.chip(b)
	memA, memB := st.chipMem[ca], st.chipMem[cb]
	for k := 0; k < n; k++ {
		if k < na {
			memA -= mems[k]
		} else {
			memB -= mems[k]
		}
	}
	cur := 1<<na - 1 // the current split: the first na items on a
	best, bestMask := limit, -1
	for mask := 0; mask < 1<<n; mask++ { // bit k set: item k on a
		var la float64
		var ma int64
		for k := 0; k < n; k++ {
			if mask&(1<<k) != 0 {
				la += times[k]
				ma += mems[k]
			}
		}
		v := math.Max(baseA+la, baseB+total-la)
		if v >= best || mask == cur {
			continue
		}
		ok := true
		for _, c := range conflicts {
			if (mask>>c[0])&1 == (mask>>c[1])&1 {
				ok = false
				break
			}
		}
		if !ok || (ca != cb && (memA+ma > st.cm.hbm || memB+totalMem-ma > st.cm.hbm)) {
			continue
		}
		best, bestMask = v, mask
	}
	if bestMask < 0 {
		return false
	}
	for k := 0; k < n; k++ {
		st.unplace(int(items[k].t), int(items[k].i))
	}
	for k := 0; k < n; k++ {
		if bestMask&(1<<k) != 0 {
			st.place(int(items[k].t), int(items[k].i), a)
		} else {
			st.place(int(items[k].t), int(items[k].i), b)
		}
	}
	return true
}
