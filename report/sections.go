package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/internal/svgplot"
)

// targetSubmitP99Ms is the target at a million cached components.
const targetSubmitP99Ms = 5

// scaleSection reports the control plane's scale curve (sigd/scale): every
// figure measured.
func scaleSection(path string, sf *scaleFile) Section {
	s := Section{ID: "scale", Title: "Control plane at scale"}
	s.text("Source: `%s` (sigd/scale), on %s: the matching cache grown through its own API, then SubmitGraph, the work queue, the Pebble stores, sigd's memory and the Evict RPC measured at each size. Every figure is measured.", path, orNone(sf.Machine))
	pts := append([]scalePoint(nil), sf.Points...)
	sort.SliceStable(pts, func(i, j int) bool { return *pts[i].Components < *pts[j].Components })
	var n, p50, p99, qops, pebble, rss, evict []float64
	t := Table{Caption: "The scale curve's points", Header: []string{"cached components", "submit p50 ms", "submit p99 ms", "submits", "queue ops/s", "Pebble", "sigd RSS", "evicted blocks/s"}}
	for _, p := range pts {
		n = append(n, float64(*p.Components))
		p50, p99 = append(p50, *p.SubmitP50Ms), append(p99, *p.SubmitP99Ms)
		qops, evict = append(qops, p.QueueOpsPerS), append(evict, p.EvictPerS)
		pebble, rss = append(pebble, float64(p.PebbleBytes)), append(rss, float64(p.SigdRSSBytes))
		t.Rows = append(t.Rows, []string{num(float64(*p.Components)), fixed(*p.SubmitP50Ms, 2), fixed(*p.SubmitP99Ms, 2), fmt.Sprint(p.Submits),
			num(p.QueueOpsPerS), num(float64(p.PebbleBytes)) + "B", num(float64(p.SigdRSSBytes)) + "B", num(p.EvictPerS)})
	}
	lastN, lastP99 := n[len(n)-1], p99[len(p99)-1]
	s.text("Submit p99 at the largest cache (%s components): %s ms; target < %d ms at 1M components: %s.",
		num(lastN), fixed(lastP99, 2), targetSubmitP99Ms, met(lastN >= 1e6 && lastP99 < targetSubmitP99Ms))
	x := svgplot.Axis{Label: "cached components", Log: true}
	s.plot("submit", Plot{Title: "SubmitGraph latency against cache size", Kind: figure.Measured, Paper: "issue 18: submit p99 < 5 ms at 1M cached components",
		Caption: "SubmitGraph over gRPC to the sigd process, as a client sees it.",
		SVG: svgplot.Line{Title: "SubmitGraph latency", X: x, Y: svgplot.Axis{Label: "ms", Log: true},
			Marks:  []svgplot.Mark{{Label: "target p99 5 ms", Y: targetSubmitP99Ms}},
			Series: []svgplot.Series{{Name: "p50", X: n, Y: p50}, {Name: "p99", X: n, Y: p99}}}.SVG()})
	s.plot("queue", Plot{Title: "Work queue throughput against cache size", Kind: figure.Measured,
		Caption: "The queue's durable operations per second (enqueue, lease, complete) on sigd's queue store with the backlog of each point.",
		SVG: svgplot.Line{Title: "Queue operations per second", X: x, Y: svgplot.Axis{Label: "ops/s"},
			Series: []svgplot.Series{{Name: "queue ops/s", X: n, Y: qops}}}.SVG()})
	s.plot("memory", Plot{Title: "Pebble size and sigd memory against cache size", Kind: figure.Measured,
		Caption: "Bytes on disk of sigd's Pebble stores (cache, queue, catalog) and sigd's resident memory after the measured calls.",
		SVG: svgplot.Line{Title: "Pebble bytes and sigd RSS", X: x, Y: svgplot.Axis{Label: "bytes", Log: true},
			Series: []svgplot.Series{{Name: "Pebble on disk", X: n, Y: pebble}, {Name: "sigd RSS", X: n, Y: rss}}}.SVG()})
	s.plot("evict", Plot{Title: "Eviction throughput against cache size", Kind: figure.Measured,
		Caption: "Memo blocks evicted per second by the Evict RPC of a subgraph (each a memo entry and its object in MinIO).",
		SVG: svgplot.Line{Title: "Evicted memo blocks per second", X: x, Y: svgplot.Axis{Label: "blocks/s"},
			Series: []svgplot.Series{{Name: "evicted blocks/s", X: n, Y: evict}}}.SVG()})
	s.table(t)
	// What grew with the cache, from the points themselves. The file's
	// notes are not shown: bench/scale.sh copies bench/scale.notes into
	// them, prose whose figures come from earlier runs and profiles that
	// no JSON holds, and every figure here is a JSON's.
	if len(pts) > 1 {
		a, z := pts[0], pts[len(pts)-1]
		x := func(v0, v1 float64) string {
			if v0 <= 0 {
				return "–"
			}
			return "x" + num(v1/v0)
		}
		s.text("From %s to %s cached components (x%s): submit p50 %s, p99 %s; queue ops/s %s; Pebble bytes %s; sigd RSS %s; evicted blocks/s %s.",
			num(float64(*a.Components)), num(float64(*z.Components)), num(float64(*z.Components)/float64(*a.Components)),
			x(*a.SubmitP50Ms, *z.SubmitP50Ms), x(*a.SubmitP99Ms, *z.SubmitP99Ms), x(a.QueueOpsPerS, z.QueueOpsPerS),
			x(float64(a.PebbleBytes), float64(z.PebbleBytes)), x(float64(a.SigdRSSBytes), float64(z.SigdRSSBytes)), x(a.EvictPerS, z.EvictPerS))
	}
	if len(sf.Notes) > 0 {
		s.text("The file's notes (%d) are not shown: the benchmark's own, the target and the growth, are recomputed above from the points; "+
			"the rest are the prose bench/scale.sh copies from bench/scale.notes (how the cache is built; what was found and fixed on the way), "+
			"whose figures come from earlier runs and profiles that no JSON holds. Read them in bench/scale.notes and bench/scale.txt.", len(sf.Notes))
	}
	return s
}

