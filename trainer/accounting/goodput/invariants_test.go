package goodput

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

const tolerance = 1e-9

func near(a, b float64) bool {
	return math.Abs(a-b) <= tolerance*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// checkSummary checks the identities doc.go promises for one scope.
func checkSummary(t *testing.T, name string, s Summary, fleet bool) {
	t.Helper()
	c := s.ChipSeconds
	var allAllocated float64
	for cat := Productive; cat <= Uncommitted; cat++ {
		allAllocated += c[cat]
	}
	for cat, v := range c {
		if v < 0 {
			t.Errorf("%s: %s = %v < 0", name, Category(cat), v)
		}
	}
	if !near(allAllocated, s.AllAllocatedChipSeconds) {
		t.Errorf("%s: categories sum to %v, all-allocated is %v", name, allAllocated, s.AllAllocatedChipSeconds)
	}
	if !near(s.AllAllocatedChipSeconds+c[PartialAllocation], s.HeldChipSeconds) {
		t.Errorf("%s: all-allocated + partial = %v, held %v", name, s.AllAllocatedChipSeconds+c[PartialAllocation], s.HeldChipSeconds)
	}
	if !near(s.HeldChipSeconds+c[UnmetDemand], s.DemandChipSeconds) {
		t.Errorf("%s: held + unmet = %v, demand %v", name, s.HeldChipSeconds+c[UnmetDemand], s.DemandChipSeconds)
	}
	if fleet {
		if !near(s.HeldChipSeconds+c[Unallocated], s.CapacityChipSeconds) {
			t.Errorf("%s: held + unallocated = %v, capacity %v", name, s.HeldChipSeconds+c[Unallocated], s.CapacityChipSeconds)
		}
		if !near(s.MPG, ratio(s.IdealChipSeconds, s.CapacityChipSeconds)) {
			t.Errorf("%s: MPG %v != ideal/capacity %v", name, s.MPG, ratio(s.IdealChipSeconds, s.CapacityChipSeconds))
		}
	} else if c[Unallocated] != 0 || s.CapacityChipSeconds != 0 {
		t.Errorf("%s: capacity or unallocated on a segment", name)
	}
	if s.IdealChipSeconds > c[Productive]*(1+tolerance) {
		t.Errorf("%s: ideal %v > productive %v", name, s.IdealChipSeconds, c[Productive])
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"SG", s.SG}, {"RG", s.RG}, {"PG", s.PG}, {"MPG", s.MPG}} {
		if r.v < 0 || r.v > 1+tolerance || math.IsNaN(r.v) {
			t.Errorf("%s: %s = %v outside [0, 1]", name, r.name, r.v)
		}
	}
	if !near(s.MPG, s.SG*s.RG*s.PG) {
		t.Errorf("%s: MPG %v != SG·RG·PG", name, s.MPG)
	}
}

// sumSummaries adds chip-seconds, the parts that aggregate by addition.
func sumSummaries(ss []Summary) Summary {
	var out Summary
	for _, s := range ss {
		out.DemandChipSeconds += s.DemandChipSeconds
		out.HeldChipSeconds += s.HeldChipSeconds
		out.AllAllocatedChipSeconds += s.AllAllocatedChipSeconds
		out.IdealChipSeconds += s.IdealChipSeconds
		for c := range s.ChipSeconds {
			out.ChipSeconds[c] += s.ChipSeconds[c]
		}
	}
	return out
}

func checkSum(t *testing.T, name string, got Summary, parts []Summary) {
	t.Helper()
	want := sumSummaries(parts)
	pairs := [][2]float64{
		{got.DemandChipSeconds, want.DemandChipSeconds},
		{got.HeldChipSeconds, want.HeldChipSeconds},
		{got.AllAllocatedChipSeconds, want.AllAllocatedChipSeconds},
		{got.IdealChipSeconds, want.IdealChipSeconds},
	}
	for c := range got.ChipSeconds {
		if Category(c) != Unallocated {
			pairs = append(pairs, [2]float64{got.ChipSeconds[c], want.ChipSeconds[c]})
		}
	}
	for i, p := range pairs {
		if !near(p[0], p[1]) {
			t.Errorf("%s: field %d = %v, sum of parts %v", name, i, p[0], p[1])
		}
	}
}

// checkReport checks every scope's identities and that totals are the sums
// of their parts: job = Σ its phases, fleet = Σ jobs = Σ fleet phases, fleet
// phase = Σ jobs' same phase.
func checkReport(t *testing.T, rep Report) {
	t.Helper()
	checkSummary(t, "fleet", rep.Fleet, true)
	var totals []Summary
	byPhase := map[string][]Summary{}
	for _, j := range rep.Jobs {
		checkSummary(t, j.Job, j.Total, false)
		for _, p := range j.Phases {
			checkSummary(t, j.Job+"/"+p.Phase, p, false)
			byPhase[p.Phase] = append(byPhase[p.Phase], p)
		}
		checkSum(t, j.Job+" = Σ phases", j.Total, j.Phases)
		totals = append(totals, j.Total)
	}
	checkSum(t, "fleet = Σ jobs", rep.Fleet, totals)
	checkSum(t, "fleet = Σ phases", rep.Fleet, rep.Phases)
	if len(rep.Phases) != len(byPhase) {
		t.Errorf("%d fleet phases, jobs have %d", len(rep.Phases), len(byPhase))
	}
	for _, p := range rep.Phases {
		checkSummary(t, "fleet/"+p.Phase, p, false)
		checkSum(t, "fleet/"+p.Phase+" = Σ jobs", p, byPhase[p.Phase])
	}
}

