package results

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteSummary writes the run's figures as text: what `sigctl fleet`
// prints at the end and bench/fleet-*.txt hold. Every figure is the
// results' own (nothing is recomputed but sums and ratios).
func (r *Results) WriteSummary(w io.Writer) error {
	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	f := r.Fleet
	p("SIG fleet run (%s): %d pipelines over %d clients, %d epochs, seed %d", r.Schema, f.Pipelines, f.Clients, f.Epochs, f.Seed)
	p("  generator: %d pipelines at epoch 0, %d-%d inputs each, Zipf s=%g over %d variants per family, history %d-%d slots, retire rate %g",
		f.FirstEpoch, f.InputsMin, f.InputsMax, f.ZipfS, f.Variants, f.HistoryMin, f.HistoryMax, f.RetireRate)
	m := r.Machine
	p("  machine: %s, %d cores, %s, commit %s; load average %s at the start, %s at the end", m.CPU, m.Cores, m.GoVersion, m.Commit,
		loads(m.LoadStart), loads(m.LoadEnd))
	rc := r.Run
	p("  data: %d events in %d raw blocks (%d slots of %d blocks of %d rows); up to %d worker processes of concurrency %d; %d units read at once",
		rc.Events, rc.Blocks, rc.Slots, rc.BlocksPerSlot, rc.RowsPerBlock, rc.WorkersMax, rc.WorkerConcurrency, rc.ReadConcurrency)
	if len(rc.SigdArgs)+len(rc.WorkerArgs)+len(rc.SIGReaderArgs) > 0 {
		p("  flags beyond the defaults: sigd %q, workers %q, SIG reader %q", rc.SigdArgs, rc.WorkerArgs, rc.SIGReaderArgs)
	}
	p("  wall time %s (from %s to %s)", r.Finished.Sub(r.Started).Round(1e9), r.Started.Format("2006-01-02 15:04:05Z"), r.Finished.Format("15:04:05Z"))
	p("  CPU: %s", rc.CPUSource)
	p("")

	p("Hit rate over time (measured: sigd's answers to each submission), cold start to steady state:")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\tpipelines\tactive\tblock hits\tcomponent hits\tinitial\tcaught-up\tcumulative\treuse mean\treuse max\t")
	for i, h := range r.HitRates {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t\n", h.Epoch, h.Pipelines, r.Epochs[i].Active,
			pct(h.BlockHitRate), pct(h.ComponentHitRate), pctOf(h.InitialBlockHitRate, r.Epochs[i].Initial.Blocks),
			pctOf(h.CaughtUpBlockHitRate, r.Epochs[i].CaughtUp.Blocks), pct(h.CumulativeBlockHitRate), h.ReuseMean, h.ReuseMax)
	}
	tw.Flush()
	ss := r.SteadyState
	p("  steady state (epochs %d and later): block hit rate %s (%d of %d block requests), component hit rate %s",
		ss.FromEpoch, pct(ss.BlockHitRate), ss.Counts.BlockHits, ss.Counts.Blocks, pct(ss.ComponentHitRate))
	p("")

	d := r.Reuse.Sigd
	p("Reuse per ready memo block at the end (measured: sigd's exact count of the registered pipelines whose range covers the block, %d pipelines registered, %d active in the last epoch):",
		r.Reuse.Pipelines, r.Reuse.Active)
	p("  %d blocks: mean %.2f, p50 %d, p90 %d, p99 %d, max %d (the Ledger's own count: mean %.2f, max %d)", d.Blocks, d.Mean, d.P50, d.P90, d.P99, d.Max,
		r.Reuse.Ledger.Mean, r.Reuse.Ledger.Max)
	if len(r.ReuseSweep) > 0 {
		p("  the same fleet with one knob changed (counted from the fleet's plan, gen.Plan, which the run checks sigd equals at its own configuration; * the run's):")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "knob\tvalue\tpipelines\tcomponents used\treuse mean\treuse max\tsteady-state block hits\t")
		for _, pt := range r.ReuseSweep {
			run := ""
			if pt.Run {
				run = "*"
			}
			fmt.Fprintf(tw, "%s\t%g%s\t%d\t%d of %d\t%.2f\t%d\t%s\t\n", pt.Knob, pt.Value, run, pt.Pipelines, pt.Components, pt.Population,
				pt.ReuseMean, pt.ReuseMax, pct(pt.SteadyStateBlockHitRate))
		}
		tw.Flush()
	}
	p("")

	c := r.CPU
	p("CPU (measured, seconds per process): workers %.1f, SIG reader %.1f, LIG reader %.1f; sigd %.1f (both sides pay it, counted in neither) and MinIO %.1f (split by side below)",
		c.Worker, c.SIGReader, c.LIGReader, c.Sigd, c.MinIO)
	p("  SIG total %.1f s (workers + SIG reader), LIG total %.1f s (LIG reader), SIG/LIG %.3f (LIG/SIG %.2fx), over %d examples read each way",
		c.SIG(), c.LIG(), c.Ratio(), ratio(c.LIG(), c.SIG()), c.Examples)
	p("  SIG reader alone / LIG reader %.3f: the floor of SIG/LIG as the workers' CPU is shared by more pipelines", c.ReaderRatio())
	p("  MinIO's CPU by the side that caused it (the run does one thing at a time): workers %.1f, SIG reader %.1f, LIG reader %.1f, the rest %.1f (ingestion, idle); with it, SIG %.1f s, LIG %.1f s, SIG/LIG %.3f",
		c.MinIOWorker, c.MinIOSIGReader, c.MinIOLIGReader, c.MinIO-c.MinIOWorker-c.MinIOSIGReader-c.MinIOLIGReader,
		c.SIGWithStorage(), c.LIGWithStorage(), c.RatioWithStorage())
	if st := r.Store; st != nil {
		p("Object store (measured at the server: %s):", st.Source)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "side\trequests\tGET\tHEAD\tPUT\tLIST\tDELETE\tother\terrors\tsent MiB\treceived MiB\tper unit\tMinIO CPU s\t")
		for _, side := range []struct {
			name string
			q    Requests
			cpu  float64
		}{{"workers", st.Worker, c.MinIOWorker}, {"SIG reader", st.SIGReader, c.MinIOSIGReader}, {"LIG reader", st.LIGReader, c.MinIOLIGReader}, {"whole run", st.Whole, c.MinIO}} {
			q := side.q
			perUnit := fmt.Sprintf("%.3g", st.PerUnit(q))
			if side.name == "whole run" {
				perUnit = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%s\t%.3g\t\n", side.name, q.Total(), q.Kind(GET), q.Kind(HEAD), q.Kind(PUT),
				q.Kind(LIST), q.Kind(DELETE), q.Kind(Other), q.Errors, float64(q.SentBytes)/(1<<20), float64(q.ReceivedBytes)/(1<<20), perUnit, side.cpu)
		}
		tw.Flush()
		f := st.Fit
		p("  %d units read each way (%d examples); per unit: requests over those units (the workers' too, for scale)", st.Units, st.Examples)
		p("  MinIO CPU while a reader read, fitted over %d reader phases: %.3g ms per request + %.3g ms per MiB (R² %.2f)", f.Samples, f.PerRequest*1e3, f.PerByte*(1<<20)*1e3, f.R2)
		for _, side := range []struct {
			name string
			q    Requests
			cpu  float64
		}{{"SIG reader", st.SIGReader, c.MinIOSIGReader}, {"LIG reader", st.LIGReader, c.MinIOLIGReader}} {
			rq, by := f.Part(side.q)
			p("    %s: requests %.3g s + bytes %.3g s by the fit, %.3g s measured", side.name, rq, by, side.cpu)
		}
		if rs := st.Readers; rs != nil {
			mib := func(b int64) float64 { return float64(b) / (1 << 20) }
			sig, lig := rs.SIG, rs.LIG
			p("  Bytes the readers' reads wanted (measured: the readers' own count, %s): SIG reader %.1f MiB (raw %.1f, memo %.1f) of the %.1f MiB sent, %.3g MiB a unit; LIG reader %.1f MiB of %.1f MiB sent",
				"sig_reader_object_wanted_bytes_total", mib(sig.Wanted()), mib(sig.WantedRaw), mib(sig.WantedMemo), mib(st.SIGReader.SentBytes),
				ratio(mib(sig.Wanted()), float64(st.Units)), mib(lig.Wanted()), mib(st.LIGReader.SentBytes))
			for _, side := range []struct {
				name string
				c    ReaderCounts
			}{{"SIG reader", sig}, {"LIG reader", lig}} {
				p("    %s requests per unit by object/kind (its own count): %s; MiB a unit they asked for: %s; footer cache %s", side.name,
					perUnitOf(side.c.Requests, st.Units, 1), perUnitOf(side.c.Fetched, st.Units, 1<<20), countsOf(side.c.Footers))
			}
			floor := st.Floor(2)
			p("    the floor (modelled by the fit): fetching only those bytes at 2 requests a unit, MinIO would spend %.3g s serving the SIG reader against %.3g s measured serving the LIG reader (%.2fx); SIG/LIG counting MinIO's CPU %.3f",
				floor, c.MinIOLIGReader, ratio(floor, c.MinIOLIGReader), ratio(c.SIG()+c.MinIOWorker+floor, c.LIGWithStorage()))
		}
	}
	if len(r.Costs) > 0 {
		k := r.Costs
		p("Requests and CPU priced (modelled: %s; see the constants below): a GET costs what %.3g ms of a core does, a PUT %.3g ms",
			strings.Join([]string{PriceGET, PricePUT, PriceCore}, ", "), k["get_in_core_ms"].Value, k["put_in_core_ms"].Value)
		for _, side := range []string{"workers", "sig_reader", "lig_reader"} {
			p("  %-10s requests %.4g USD, CPU %.4g USD: requests / CPU %.3g", side, k["requests_usd_"+side].Value, k["cpu_usd_"+side].Value, k["requests_over_cpu_"+side].Value)
		}
		h := k["sig_over_lig_cost_hosted_store"]
		p("  SIG / LIG cost with a hosted store (requests instead of MinIO's CPU): %.3f; swept:", h.Value)
		for _, pt := range h.Sweep {
			p("    %s = %.4g: %.3f", pt.Constant, pt.At, pt.Value)
		}
	}
	p("Amortization as the fleet grows (cumulative at the end of each epoch; epoch ratio: that epoch's CPU alone):")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\tpipelines\tworkers s\tSIG reader s\tSIG s\tLIG s\tSIG/LIG\tepoch SIG/LIG\twith storage\t")
	for _, a := range r.Amortization {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t%.3f\t\n", a.Epoch, a.Pipelines, a.WorkerSeconds, a.SIGReaderSeconds,
			a.SIGSeconds, a.LIGSeconds, a.Ratio, a.EpochRatio, a.RatioWithStorage)
	}
	tw.Flush()
	p("")

	k := r.Constants
	p("Table I analog: per-pipeline reader CPU to feed one host over the host's CPU budget (measured CPU per example x %g examples/s / %g cores; both modelled, see constants):",
		k.ExamplesPerSecond.Value, k.HostCores.Value)
	p("  phases: initial = a pipeline's first submission, training over its history (SIG serves it memoized); caught-up = its later epochs, one new slot each ; every unit is read both ways, and Table I takes SIG readers for the initial phase and LIG readers for the caught-up one, the paper's two phases")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tpipelines\tp50\tp90\tp95\tp99\tmean\t")
	for _, row := range []struct {
		name string
		q    Percentiles
	}{{"SIG, initial", r.TableI.SIGInitial}, {"LIG, initial (same units)", r.TableI.LIGInitial}, {"LIG, caught-up", r.TableI.LIGCaughtUp}} {
		q := row.q
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t\n", row.name, q.N, q.P50, q.P90, q.P95, q.P99, q.Mean)
	}
	tw.Flush()
	for _, s := range r.TableI.Sensitivity {
		p("  %s (%g cores, %g examples/s): SIG initial p50 %.4f p99 %.4f; LIG caught-up p50 %.4f p99 %.4f", s.Label, s.HostCores, s.ExamplesPerSecond,
			s.SIGInitial.P50, s.SIGInitial.P99, s.LIGCaughtUp.P50, s.LIGCaughtUp.P99)
	}
	p("")

	f6 := r.Figure6
	p("Figure 6 analog (modelled: prices and accelerator time; measured: every CPU figure): per pipeline, LIG reader cost over SIG's (readers + worker share) geomean %.2fx (min %.2f, max %.2f); total cost reduction with SIG geomean %.2f%% (min %.2f%%, max %.2f%%), %d pipelines",
		f6.ReaderReductionGeoMean, f6.ReaderReductionMin, f6.ReaderReductionMax, 100*f6.TotalReductionGeoMean, 100*f6.TotalReductionMin, 100*f6.TotalReductionMax, len(f6.Rows))
	for _, v := range f6.Sensitivity {
		p("  %s (%.4g examples/s, chip-hour %.4g, core-hour %.4g USD): total cost reduction geomean %.2f%% (min %.2f%%, max %.2f%%)", v.Label,
			v.ExamplesPerSecond, v.ChipHourUSD, v.CoreHourUSD, 100*v.TotalReductionGeoMean, 100*v.TotalReductionMin, 100*v.TotalReductionMax)
	}
	p("")

	p("Constants (modelled inputs):")
	for _, kc := range []struct {
		name string
		c    Constant
	}{{"host cores", k.HostCores}, {"examples/s", k.ExamplesPerSecond}, {"chips per host", k.ChipsPerHost}, {"chip-hour", k.ChipHourUSD}, {"core-hour", k.CoreHourUSD}} {
		p("  %s = %g %s: %s", kc.name, kc.c.Value, kc.c.Unit, kc.c.Source)
	}
	if f, ok := r.Costs["sig_over_lig_cost_hosted_store"]; ok {
		for _, n := range slices.Sorted(maps.Keys(f.Constants)) {
			c := f.Constants[n]
			p("  %s = %g %s: %s", n, c.Value, c.Unit, c.Source)
		}
	}
	p("")

	p("Targets (measured):")
	for _, t := range r.Targets {
		met, measured := "MET", fmt.Sprintf("%.4g", t.Measured)
		switch {
		case t.NotMeasured:
			met, measured = "NOT MEASURED", "-"
		case !t.Met:
			met = "NOT MET"
		}
		note := ""
		if t.Note != "" {
			note = " (" + t.Note + ")"
		}
		p("  %-58s want %-26s measured %-7s %s%s", t.Name, t.Want, measured, met, note)
	}
	p("")
	p("Checks:")
	for _, ch := range r.Checks {
		ok := "ok"
		if !ch.OK {
			ok = "FAILED"
		}
		p("  %-6s %s: %s", ok, ch.Name, ch.Detail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// pctOf is pct, or "-" when there were no requests.
func pctOf(x float64, n int) string {
	if n == 0 {
		return "-"
	}
	return pct(x)
}

func loads(l []float64) string {
	if len(l) == 0 {
		return "n/a"
	}
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, " ")
}

// perUnitOf formats counts per unit, in units of scale, by key in order.
func perUnitOf(m map[string]int64, units int, scale float64) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.3g", k, ratio(float64(m[k])/scale, float64(units))))
		}
	}
	return strings.Join(parts, ", ")
}

// countsOf formats counts by key in order.
func countsOf(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
