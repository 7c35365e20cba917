package partition

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The LP relaxation solved by gonum's simplex equals its closed form.
func TestRootLPSimplexMatchesClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for iter := 0; iter < 40; iter++ {
		g := modelSpec(1+rng.IntN(25), 1+rng.IntN(4), 1+rng.IntN(4), 1e6)
		p := genProblem(rng, g)
		cm := newCostModel(p)
		if p.Validate() != nil || cm.prepare() != nil {
			continue
		}
		simplex, err := cm.rootLP()
		if err != nil {
			t.Fatalf("iter %d: simplex: %v", iter, err)
		}
		closed := cm.lpValue()
		if math.Abs(simplex-closed) > 1e-7*closed {
			t.Fatalf("iter %d (%d tables, %d SparseCores): simplex %v, closed form %v", iter, len(p.Tables), cm.nodes, simplex, closed)
		}
		if a := cm.analyticBound(); a > closed*(1+1e-12) {
			t.Fatalf("iter %d: analytic bound %v above the LP %v", iter, a, closed)
		}
		if ib := cm.integralBound(); ib < closed*(1-1e-9) {
			t.Fatalf("iter %d: integral-layout bound %v below the LP %v", iter, ib, closed)
		}
	}
}

// Every bound is at most the true optimum (by enumeration), and the exact
// solver's reported bound too.
func TestBoundsBelowOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	checked := 0
	for iter := 0; iter < 150; iter++ {
		p := genProblem(rng, tinySpec(rng))
		cm := newCostModel(p)
		if p.Validate() != nil || cm.prepare() != nil {
			continue
		}
		opt := bruteForce(cm)
		if math.IsInf(opt, 1) {
			continue
		}
		for name, b := range map[string]float64{"lp": cm.lpValue(), "analytic": cm.analyticBound(), "integral": cm.integralBound()} {
			if b > opt*(1+1e-9) {
				t.Fatalf("iter %d: %s bound %v above the optimum %v", iter, name, b, opt)
			}
		}
		for _, s := range []Solver{Heuristic, Exact} {
			plan, err := Solve(p, Options{Solver: s})
			if err != nil {
				t.Fatalf("iter %d %s: %v", iter, s, err)
			}
			if plan.BoundNS > opt*(1+1e-9) || plan.CostNS < opt*(1-1e-9) {
				t.Fatalf("iter %d %s: bound %v, cost %v, optimum %v", iter, s, plan.BoundNS, plan.CostNS, opt)
			}
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d usable problems", checked)
	}
}

func TestHull(t *testing.T) {
	ls := []*layout{
		{maxShard: 100, work: 100}, // unsplit
		{maxShard: 52, work: 104},  // 2 parts
		{maxShard: 60, work: 130},  // dominated
		{maxShard: 27, work: 108},  // 4 parts
		{maxShard: 30, work: 200},  // dominated
		{maxShard: 14, work: 140},  // 8 parts
	}
	h := buildHull(ls)
	if h.minShard() != 14 || h.minWork() != 100 {
		t.Fatalf("hull ends (%v, %v), want (14, 100)", h.minShard(), h.minWork())
	}
	if !math.IsInf(h.f(13), 1) {
		t.Errorf("f below the smallest shard is %v, want +Inf", h.f(13))
	}
	if h.f(100) != 100 || h.f(1000) != 100 {
		t.Errorf("f right of the least-work layout: %v %v, want 100", h.f(100), h.f(1000))
	}
	prev := math.Inf(1)
	for z := 14.0; z <= 120; z += 0.5 {
		v := h.f(z)
		// f is non-increasing and lies on or below every layout it may use.
		if v > prev+1e-12 {
			t.Fatalf("f(%v) = %v rises from %v", z, v, prev)
		}
		for _, l := range ls {
			if l.maxShard <= z && v > l.work+1e-12 {
				t.Fatalf("f(%v) = %v above layout (%v, %v)", z, v, l.maxShard, l.work)
			}
		}
		prev = v
	}
	// Convex: midpoint below the chord.
	for a := 14.0; a < 100; a += 3 {
		for b := a + 1; b <= 100; b += 5 {
			if h.f((a+b)/2) > (h.f(a)+h.f(b))/2+1e-9 {
				t.Fatalf("f not convex between %v and %v", a, b)
			}
		}
	}
}