// TestInvariantsTestdata checks the identities on every hand-checked case.
func TestInvariantsTestdata(t *testing.T) {
	for _, name := range []string{"perfect.txt", "lost_work.txt", "partial_allocation.txt", "hold.txt", "input_stall.txt",
		"preemption.txt", "program_goodput.txt", "fleet_queued.txt", "two_phases.txt", "split.txt", "same_instant.txt"} {
		t.Run(name, func(t *testing.T) { checkReport(t, testdataReport(t, name)) })
	}
}

// randomTimeline builds a valid timeline on whole seconds directly (not via
// the Recorder), so it also has what the Recorder never produces: events
// and phase changes inside intervals, activity during partial allocation,
// zero-length records.
func randomTimeline(rng *rand.Rand) Timeline {
	const window = 60
	sec := func(s int) time.Time { return epoch.Add(time.Duration(s) * time.Second) }
	phases := []string{"initial", "caught-up", "backfill"}
	var tl Timeline
	capacity := 0
	for j := range 1 + rng.IntN(4) {
		jt := JobTimeline{Job: fmt.Sprintf("job%d", j)}
		maxReq := 0
		type span struct {
			s, e int
			all  bool
		}
		var allocs []span
		for s := rng.IntN(10); s < window; {
			e := min(window, s+rng.IntN(20))
			req := 1 + rng.IntN(4)
			held := req
			if rng.IntN(3) == 0 {
				held = rng.IntN(req)
			}
			if e >= s {
				jt.Allocations = append(jt.Allocations, Allocation{Start: sec(s), End: sec(e), Held: held, Requested: req})
				allocs = append(allocs, span{s, e, held == req})
				maxReq = max(maxReq, req)
			}
			s = e + rng.IntN(5)
		}
		capacity += maxReq
		// Intervals inside allocations; productive only where all-allocated.
		for _, a := range allocs {
			for s := a.s; s < a.e; {
				e := min(a.e, s+rng.IntN(8))
				cat := Category(rng.IntN(int(Idle) + 1))
				if cat == Productive && !a.all {
					cat = Compile
				}
				iv := Interval{Start: sec(s), End: sec(e), Category: cat}
				if cat == Productive && e > s {
					iv.Ideal = time.Duration(rng.Int64N(int64(e-s)*int64(time.Second) + 1))
				}
				if rng.IntN(5) > 0 {
					jt.Intervals = append(jt.Intervals, iv)
				}
				s = e + rng.IntN(3)
			}
		}
		for range rng.IntN(3) {
			jt.PhaseChanges = append(jt.PhaseChanges, PhaseChange{At: sec(rng.IntN(window + 1)), Phase: phases[rng.IntN(len(phases))]})
		}
		for range rng.IntN(8) {
			jt.Events = append(jt.Events, Event{At: sec(rng.IntN(window + 1)), Kind: EventKind(rng.IntN(3))})
		}
		tl.Jobs = append(tl.Jobs, jt)
	}
	tl.Capacity = Capacity{Chips: capacity + rng.IntN(3), Start: sec(0), End: sec(window)}
	return tl
}

// oracle classifies the timeline second by second, straight from the
// definitions in doc.go, without the slicing and sorting Compute does. It
// returns per job and phase the chip-seconds by category, the demand and the
// ideal chip-seconds.
type oracleScope struct {
	cat    [NumCategories]int64
	demand int64
	ideal  float64
}

func oracle(tl Timeline) map[[2]string]*oracleScope {
	out := map[[2]string]*oracleScope{}
	start := tl.Capacity.Start
	n := int(tl.Capacity.End.Sub(start) / time.Second)
	for _, j := range tl.Jobs {
		for s := range n {
			t0, t1 := start.Add(time.Duration(s)*time.Second), start.Add(time.Duration(s+1)*time.Second)
			inside := func(a, b time.Time) bool { return !a.After(t0) && !b.Before(t1) }
			var alloc *Allocation
			for i, a := range j.Allocations {
				if inside(a.Start, a.End) {
					alloc = &j.Allocations[i]
				}
			}
			if alloc == nil {
				continue
			}
			phase, latest := DefaultPhase, time.Time{}
			for _, p := range j.PhaseChanges {
				if !p.At.After(t0) && !p.At.Before(latest) {
					phase, latest = p.Phase, p.At
				}
			}
			key := [2]string{j.Job, phase}
			if out[key] == nil {
				out[key] = &oracleScope{}
			}
			o := out[key]
			h, r := int64(alloc.Held), int64(alloc.Requested)
			o.demand += r
			if h < r {
				o.cat[PartialAllocation] += h
				o.cat[UnmetDemand] += r - h
				continue
			}
			cat := Idle
			var iv Interval
			for _, x := range j.Intervals {
				if x.End.After(x.Start) && inside(x.Start, x.End) {
					cat, iv = x.Category, x
				}
			}
			if cat == Productive {
				// The first event at or after t1 decides; a checkpoint wins.
				var next *time.Time
				for _, e := range j.Events {
					if !e.At.Before(t1) && (next == nil || e.At.Before(*next)) {
						at := e.At
						next = &at
					}
				}
				cat = Uncommitted
				if next != nil {
					cat = LostWork
					for _, e := range j.Events {
						if e.At.Equal(*next) && e.Kind == Checkpoint {
							cat = Productive
						}
					}
				}
				if cat == Productive {
					o.ideal += iv.Ideal.Seconds() / iv.End.Sub(iv.Start).Seconds() * float64(r)
				}
			}
			o.cat[cat] += r
		}
	}
	return out
}