// trainerFleetSection reports the virtual-time fleet simulation
// (trainer/accounting/fleet): every figure modelled unless its file says
// measured.
func trainerFleetSection(path string, f, defaults *trainerFleet, p *preemptionFile) Section {
	s := Section{ID: "training-fleet", Title: "Training fleet: Table II, preemptions, MPG"}
	s.text("Source: `%s`, written by `trainer fleet` (trainer/accounting/fleet): a shared fleet of training jobs simulated in virtual time over %d seeds. "+
		"Its figures are **modelled**: the constants listed below decide them (a constant whose source starts with \"measured:\" was replaced by a measurement of this system, bench/preemption.json).", path, len(f.Runs))

	// Table II: training 1, queued and on hold per training, per seed,
	// next to the paper's.
	var cats []string
	var queued, onHold []float64
	for _, r := range f.Runs {
		cats = append(cats, fmt.Sprintf("seed %d", r.Seed))
		queued, onHold = append(queued, r.TableII.QueuedPerTraining), append(onHold, r.TableII.OnHoldPerTraining)
	}
	cats = append(cats, "paper")
	queued, onHold = append(queued, 1.03), append(onHold, 2.49)
	qf, hf := f.Figures["table_ii_queued_per_training"], f.Figures["table_ii_on_hold_per_training"]
	s.plot("table-ii", Plot{Title: "Table II: TPU chip demand relative to chips training", Kind: kindOf(qf, hf), Paper: "paper VII.F Table II: training 1, queued 1.03, on hold 2.49",
		Caption: fmt.Sprintf("Chips queued and on hold per chip training, each seed and the paper's (the last bars). Mean over seeds: queued %s, on hold %s. Deciding constants: %s.",
			fixed(qf.Value, 2), fixed(hf.Value, 2), decidingText(hf)),
		SVG: svgplot.Bars{Title: "Queued and on hold per chip training", XLabel: "seed", Categories: cats, Y: svgplot.Axis{Label: "chips per chip training"},
			Marks:  []svgplot.Mark{{Label: "training = 1", Y: 1}},
			Groups: []svgplot.Group{{Name: "queued", Values: queued}, {Name: "on hold", Values: onHold}}}.SVG()})

	// Preempted epochs that commit: simulated per seed.
	var seeds, committed []float64
	for _, r := range f.Runs {
		seeds = append(seeds, float64(r.Seed))
		committed = append(committed, rate(r.PreemptedCommitted, r.PreemptedEpochs))
	}
	cf := f.Figures["preempted_epochs_committed"]
	s.plot("committed", Plot{Title: "Preempted epochs that commit, per seed", Kind: kindOf(cf), Paper: "paper VII.G: 61%",
		Caption: fmt.Sprintf("The fraction of preempted epochs whose early end committed before the deadline, each seed; pooled: %s. Deciding constants: %s.", pct(cf.Value), decidingText(cf)),
		SVG: svgplot.Line{Title: "Preempted epochs that commit", X: svgplot.Axis{Label: "seed"}, Y: svgplot.Axis{Label: "committed", Percent: true, Max: 1},
			Marks: []svgplot.Mark{{Label: "paper 61%", Y: 0.61}}, Series: []svgplot.Series{{Name: "simulated", X: seeds, Y: committed}}}.SVG()})

	// MPG per job, pooled over seeds, next to the fleet's.
	var mpgs []float64
	for _, r := range f.Runs {
		for _, j := range r.JobGoodput {
			mpgs = append(mpgs, j.MPG)
		}
	}
	mf := f.Figures["fleet_mpg"]
	if len(mpgs) > 0 {
		cats, counts := histogram(mpgs, 20)
		marks := []svgplot.Mark{}
		caption := fmt.Sprintf("The MPG of each simulated job (%d jobs over %d seeds, modelled) and the fleet's MPG (%s, chip-time weighted, %s; deciding constants: %s).",
			len(mpgs), len(f.Runs), fixed(mf.Value, 3), mf.Kind, decidingText(mf))
		if p != nil {
			if jm, ok := p.Figures["job_mpg"]; ok {
				caption += fmt.Sprintf(" A complete job on this system measured MPG %s (bench/preemption.json: %s).", fixed(jm.Value, 3), jm.How)
			}
		}
		s.plot("job-mpg", Plot{Title: "MPG per job and of the fleet", Kind: kindOf(mf), Paper: "MPG paper: MPG = SG × RG × PG, per job and fleet",
			Caption: caption,
			SVG: svgplot.Bars{Title: fmt.Sprintf("Jobs by MPG (fleet MPG %s)", fixed(mf.Value, 3)), XLabel: "MPG of the job", Categories: cats,
				Y: svgplot.Axis{Label: "jobs"}, Marks: marks, Groups: []svgplot.Group{{Name: "simulated jobs", Values: counts}}}.SVG()})
	} else {
		s.text("This bench/fleet.json has no per-job goodput (job_goodput, written since issue 18): rerun `bash bench/trainer.sh` for the MPG per job.")
	}
	var sgs, rgs, pgs, mpgFleet []float64
	var seedCats []string
	for _, r := range f.Runs {
		seedCats = append(seedCats, fmt.Sprintf("seed %d", r.Seed))
		g := r.Goodput
		sgs, rgs, pgs, mpgFleet = append(sgs, g.SG), append(rgs, g.RG), append(pgs, g.PG), append(mpgFleet, g.MPG)
	}
	s.plot("fleet-goodput", Plot{Title: "The fleet's goodput per seed", Kind: kindOf(f.Figures["fleet_sg"], f.Figures["fleet_rg"], f.Figures["fleet_pg"], mf),
		Paper:   "MPG paper: scheduling, runtime and program goodput",
		Caption: fmt.Sprintf("SG, RG, PG and MPG of the whole fleet, each seed (the figures, kinds and constants are in the table below). Deciding MPG: %s.", decidingText(mf)),
		SVG: svgplot.Bars{Title: "Fleet SG, RG, PG and MPG", XLabel: "seed", Categories: seedCats, Y: svgplot.Axis{Label: "goodput", Percent: true, Max: 1},
			Groups: []svgplot.Group{{Name: "SG", Values: sgs}, {Name: "RG", Values: rgs}, {Name: "PG", Values: pgs}, {Name: "MPG", Values: mpgFleet}}}.SVG()})
	if defaults != nil {
		measuredFleetTable(&s, f, defaults)
	}
	figureTables(&s, f.Figures, "Every figure of the simulation with its kind, the paper's value and what decides it")
	return s
}

