package partition

import (
	"fmt"
	"math"
	"time"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/units"
)

// Solver names a search strategy.
type Solver string

const (
	// Heuristic is greedy placement guided by the LP relaxation, then local
	// search. For large models; deterministic for a given Seed.
	Heuristic Solver = "heuristic"
	// Exact is bin completion over the integer program (exact.go), seeded
	// with the heuristic's plan and bounded by NodeLimit and TimeBudget. For
	// small models.
	Exact Solver = "exact"
)

// Options tune Solve. The zero value is usable.
type Options struct {
	// Solver is Heuristic (the default) or Exact.
	Solver Solver
	// Seed drives the heuristic's perturbations; the same seed gives the
	// same plan.
	Seed uint64
	// LocalSearchMoves caps the improving moves of one local search
	// descent. Default 20000.
	LocalSearchMoves int
	// Kicks is the number of random perturbations the heuristic tries after
	// its first local optimum, keeping the best plan. Default 16.
	Kicks int
	// NodeLimit caps the exact solver's search nodes (SparseCores opened
	// and fill decisions), so it never runs away; a search stopped early
	// reports its remaining gap. Default 30,000,000 (the 20-table,
	// 8-SparseCore benchmark needs about 9 million, searched at about 2.5
	// million a second in bench/embeddings.txt). Deterministic, unlike
	// TimeBudget.
	NodeLimit int64
	// TimeBudget, if positive, also stops the exact search after this much
	// time on Clock.
	TimeBudget time.Duration
	// GapTolerance lets the exact search stop once its plan is proved
	// within this relative gap of optimal, as MIP solvers do (their default
	// is 1e-4). Default 0: prove optimality. The reported gap is the proved
	// one either way.
	GapTolerance float64
	// Clock measures SolveTime and the time budget. Default clock.Real.
	Clock clock.Clock
}

// Defaults of Options.
const (
	DefaultLocalSearchMoves = 20000
	DefaultKicks            = 16
	DefaultNodeLimit        = 30_000_000
)

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.Solver == "" {
		o.Solver = Heuristic
	}
	if o.LocalSearchMoves == 0 {
		o.LocalSearchMoves = DefaultLocalSearchMoves
	}
	if o.Kicks == 0 {
		o.Kicks = DefaultKicks
	}
	if o.NodeLimit == 0 {
		o.NodeLimit = DefaultNodeLimit
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
}

// ParseSolver accepts "heuristic" or "exact".
func ParseSolver(s string) (Solver, error) {
	switch Solver(s) {
	case Heuristic, Exact:
		return Solver(s), nil
	}
	return "", fmt.Errorf("%w: unknown solver %q (want heuristic or exact)", ErrInvalidProblem, s)
}

// Solve partitions the problem's tables over its SparseCores. It returns a
// validated plan with its Report filled in, or an error wrapping
// ErrInvalidProblem or ErrOutOfMemory.
func Solve(p *Problem, opts Options) (*Plan, error) {
	opts.EnsureDefaults()
	if opts.Solver != Heuristic && opts.Solver != Exact {
		return nil, fmt.Errorf("%w: unknown solver %q", ErrInvalidProblem, opts.Solver)
	}
	if opts.LocalSearchMoves < 0 || opts.Kicks < 0 || opts.NodeLimit < 0 || opts.TimeBudget < 0 {
		return nil, fmt.Errorf("%w: negative solver option", ErrInvalidProblem)
	}
	if !(opts.GapTolerance >= 0 && opts.GapTolerance < 1) {
		return nil, fmt.Errorf("%w: gap tolerance must be in [0, 1), got %v", ErrInvalidProblem, opts.GapTolerance)
	}
	start := opts.Clock.Now()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	cm := newCostModel(p)
	if err := cm.prepare(); err != nil {
		return nil, err
	}

	h, herr := cm.heuristic(opts)
	if opts.Solver == Heuristic {
		if herr != nil {
			return nil, herr
		}
		bound, kind, err := cm.bound(false)
		if err != nil {
			return nil, err
		}
		plan := cm.buildPlan(h)
		cm.fillReport(plan, bound, kind)
		plan.Solver = string(Heuristic)
		plan.SolveTime = opts.Clock.Now().Sub(start)
		return plan, cm.checkMemory(plan)
	}

	bound, kind, err := cm.bound(true)
	if err != nil {
		return nil, err
	}
	var incumbent *assignment
	if herr == nil && cm.fits(h) {
		incumbent = h
	}
	res := cm.binCompletion(incumbent, bound, opts, start)
	if res.best == nil {
		if res.complete {
			return nil, fmt.Errorf("%w: no placement of the candidate layouts fits the per-chip HBM (exact search, %d nodes)", ErrOutOfMemory, res.nodes)
		}
		return nil, fmt.Errorf("%w: no plan that fits the per-chip HBM found within %d nodes (heuristic: %v)", ErrOutOfMemory, res.nodes, herr)
	}
	if res.complete {
		bound, kind = math.Max(bound, math.Min(res.provenBound, res.best.cost)), "exact search complete"
	}
	plan := cm.buildPlan(res.best)
	cm.fillReport(plan, bound, kind)
	plan.Solver = string(Exact)
	plan.Optimal = res.complete && plan.Gap == 0
	plan.Nodes = res.nodes
	plan.SolveTime = opts.Clock.Now().Sub(start)
	return plan, cm.checkMemory(plan)
}

