package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/internal/svgplot"
)

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// fleetSection reports a fleet run (fleet/results): every CPU, hit and
// reuse figure measured on the running system; Table I and Figure 6
// combine measured CPU with the run's modelled constants.
func fleetSection(id, title, path string, r *results.Results) Section {
	s := Section{ID: id, Title: title}
	f := r.Fleet
	s.text("Source: `%s`, written by `sigctl fleet` (fleet/run) on %s (%d cores, %s, commit %s), %s to %s. "+
		"A fleet of %d pipelines over %d clients and %d epochs (seed %d), arriving and retiring over time; %d events in %d raw blocks of %d rows; "+
		"at most %d `sigd worker` processes. CPU: %s.",
		path, orNone(r.Machine.CPU), r.Machine.Cores, orNone(r.Machine.GoVersion), orNone(r.Machine.Commit),
		r.Started.UTC().Format("2006-01-02 15:04Z"), r.Finished.UTC().Format("15:04Z"),
		f.Pipelines, f.Clients, f.Epochs, f.Seed, r.Run.Events, r.Run.Blocks, r.Run.RowsPerBlock, r.Run.WorkersMax, orNone(r.Run.CPUSource))
	var failed []string
	for _, c := range r.Checks {
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	if len(failed) > 0 {
		s.text("**Failed checks** (the figures below are suspect): %s.", strings.Join(failed, "; "))
	} else if len(r.Checks) > 0 {
		s.text("All %d of the run's checks passed (sigd's hit and reuse accounting against the Ledger's independent count; SIG bytes against LIG bytes).", len(r.Checks))
	}

	// Headline figures; the targets follow, recomputed.
	last := r.Epochs[len(r.Epochs)-1]
	cpu := r.CPU
	ss := r.SteadyState
	t := Table{Caption: "Headline figures, all measured on the running system, beside the paper's",
		Header: []string{"figure", "value", "kind", "paper"}}
	t.Rows = append(t.Rows,
		[]string{fmt.Sprintf("steady-state block hit rate (epochs %d-%d)", ss.FromEpoch, last.Epoch), pct(ss.BlockHitRate), "measured", "above 95% (IV.A)"},
		[]string{"steady-state component hit rate", pct(ss.ComponentHitRate), "measured", ""},
		[]string{fmt.Sprintf("mean reuse: pipelines per memo block (%d pipelines)", r.Reuse.Pipelines), fixed(r.Reuse.Sigd.Mean, 1), "measured", "22 (IV.A)"},
		[]string{"max reuse", fmt.Sprint(r.Reuse.Sigd.Max), "measured", "over 400 (IV.A)"},
		[]string{fmt.Sprintf("SIG / LIG total CPU at %d pipelines", last.Submitted), fixed(cpu.Ratio(), 3), "measured", "readers 4.3x-7.5x cheaper than LIG (VII.C)"},
	)
	s.table(t)
	targetsTable(&s, r)

	// Hit rate over time.
	var ep, blocks, comps []float64
	for _, e := range r.Epochs {
		a := e.All()
		ep = append(ep, float64(e.Epoch))
		blocks, comps = append(blocks, rate(a.BlockHits, a.Blocks)), append(comps, rate(a.ComponentHits, a.Components))
	}
	s.plot("hit-rate", Plot{Title: "Hit rate over time", Kind: figure.Measured, Paper: "paper IV.A: hit rate above 95%",
		Caption: "sigd's answers to each epoch's submissions (initial and caught-up): the (component, block) pairs and components it already had; cold start at epoch 0.",
		SVG: svgplot.Line{Title: "Hit rate per epoch (" + title + ")", X: svgplot.Axis{Label: "epoch"},
			Y: svgplot.Axis{Label: "hit rate", Percent: true, Max: 1}, Marks: []svgplot.Mark{{Label: "paper: above 95%", Y: 0.95}},
			Series: []svgplot.Series{{Name: "blocks", X: ep, Y: blocks}, {Name: "components", X: ep, Y: comps}}}.SVG()})

	// Reuse.
	cats, sig, ledger := reuseBins(r.Reuse.Sigd.Histogram, r.Reuse.Ledger.Histogram)
	s.plot("reuse", Plot{Title: "Reuse: pipelines per memoized block", Kind: figure.Measured,
		Paper: "paper IV.A: each memoized block used by 22 models on average, peak over 400",
		Caption: fmt.Sprintf("At the end of the run, over %d memo blocks: how many pipelines' requested ranges cover each (sigd's Stats), and the Ledger's independent count from the submissions. "+
			"sigd: mean %s, p50 %d, p90 %d, p99 %d, max %d; Ledger: mean %s, max %d.",
			r.Reuse.Sigd.Blocks, fixed(r.Reuse.Sigd.Mean, 2), r.Reuse.Sigd.P50, r.Reuse.Sigd.P90, r.Reuse.Sigd.P99, r.Reuse.Sigd.Max,
			fixed(r.Reuse.Ledger.Mean, 2), r.Reuse.Ledger.Max),
		SVG: svgplot.Bars{Title: "Memo blocks by the pipelines that use them", XLabel: "pipelines using the block", Categories: cats,
			// A log axis: the blocks most pipelines share are few.
			Y: svgplot.Axis{Label: "memo blocks (log scale)", Log: true}, Groups: []svgplot.Group{{Name: "sigd", Values: sig}, {Name: "Ledger", Values: ledger}}}.SVG()})

	// CPU of SIG and LIG as the fleet grows.
	var n, sigCPU, ligCPU, ratio []float64
	for _, e := range r.Epochs {
		c := e.Cumulative
		n = append(n, float64(e.Submitted))
		sigCPU, ligCPU, ratio = append(sigCPU, c.SIG()), append(ligCPU, c.LIG()), append(ratio, nanIfZero(c.Ratio()))
	}
	s.plot("cpu", Plot{Title: "CPU of SIG and LIG against fleet size", Kind: figure.Measured,
		Paper: "paper VII.C: input readers 4.3x-7.5x cheaper than local input generation",
		Caption: fmt.Sprintf("Cumulative CPU seconds (user + system, per process from the kernel) at the end of each epoch: SIG is the `sigd worker` processes plus the SIG reader; LIG the reader computing every pipeline's inputs locally, over the same units. "+
			"At the end: SIG %s s (workers %s, readers %s), LIG %s s; sigd %s s is paid by both and counted in neither. "+
			"The SIG reader alone over the LIG reader is %s: the floor the ratio falls towards as more pipelines share the workers. "+
			"MinIO (%s s in all) is left out of the ratio, as the issue defines it; split by the side whose requests it served (the run does one thing at a time), "+
			"workers %s s, SIG reader %s s, LIG reader %s s, and counting it SIG / LIG is %s.",
			num(cpu.SIG()), num(cpu.Worker), num(cpu.SIGReader), num(cpu.LIG()), num(cpu.Sigd),
			num(cpu.ReaderRatio()), num(cpu.MinIO), num(cpu.MinIOWorker), num(cpu.MinIOSIGReader), num(cpu.MinIOLIGReader), num(cpu.RatioWithStorage())),
		SVG: svgplot.Line{Title: "Total CPU so far against pipelines submitted", X: svgplot.Axis{Label: "pipelines submitted"},
			Y: svgplot.Axis{Label: "CPU seconds"}, Series: []svgplot.Series{{Name: "SIG (workers + SIG reader)", X: n, Y: sigCPU}, {Name: "LIG (readers computing locally)", X: n, Y: ligCPU}}}.SVG()})
	s.plot("cpu-ratio", Plot{Title: "SIG / LIG total CPU against fleet size", Kind: figure.Measured,
		Paper:   "paper VII.C: 1/7.5 to 1/4.3",
		Caption: "The ratio of the two curves above; issue 28's target is at most 0.25 at 300 pipelines or more (issue 18's was 0.2).",
		SVG: svgplot.Line{Title: "SIG / LIG CPU against pipelines submitted", X: svgplot.Axis{Label: "pipelines submitted"},
			Y: svgplot.Axis{Label: "SIG / LIG CPU"}, Marks: []svgplot.Mark{{Label: "target 0.25", Y: 0.25}, {Label: "paper 1/4.3", Y: 1 / 4.3}, {Label: "paper 1/7.5", Y: 1 / 7.5}},
			Series: []svgplot.Series{{Name: "SIG / LIG", X: n, Y: ratio}}}.SVG()})

	storeSection(&s, r)
	tableISection(&s, r)
	figure6Section(&s, r)
	return s
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func rate(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

// reuseBins turns the histograms (index: pipelines) into at most 30 bins.
func reuseBins(a, b []int64) (cats []string, av, bv []float64) {
	n := max(len(a), len(b))
	w := max(1, (n+29)/30)
	at := func(h []int64, i int) float64 {
		if i < len(h) {
			return float64(h[i])
		}
		return 0
	}
	for lo := 0; lo < n; lo += w {
		hi := min(lo+w, n) - 1
		if lo == hi {
			cats = append(cats, fmt.Sprint(lo))
		} else {
			cats = append(cats, fmt.Sprintf("%d-%d", lo, hi))
		}
		var x, y float64
		for i := lo; i <= hi; i++ {
			x, y = x+at(a, i), y+at(b, i)
		}
		av, bv = append(av, x), append(bv, y)
	}
	return cats, av, bv
}

// constantsOf lists a run's modelled constants as figure constants.
func constantsOf(c results.Constants, names ...string) map[string]figure.Constant {
	all := map[string]results.Constant{"host_cores": c.HostCores, "examples_per_second": c.ExamplesPerSecond,
		"chips_per_host": c.ChipsPerHost, "chip_hour_usd": c.ChipHourUSD, "core_hour_usd": c.CoreHourUSD}
	out := map[string]figure.Constant{}
	for _, n := range names {
		k := all[n]
		out[n] = figure.Constant{Value: k.Value, Unit: k.Unit, Source: k.Source}
	}
	return out
}

func tableISection(s *Section, r *results.Results) {
	ti := r.TableI
	cs := constantsOf(r.Constants, "host_cores", "examples_per_second")
	rows := []struct {
		name string
		p    results.Percentiles
	}{{"SIG readers, initial training", ti.SIGInitial}, {"LIG readers, caught-up training", ti.LIGCaughtUp}, {"LIG readers over the initial units", ti.LIGInitial}}
	t := Table{Caption: "Table I analog: a pipeline's reader CPU to feed one host, over the host's CPU (above 1: more than the host has)",
		Header: []string{"readers", "pipelines", "p50", "p90", "p95", "p99", "mean"}}
	var groups []svgplot.Group
	for _, row := range rows {
		t.Rows = append(t.Rows, []string{row.name, fmt.Sprint(row.p.N), num(row.p.P50), num(row.p.P90), num(row.p.P95), num(row.p.P99), num(row.p.Mean)})
		groups = append(groups, svgplot.Group{Name: row.name, Values: []float64{row.p.P50, row.p.P90, row.p.P95, row.p.P99}})
	}
	s.plot("table-i", Plot{Title: "Table I: reader CPU per pipeline over the host's budget", Kind: figure.Modelled, Paper: "paper Table I",
		Caption: "Measured: each pipeline's reader CPU per example (its processes' CPU around its reads). Modelled: the rate a host's accelerators consume and the CPU the host offers: " +
			constantsText(cs) + ". The ratios are linear in both; the sensitivity table shows each halved and doubled.",
		SVG: svgplot.Bars{Title: "Reader CPU / host CPU, percentiles over pipelines", XLabel: "percentile over pipelines", Categories: []string{"p50", "p90", "p95", "p99"},
			Y: svgplot.Axis{Label: "share of the host's CPU"}, Groups: groups, Marks: []svgplot.Mark{{Label: "the host's whole CPU", Y: 1}}}.SVG()})
	s.table(t)
	if len(ti.Sensitivity) > 0 {
		st := Table{Caption: "Table I's sensitivity to its modelled constants (p50 / p99)", Header: []string{"constants", "host cores", "examples/s", "SIG initial", "LIG caught-up"}}
		for _, row := range ti.Sensitivity {
			st.Rows = append(st.Rows, []string{row.Label, num(row.HostCores), num(row.ExamplesPerSecond),
				num(row.SIGInitial.P50) + " / " + num(row.SIGInitial.P99), num(row.LIGCaughtUp.P50) + " / " + num(row.LIGCaughtUp.P99)})
		}
		s.table(st)
	}
}

func figure6Section(s *Section, r *results.Results) {
	f6 := r.Figure6
	cs := constantsOf(r.Constants, "examples_per_second", "chips_per_host", "chip_hour_usd", "core_hour_usd")
	// Eight pipelines spread over the range of their examples (all when
	// there are fewer).
	rows := append([]results.Figure6Row(nil), f6.Rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Examples < rows[j].Examples })
	if len(rows) > 8 {
		pick := make([]results.Figure6Row, 0, 8)
		for i := 0; i < 8; i++ {
			pick = append(pick, rows[i*(len(rows)-1)/7])
		}
		rows = pick
	}
	var cats []string
	acc, readers, workers := []float64{}, []float64{}, []float64{}
	key := Table{Caption: "The pipelines of the Figure 6 plot: cost in USD with SIG (accelerator + readers + workers' share) and with LIG",
		Header: []string{"bars", "pipeline", "examples", "SIG", "LIG", "SIG / LIG"}}
	for i, row := range rows {
		// Pipeline names are long: the bars are numbered, the table names them.
		cats = append(cats, fmt.Sprintf("S%d", i+1), fmt.Sprintf("L%d", i+1))
		acc = append(acc, row.Accelerator, row.Accelerator)
		readers = append(readers, row.SIGReaders, row.LIGReaders)
		workers = append(workers, row.SIGWorkers, math.NaN())
		key.Rows = append(key.Rows, []string{fmt.Sprint(i + 1), row.Pipeline, fmt.Sprint(row.Examples), num(row.SIG()), num(row.LIG()), fixed(row.SIG()/row.LIG(), 3)})
	}
	s.plot("figure-6", Plot{Title: "Figure 6: cost of a pipeline's training, SIG and LIG", Kind: figure.Modelled, Paper: "paper Figure 6",
		Caption: fmt.Sprintf("Bars S1, L1, ...: pipeline 1 with SIG and with LIG (the table below names them). Measured: the examples read, the readers' CPU and each pipeline's share of the workers' CPU (a memo block's CPU divided among the pipelines using it). "+
			"Modelled: accelerator time and prices: %s. Across %d pipelines, reader cost LIG / SIG: geometric mean %s (min %s, max %s); total cost reduction: geometric mean %s (min %s, max %s).",
			constantsText(cs), len(f6.Rows), fixed(f6.ReaderReductionGeoMean, 2), fixed(f6.ReaderReductionMin, 2), fixed(f6.ReaderReductionMax, 2),
			pct(f6.TotalReductionGeoMean), pct(f6.TotalReductionMin), pct(f6.TotalReductionMax)),
		SVG: svgplot.Bars{Title: "Cost per pipeline (8 pipelines across the range of examples read)", XLabel: "pipeline and mode", Categories: cats, Stacked: true,
			Y: svgplot.Axis{Label: "USD"}, Groups: []svgplot.Group{{Name: "accelerator", Values: acc}, {Name: "input readers", Values: readers}, {Name: "SIG workers' share", Values: workers}}}.SVG()})
	s.table(key)
}