// measuredFleetTable sets the simulation fed with this system's
// measurements beside the same simulation on its default constants alone
// (fleet-defaults.json): what the measurements changed.
func measuredFleetTable(s *Section, f, d *trainerFleet) {
	t := Table{Caption: "The simulation fed with this system's measurements (" + TrainerFleet + ") beside the same simulation on its default constants alone (" +
		TrainerFleetDefaults + "): what replacing the constants changed",
		Header: []string{"figure", "with measurements", "defaults alone", "constants replaced by measurements"}}
	for _, n := range slices.Sorted(maps.Keys(f.Figures)) {
		fm, fd := f.Figures[n], d.Figures[n]
		var replaced []string
		for _, k := range slices.Sorted(maps.Keys(fm.Constants)) {
			if c := fm.Constants[k]; strings.HasPrefix(c.Source, figure.MeasuredPrefix) {
				was := "not a constant of the defaults' model"
				if dc, ok := fd.Constants[k]; ok {
					was = "defaults: " + num(dc.Value)
				}
				replaced = append(replaced, fmt.Sprintf("%s %s (%s)", k, num(c.Value), was))
			}
		}
		dv := "–"
		if _, ok := d.Figures[n]; ok {
			dv = num(fd.Value) + " (" + string(fd.Kind) + ")"
		}
		t.Rows = append(t.Rows, []string{n, num(fm.Value) + " (" + string(fm.Kind) + ")", dv, strings.Join(replaced, "; ")})
	}
	s.table(t)
}