// prepare builds every table's candidate layouts and rejects problems that
// provably cannot fit.
func (cm *costModel) prepare() error {
	var total float64
	for _, tm := range cm.tables {
		cm.buildLayouts(tm)
		if len(tm.layouts) == 0 {
			tb := tm.tb
			K := min(int64(cm.nodes), tb.Vocab)
			return fmt.Errorf("%w: table %q: even split into %d row parts, a part needs %s of HBM, more than a chip's %s",
				ErrOutOfMemory, tb.Name, K, units.Bytes((tb.Vocab+K-1)/K*tb.rowStateBytes(tb.Dim)), units.Bytes(cm.hbm))
		}
		total += float64(tm.minLayoutMem())
	}
	if capacity := float64(cm.hbm) * float64(cm.topo.Chips); total > capacity {
		return fmt.Errorf("%w: the tables need %s of HBM in all, the %d chips hold %s",
			ErrOutOfMemory, floatBytes(total), cm.topo.Chips, floatBytes(capacity))
	}
	return nil
}

// bound is the root lower bound: the larger of the LP relaxation (by
// gonum's simplex when simplex is set and the LP is small enough, else by
// the closed form) and the integral-layout bound (bound.go).
func (cm *costModel) bound(simplex bool) (float64, string, error) {
	for _, tm := range cm.tables {
		if len(tm.layouts) == 0 {
			cm.buildLayouts(tm)
		}
		if len(tm.layouts) == 0 {
			return 0, "none (a table has no candidate layout that fits a chip)", nil
		}
	}
	lpv, kind := cm.lpValue(), "lp relaxation (closed form)"
	if simplex {
		if v, err := cm.rootLP(); err == nil {
			lpv, kind = v, "lp relaxation (gonum simplex)"
		}
	}
	b := math.Max(lpv, cm.analyticBound())
	if ib := cm.integralBound(); ib > b {
		b, kind = ib, "integral-layout bound"
	}
	return b, kind, nil
}

// assignment is a solver's result: a layout per table and a SparseCore per
// shard.
type assignment struct {
	layouts []int   // per table, index into tableModel.layouts
	scs     [][]int // per table, SparseCore of each shard in shardSpecs order
	cost    float64
}

// fits reports whether an assignment respects every chip's HBM, checked
// independently of the solver that produced it: the exact search must not
// inherit an infeasible incumbent.
func (cm *costModel) fits(a *assignment) bool {
	mem := make([]int64, cm.topo.Chips)
	for t, tm := range cm.tables {
		for i, s := range cm.shardSpecs(tm, tm.layouts[a.layouts[t]]) {
			c := a.scs[t][i] / cm.perChip
			mem[c] += s.mem
			if mem[c] > cm.hbm {
				return false
			}
		}
	}
	return true
}

// buildPlan turns an assignment into a validated Plan.
func (cm *costModel) buildPlan(a *assignment) *Plan {
	plan := &Plan{SparseCores: cm.nodes, SparseCoresPerChip: cm.perChip}
	tables := make([]Table, len(cm.tables))
	for t, tm := range cm.tables {
		tables[t] = *tm.tb
		l := tm.layouts[a.layouts[t]]
		for i, s := range cm.shardSpecs(tm, l) {
			plan.Shards = append(plan.Shards, Shard{
				Table: tm.tb.Name, ColFrom: s.colFrom, ColTo: s.colTo,
				RowDist: l.dist, RowPart: s.part, RowParts: l.parts,
				SparseCore: a.scs[t][i],
			})
		}
	}
	if err := plan.Validate(tables); err != nil {
		// The solvers only emit grid layouts; this is a bug.
		panic(fmt.Sprintf("partition: solver produced an invalid plan: %v", err))
	}
	return plan
}
