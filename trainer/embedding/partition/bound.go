package partition

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Lower bounds. Every plan reports a lower bound on the cost of any plan in
// the search space and the relative gap to it.
//
// The integer program behind the exact solver (exact.go) has binaries
// y[t,L] (table t uses layout L) and x[s,j] (shard s on SparseCore j):
//
//	minimize z
//	  Σ_L y[t,L] = 1                       for every table t
//	  Σ_j x[s,j] = y[t,L]                  for every shard s of layout L of t
//	  Σ_s time(s)·x[s,j] ≤ z               for every SparseCore j
//	  Σ_L maxShard(t,L)·y[t,L] ≤ z         for every table t (valid cut: a shard is never split)
//	  Σ_{j on chip c} Σ_s mem(s)·x[s,j] ≤ HBM   for every chip c
//
// Its LP relaxation can spread every shard evenly over all SparseCores, so the
// per-SparseCore rows collapse into one, and the relaxation is the small LP
//
//	minimize z  s.t.  Σ_L y[t,L] = 1,  N·z ≥ Σ_{t,L} work(t,L)·y[t,L],
//	                  z ≥ Σ_L maxShard(t,L)·y[t,L],  y ≥ 0
//
// (dropping the memory rows, which only weakens a lower bound). rootLP solves
// it with gonum's simplex. Because the only coupling between tables is the
// one work row, the same LP also has a closed form: for a fixed z, table t
// should pick the cheapest mix of layouts whose mean largest shard is at most
// z, which is the lower convex hull f_t of its (maxShard, work) points; the LP
// value is the least z with N·z ≥ Σ_t f_t(z). lpValue finds it by bisection.
// With some shards already on SparseCores the same argument gives the
// water-filling form Σ_j (z - load_j)^+ ≥ remaining work (waterfill); the
// root LP is its case with no loads, and the shard-by-shard search kept in
// the tests as an oracle bounds its nodes with it. The exact solver's own
// bound, the slack of bin completion, is the integral version of this
// inequality, filled one SparseCore at a time (exact.go). Tests check that
// the simplex and the closed form agree.

// hull is the lower-left convex hull of a table's (maxShard, work) points:
// f(z) is the least mean work of a mix of layouts with mean largest shard at
// most z.
type hull struct {
	m, w []float64 // vertices, m increasing, w non-increasing
}

func buildHull(ls []*layout) hull {
	if len(ls) == 0 {
		return hull{}
	}
	// The least-work point with the smallest largest shard ends the hull: to
	// its right f is flat.
	best := ls[0]
	for _, l := range ls[1:] {
		if l.work < best.work || (l.work == best.work && l.maxShard < best.maxShard) {
			best = l
		}
	}
	type pt struct{ m, w float64 }
	var pts []pt
	for _, l := range ls {
		if l.maxShard <= best.maxShard {
			pts = append(pts, pt{l.maxShard, l.work})
		}
	}
	sort.Slice(pts, func(i, j int) bool {
		if pts[i].m != pts[j].m {
			return pts[i].m < pts[j].m
		}
		return pts[i].w < pts[j].w
	})
	var h []pt
	for _, p := range pts {
		if n := len(h); n > 0 && h[n-1].m == p.m {
			continue // same m, larger w
		}
		// Pop while the last two hull points and p do not turn left.
		for n := len(h); n >= 2; n = len(h) {
			a, b := h[n-2], h[n-1]
			if (b.m-a.m)*(p.w-a.w)-(b.w-a.w)*(p.m-a.m) > 0 {
				break
			}
			h = h[:n-1]
		}
		h = append(h, p)
	}
	out := hull{m: make([]float64, len(h)), w: make([]float64, len(h))}
	for i, p := range h {
		out.m[i], out.w[i] = p.m, p.w
	}
	return out
}

// minShard is the smallest largest shard of any layout: no plan's cost is
// below it.
func (h *hull) minShard() float64 { return h.m[0] }

// minWork is the least total work of any layout.
func (h *hull) minWork() float64 { return h.w[len(h.w)-1] }

// f is the least mean work with mean largest shard at most z (+Inf if none).
func (h *hull) f(z float64) float64 {
	n := len(h.m)
	if z < h.m[0] {
		return math.Inf(1)
	}
	if z >= h.m[n-1] {
		return h.w[n-1]
	}
	i := sort.SearchFloat64s(h.m, z) // h.m[i-1] < z <= h.m[i]
	if h.m[i] == z {
		return h.w[i]
	}
	a, b := i-1, i
	t := (z - h.m[a]) / (h.m[b] - h.m[a])
	return h.w[a] + t*(h.w[b]-h.w[a])
}