// histogram bins xs (in [min, max]) into n equal bins.
func histogram(xs []float64, n int) ([]string, []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if hi <= lo {
		return []string{fixed(lo, 3)}, []float64{float64(len(xs))}
	}
	w := (hi - lo) / float64(n)
	counts := make([]float64, n)
	for _, x := range xs {
		counts[min(n-1, int((x-lo)/w))]++
	}
	cats := make([]string, n)
	for i := range cats {
		cats[i] = fixed(lo+w*float64(i), 3)
	}
	return cats, counts
}

// preemptionSection reports the preemption benchmark on real runs.
func preemptionSection(path string, p *preemptionFile) Section {
	s := Section{ID: "preemption", Title: "Preemption notices on real runs"}
	s.text("Source: `%s`, written by trainer's BenchmarkPreemptionCommits: ctr_small jobs on real sigd, MinIO and readers, preempted at random moments. "+
		"The committed fraction is measured, but the notice bound (a choice) decides it; the times from notice to committed checkpoint measured with notices that never bind give the fraction under any bound (the sweep).", path)
	mf, pf := p.Figures["preempted_epochs_committed"], p.Figures["preempted_epochs_committed_predicted"]
	if len(pf.Sweep) > 0 {
		var x, y []float64
		for _, pt := range pf.SweepOf("notice_max") {
			x, y = append(x, pt.At), append(y, pt.Value)
		}
		series := []svgplot.Series{{Name: "from the measured drain-and-save times (modelled)", X: x, Y: y}}
		if nm, ok := mf.Constants["notice_max"]; ok {
			series = append(series, svgplot.Series{Name: "measured on real runs", X: []float64{nm.Value}, Y: []float64{mf.Value}})
		}
		s.plot("committed", Plot{Title: "Preempted epochs that commit against the notice bound", Kind: figure.Modelled, Paper: "paper VII.G: 61%",
			Caption: fmt.Sprintf("The line: P(drain and save ≤ notice) for notices uniform in [0, notice_max], over %d measured notice-to-checkpoint times (median %s s). The point: the fraction measured on real runs at notice_max %s s (%s).",
				len(p.DrainSaveSeconds), fixed(median(p.DrainSaveSeconds), 2), num(mf.Constants["notice_max"].Value), pct(mf.Value)),
			SVG: svgplot.Line{Title: "Committed fraction against notice_max", X: svgplot.Axis{Label: "notice_max s", Log: true},
				Y: svgplot.Axis{Label: "committed", Percent: true, Max: 1}, Marks: []svgplot.Mark{{Label: "paper 61%", Y: 0.61}}, Series: series}.SVG()})
	}
	if len(p.DrainSaveSeconds) > 0 {
		var rank, ds, ex []float64
		for i := range p.DrainSaveSeconds {
			rank = append(rank, float64(i+1)/float64(len(p.DrainSaveSeconds)))
			ds = append(ds, p.DrainSaveSeconds[i])
		}
		var rankE []float64
		for i := range p.ExitSeconds {
			rankE = append(rankE, float64(i+1)/float64(len(p.ExitSeconds)))
			ex = append(ex, p.ExitSeconds[i])
		}
		s.plot("times", Plot{Title: "Notice to checkpoint and to exit", Kind: figure.Measured,
			Caption: "Each real preemption's seconds from the notice to the preempted epoch's committed checkpoint and to the job's exit (notices of 30 s, which never bind), as cumulative distributions.",
			SVG: svgplot.Line{Title: "Cumulative distribution of notice-to-checkpoint and notice-to-exit times", X: svgplot.Axis{Label: "seconds after the notice"},
				Y:      svgplot.Axis{Label: "fraction of preemptions", Percent: true, Max: 1},
				Series: []svgplot.Series{{Name: "committed checkpoint", X: ds, Y: rank}, {Name: "exit", X: ex, Y: rankE}}}.SVG()})
	}
	figureTables(&s, p.Figures, "Every figure of the preemption benchmark")
	return s
}