// TestRandomAgainstOracle compares Compute with the second-by-second oracle
// on random timelines and checks the report's invariants.
func TestRandomAgainstOracle(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 1))
		tl := randomTimeline(rng)
		rep, err := Compute(tl)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkReport(t, rep)
		want := oracle(tl)
		got := 0
		for _, j := range rep.Jobs {
			for _, p := range j.Phases {
				got++
				o := want[[2]string{j.Job, p.Phase}]
				if o == nil {
					t.Fatalf("seed %d: %s/%s in the report, not in the oracle", seed, j.Job, p.Phase)
				}
				for c := range NumCategories {
					if p.ChipSeconds[c] != float64(o.cat[c]) {
						t.Errorf("seed %d: %s/%s %s = %v, oracle %d", seed, j.Job, p.Phase, Category(c), p.ChipSeconds[c], o.cat[c])
					}
				}
				if p.DemandChipSeconds != float64(o.demand) || !near(p.IdealChipSeconds, o.ideal) {
					t.Errorf("seed %d: %s/%s demand %v ideal %v, oracle %d %v", seed, j.Job, p.Phase, p.DemandChipSeconds, p.IdealChipSeconds, o.demand, o.ideal)
				}
			}
		}
		if got != len(want) {
			t.Errorf("seed %d: %d job phases in the report, oracle has %d", seed, got, len(want))
		}
		if t.Failed() {
			var buf bytes.Buffer
			_ = FormatTimeline(&buf, tl)
			t.Fatalf("seed %d timeline:\n%s", seed, buf.String())
		}
	}
}

// TestRandomRecorder drives the Recorder with random calls (as a buggy or
// busy trainer might), then checks that its timeline is always valid, the
// report's invariants hold, and the text form round-trips.
func TestRandomRecorder(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 2))
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(time.Hour))))
		rec := NewRecorder(1+rng.IntN(8), start)
		now := map[string]time.Time{}
		names := []string{"a", "b", "c"}
		for range 300 {
			name := names[rng.IntN(len(names))]
			j := rec.Job(name)
			if now[name].IsZero() {
				now[name] = start
			}
			now[name] = now[name].Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
			t0 := now[name]
			// Errors are expected (wrong state, over capacity); the
			// recorder must stay consistent regardless.
			switch rng.IntN(8) {
			case 0:
				req := rng.IntN(5)
				_ = j.Allocate(t0, rng.IntN(req+1), req)
			case 1:
				_ = j.Begin(t0, Category(1+rng.IntN(int(Idle))))
			case 2:
				_ = j.End(t0)
			case 3, 4:
				d := time.Duration(rng.Int64N(int64(2 * time.Second)))
				if j.Step(t0, t0.Add(d), time.Duration(rng.Int64N(int64(d)+1))) == nil {
					now[name] = t0.Add(d)
				}
			case 5:
				_ = j.CheckpointCommitted(t0)
			case 6:
				if rng.IntN(2) == 0 {
					_ = j.Failure(t0)
				} else {
					_ = j.Preemption(t0)
				}
			case 7:
				_ = j.SetPhase(t0, []string{"initial", "caught-up"}[rng.IntN(2)])
			}
		}
		var end time.Time
		for _, v := range now {
			end = later(end, v)
		}
		// Snapshot mid-run as well as at the end: both must be valid.
		for _, cut := range []time.Time{start.Add(end.Sub(start) / 2), end} {
			tl := rec.Timeline(cut)
			rep, err := Compute(tl)
			if err != nil {
				t.Fatalf("seed %d: recorder produced an invalid timeline: %v", seed, err)
			}
			checkReport(t, rep)
			var buf bytes.Buffer
			must(t, FormatTimeline(&buf, tl))
			back, err := ParseTimeline(&buf)
			if err != nil {
				t.Fatalf("seed %d: %v\n%s", seed, err, buf.String())
			}
			rep2, err := Compute(back)
			if err != nil {
				t.Fatalf("seed %d: reparsed: %v", seed, err)
			}
			if !reflect.DeepEqual(rep, rep2) {
				t.Fatalf("seed %d: report changed through the text form\n%+v\n%+v", seed, rep, rep2)
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