// waterfill is the LP relaxation of completing a partial plan: SparseCores
// carry loads, fixed is work that must still be placed, and each table in
// hulls still needs a layout. It returns the least z ≥ zmin at which the
// free capacity Σ_j (z - load_j)^+ covers fixed + Σ f_t(z). The result is a
// lower bound: bisection returns the largest z it proved infeasible, unless
// zmin itself is feasible.
func waterfill(loads []float64, fixed float64, hulls []*hull, zmin float64) float64 {
	for _, h := range hulls {
		zmin = math.Max(zmin, h.minShard())
	}
	maxLoad := 0.0
	for _, l := range loads {
		maxLoad = math.Max(maxLoad, l)
	}
	zmin = math.Max(zmin, maxLoad)
	if capacityCovers(loads, fixed, hulls, zmin) {
		return zmin
	}
	need := fixed
	for _, h := range hulls {
		need += h.f(zmin)
	}
	lo, hi := zmin, maxLoad+need/float64(len(loads))
	for !capacityCovers(loads, fixed, hulls, hi) { // only roundoff gets here
		hi += math.Max(hi*1e-9, 1e-9)
	}
	for i := 0; i < 100 && hi-lo > 1e-13*hi; i++ {
		mid := lo + (hi-lo)/2
		if capacityCovers(loads, fixed, hulls, mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

func capacityCovers(loads []float64, fixed float64, hulls []*hull, z float64) bool {
	var capacity float64
	for _, l := range loads {
		if z > l {
			capacity += z - l
		}
	}
	need := fixed
	for _, h := range hulls {
		need += h.f(z)
		if need > capacity {
			return false
		}
	}
	return need <= capacity
}

// lpValue is the root LP relaxation by the closed form.
func (cm *costModel) lpValue() float64 {
	hulls := make([]*hull, len(cm.tables))
	for i, tm := range cm.tables {
		hulls[i] = &tm.hull
	}
	return waterfill(make([]float64, cm.nodes), 0, hulls, 0)
}

// analyticBound is max(Σ_t minWork_t / N, max_t minShard_t): weaker than the
// LP, and what the LP must never fall below.
func (cm *costModel) analyticBound() float64 {
	var sum, big float64
	for _, tm := range cm.tables {
		sum += tm.hull.minWork()
		big = math.Max(big, tm.hull.minShard())
	}
	return math.Max(sum/float64(cm.nodes), big)
}

// maxSimplexCells bounds the dense matrix handed to gonum's simplex; larger
// relaxations use the closed form.
const maxSimplexCells = 4 << 20

// rootLP solves the relaxation above with gonum's simplex in standard form
// (minimize cᵀx s.t. Ax = b, x ≥ 0, A of full row rank). Columns: every
// y[t,L], then z, then one slack for the work row and one per table for its
// largest-shard row. Rows: T assignment rows Σ_L y = 1; the work row
// Σ work·y - N·z + s = 0; T rows Σ_L maxShard·y - z + s_t = 0. Each row owns
// a column nobody else has (a y of its table, or its slack), so A has full
// row rank.
func (cm *costModel) rootLP() (float64, error) {
	T := len(cm.tables)
	var nY int
	for _, tm := range cm.tables {
		nY += len(tm.layouts)
	}
	rows, cols := 2*T+1, nY+2+T
	if rows*cols > maxSimplexCells {
		return 0, fmt.Errorf("relaxation too large for the dense simplex (%d×%d)", rows, cols)
	}
	// Scale times to O(1) so the simplex tolerances mean something.
	scale := cm.analyticBound()
	if scale <= 0 {
		scale = 1
	}
	A := mat.NewDense(rows, cols, nil)
	b := make([]float64, rows)
	c := make([]float64, cols)
	zCol := nY
	c[zCol] = 1
	workRow := T
	A.Set(workRow, zCol, -float64(cm.nodes))
	A.Set(workRow, nY+1, 1)
	col := 0
	for t, tm := range cm.tables {
		b[t] = 1
		shardRow := T + 1 + t
		A.Set(shardRow, zCol, -1)
		A.Set(shardRow, nY+2+t, 1)
		for _, l := range tm.layouts {
			A.Set(t, col, 1)
			A.Set(workRow, col, l.work/scale)
			A.Set(shardRow, col, l.maxShard/scale)
			col++
		}
	}
	opt, _, err := lp.Simplex(c, A, b, 1e-10, nil)
	if err != nil {
		return 0, err
	}
	return opt * scale, nil
}

// integralBound strengthens the LP at the root by not letting a table mix
// layouts: every table takes one whole layout, whose largest shard must be
// at most the cost z, so z is at least the least value with
//
//	N·z ≥ Σ_t min{ work(t,L) : maxShard(t,L) ≤ z }.
//
// The right side falls as z grows and the left rises, so bisection finds
// it; as in waterfill, the largest z proved infeasible is returned.
func (cm *costModel) integralBound() float64 {
	type step struct{ m, w []float64 } // by maxShard ascending, w = least work so far from the right
	steps := make([]step, len(cm.tables))
	lo := 0.0
	for i, tm := range cm.tables {
		ls := append([]*layout(nil), tm.layouts...)
		sort.Slice(ls, func(a, b int) bool { return ls[a].maxShard < ls[b].maxShard })
		st := step{m: make([]float64, len(ls)), w: make([]float64, len(ls))}
		best := math.Inf(1)
		for k, l := range ls {
			best = math.Min(best, l.work)
			st.m[k], st.w[k] = l.maxShard, best
		}
		steps[i] = st
		lo = math.Max(lo, st.m[0])
	}
	feasible := func(z float64) bool {
		var need float64
		for _, st := range steps {
			k := sort.SearchFloat64s(st.m, z) // st.m[k-1] < z <= st.m[k]
			if k < len(st.m) && st.m[k] == z {
				k++
			}
			need += st.w[k-1]
		}
		return need <= float64(cm.nodes)*z
	}
	if feasible(lo) {
		return lo
	}
	hi := lo
	for !feasible(hi) {
		hi *= 2
	}
	for i := 0; i < 100 && hi-lo > 1e-13*hi; i++ {
		mid := lo + (hi-lo)/2
		if feasible(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}