func median(sorted []float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// embeddingsSection reports Figure 7 and parameter-server coalescing.
func embeddingsSection(path string, e *embeddingsFile) Section {
	s := Section{ID: "embeddings", Title: "Embedding optimizations: Figure 7 and coalescing"}
	s.text("Source: `%s`, written by `trainer embeddings-report` (trainer/embedding/embreport). Figure 7's speedups are **modelled**: real lookups through each plan, priced by the step-time model's constants (below, with their sources and sweeps). The coalescing speedups are measured wall time of real RPCs.", path)
	models := []string{"A", "B", "C", "D", "E"}
	var base, pipe, hyb, fdp []float64
	var cats []string
	var figs []figure.Figure
	for _, m := range models {
		p, okp := e.Figures["pipelining_"+m]
		h, okh := e.Figures["hybrid_gain_"+m]
		sp, oks := e.Figures["speedup_"+m]
		if !okp || !okh || !oks {
			continue
		}
		figs = append(figs, p, h, sp)
		cats = append(cats, "model "+m)
		base, pipe, hyb, fdp = append(base, 1), append(pipe, p.Value), append(hyb, p.Value*h.Value), append(fdp, sp.Value)
	}
	if len(cats) > 0 {
		g := e.Figures["geomean_speedup"]
		s.plot("figure-7", Plot{Title: "Figure 7: performance relative to the baseline", Kind: kindOf(figs...), Paper: "paper VII.D Figure 7: geometric mean +116% (2.16x)",
			Caption: fmt.Sprintf("Each model's step-time speedup as the optimizations are added: +pipelining, +hybrid partitioning, +FDP. Geometric mean of all: %sx (paper 2.16x). Deciding constants: %s.",
				fixed(g.Value, 2), decidingText(g)),
			SVG: svgplot.Bars{Title: "Speedup over the baseline (modelled)", XLabel: "model", Categories: cats, Y: svgplot.Axis{Label: "speedup (x)"},
				Groups: []svgplot.Group{{Name: "baseline", Values: base}, {Name: "+pipelining", Values: pipe}, {Name: "+hybrid", Values: hyb}, {Name: "+FDP", Values: fdp}}}.SVG()})
	}
	var ccats []string
	var coal, paper []float64
	for _, m := range models {
		if f, ok := e.Figures["coalescing_step_speedup_"+m]; ok {
			ccats = append(ccats, "model "+m)
			coal = append(coal, f.Value)
			pv := math.NaN()
			if f.Paper != nil {
				pv = f.Paper.Value
			}
			paper = append(paper, pv)
		}
	}
	if len(ccats) > 0 {
		s.plot("coalescing", Plot{Title: "Parameter-server coalescing: step speedup", Kind: figure.Measured, Paper: "paper VII.E: 6-10% per model",
			Caption: "Wall time of a caught-up step's real Lookup and Apply RPCs over loopback gRPC, uncoalesced over coalesced; the paper's per-model gains beside them. This machine's loopback RPCs cost far more relative to the (small, modelled) TPU part of a step than the paper's.",
			SVG: svgplot.Bars{Title: "Step speedup from coalescing", XLabel: "model", Categories: ccats, Y: svgplot.Axis{Label: "speedup (x)"},
				Groups: []svgplot.Group{{Name: "measured here", Values: coal}, {Name: "paper", Values: paper}}}.SVG()})
	}
	figureTables(&s, e.Figures, "Every figure of the embeddings report")
	return s
}
