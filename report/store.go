package report

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/internal/svgplot"
)

// targetsTable reports a fleet run against the issues' targets as this
// build states them (results.NewTargets, recomputed from the file's
// figures: a file keeps the targets of when it ran, and issue 28's replace
// issue 18's CPU target).
func targetsTable(s *Section, r *results.Results) {
	t := Table{Caption: "The issues' targets, recomputed by this build from the run's figures (results.NewTargets; issue 28's CPU target replaces issue 18's), with the bound the store's bytes set where the run counted them",
		Header: []string{"target", "issue", "want", "measured", "result", "note"}}
	for _, tg := range results.NewTargets(r) {
		value, result := num(tg.Measured), met(tg.Met)
		if tg.NotMeasured {
			value, result = "–", "not measured"
		}
		t.Rows = append(t.Rows, []string{tg.Name, tg.Issue, tg.Want, value, result, tg.Note})
	}
	s.table(t)
}

// storeSection reports the object store's requests and bytes per side and
// their price beside the CPU's, or that the run did not count them.
func storeSection(s *Section, r *results.Results) {
	st := r.Store
	if st == nil {
		s.text("**Object-store requests and bytes: not measured.** This run (commit %s) predates fleet/run's count of the requests MinIO served each side (issue 28), "+
			"so there are no requests per unit, no split of MinIO's CPU between requests and bytes, and no price of the requests beside the CPU's. "+
			"`bash bench/fleet-run.sh` writes them (`FLEET_FULL=1` for the full fleet).", orNone(r.Machine.Commit))
		return
	}
	c := r.CPU
	s.text("Object-store traffic, measured at the server: %s. %d units read each way (%d examples).", st.Source, st.Units, st.Examples)
	t := Table{Caption: "Requests (by kind, as object stores price them) and bytes per side, measured; MinIO's CPU while each side ran (measured) and its split between requests and bytes by the fit below",
		Header: []string{"side", "requests", "GET", "HEAD", "PUT", "LIST", "DELETE", "other", "errors", "sent", "received", "requests per unit", "MinIO CPU s", "fit: requests s", "fit: bytes s"}}
	f := st.Fit
	for _, side := range []struct {
		name   string
		q      results.Requests
		cpu    float64
		fitted bool
	}{{"workers", st.Worker, c.MinIOWorker, false}, {"SIG reader", st.SIGReader, c.MinIOSIGReader, true},
		{"LIG reader", st.LIGReader, c.MinIOLIGReader, true}, {"the whole run", st.Whole, c.MinIO, false}} {
		q := side.q
		row := []string{side.name, fmt.Sprint(q.Total())}
		for _, k := range results.RequestKinds {
			row = append(row, fmt.Sprint(q.Kind(k)))
		}
		perUnit := num(st.PerUnit(q))
		if side.name == "the whole run" {
			perUnit = "–" // ingestion's and sigd's own are in it
		}
		rq, by := "–", "–"
		if side.fitted && f.Samples > 0 {
			a, b := f.Part(q)
			rq, by = num(a), num(b)
		}
		row = append(row, fmt.Sprint(q.Errors), num(float64(q.SentBytes))+"B", num(float64(q.ReceivedBytes))+"B", perUnit, num(side.cpu), rq, by)
		t.Rows = append(t.Rows, row)
	}
	s.table(t)

	if f.Samples > 0 {
		sigReq, sigBytes := f.Part(st.SIGReader)
		ligReq, ligBytes := f.Part(st.LIGReader)
		bound := func(rq, by float64) string {
			if by > rq {
				return "bytes"
			}
			return "requests"
		}
		s.plot("store", Plot{Title: "MinIO's CPU serving each reader: requests or bytes", Kind: figure.Measured,
			Caption: fmt.Sprintf("Measured: MinIO's CPU while each reader read (the run does one thing at a time). Split by a least-squares fit over the %d reader phases of the run "+
				"(MinIO CPU = %s ms per request + %s ms per MiB, R² %s; a fit of measured figures, held at 0 or above): for the SIG reader %s s of requests and %s s of bytes, "+
				"so %s bound it; for the LIG reader %s s and %s s, %s. The workers' phases (PUTs, and sigd's work) are not fitted.",
				f.Samples, num(f.PerRequest*1e3), num(f.PerByte*(1<<20)*1e3), fixed(f.R2, 2), num(sigReq), num(sigBytes), bound(sigReq, sigBytes),
				num(ligReq), num(ligBytes), bound(ligReq, ligBytes)),
			SVG: svgplot.Bars{Title: "MinIO CPU per reader, measured and split by the fit", XLabel: "reader", Categories: []string{"SIG reader", "LIG reader"},
				Y: svgplot.Axis{Label: "MinIO CPU s"}, Groups: []svgplot.Group{{Name: "measured", Values: []float64{c.MinIOSIGReader, c.MinIOLIGReader}},
					{Name: "requests (fit)", Values: []float64{sigReq, ligReq}}, {Name: "bytes (fit)", Values: []float64{sigBytes, ligBytes}}}}.SVG()})
	}
	costsSection(s, r)
}

// costsSection prices the requests beside the CPU (results.Costs: the
// file's own, or this build's prices for a file with requests but none).
func costsSection(s *Section, r *results.Results) {
	k := r.Costs
	source := "the run's"
	if len(k) == 0 {
		k, source = results.NewCosts(r, results.Prices()), "this build's (the file has none)"
	}
	h, ok := k["sig_over_lig_cost_hosted_store"]
	if !ok {
		return
	}
	c := r.CPU
	t := Table{Caption: "Requests at a public object store's per-request prices beside CPU at a core-hour's (modelled: " + source + " prices, listed below with their sources)",
		Header: []string{"side", "requests USD", "CPU USD", "requests / CPU"}}
	for _, side := range []struct{ name, key string }{{"workers", "workers"}, {"SIG reader", "sig_reader"}, {"LIG reader", "lig_reader"}} {
		t.Rows = append(t.Rows, []string{side.name, num(k["requests_usd_"+side.key].Value), num(k["cpu_usd_"+side.key].Value), num(k["requests_over_cpu_"+side.key].Value)})
	}
	s.text("At these prices a GET costs what %s ms of a core does and a PUT %s ms (modelled): a side whose requests cost more than its CPU (requests / CPU above 1) is decided by its requests. "+
		"With a hosted store, paid per request instead of by its CPU, SIG's cost over LIG's is %s; by process CPU alone (measured) it is %s, counting MinIO's CPU %s.",
		num(k["get_in_core_ms"].Value), num(k["put_in_core_ms"].Value), fixed(h.Value, 3), fixed(c.Ratio(), 3), fixed(c.RatioWithStorage(), 3))
	s.table(t)

	// How the conclusion moves with each price: one line per price,
	// against its multiple of the listed value.
	var series []svgplot.Series
	names := slices.Sorted(maps.Keys(h.Constants))
	for _, n := range names {
		base := h.Constants[n].Value
		sr := svgplot.Series{Name: n, X: []float64{1}, Y: []float64{h.Value}}
		for _, p := range h.SweepOf(n) {
			sr.X, sr.Y = append(sr.X, p.At/base), append(sr.Y, p.Value)
		}
		sortSeries(&sr)
		series = append(series, sr)
	}
	s.plot("costs", Plot{Title: "SIG / LIG cost with a hosted object store, against the prices", Kind: figure.Modelled,
		Caption: fmt.Sprintf("%s. Each line moves one price from a quarter to four times its listed value, the others at theirs: %s. The mark is SIG / LIG by process CPU alone (measured), which no price changes.",
			h.How, constantsText(h.Constants)),
		SVG: svgplot.Line{Title: "SIG / LIG cost with a hosted store", X: svgplot.Axis{Label: "price / its listed value", Log: true},
			Y: svgplot.Axis{Label: "SIG / LIG cost"}, Marks: []svgplot.Mark{{Label: "process CPU alone", Y: c.Ratio()}}, Series: series}.SVG()})

	sw := Table{Caption: "SIG / LIG cost with a hosted store at other prices (each moved alone)", Header: []string{"price", "value", "SIG / LIG cost"}}
	for _, n := range names {
		for _, p := range h.SweepOf(n) {
			sw.Rows = append(sw.Rows, []string{n, strconv.FormatFloat(p.At, 'g', 4, 64) + unit(h.Constants[n].Unit), fixed(p.Value, 3)})
		}
	}
	s.table(sw)
	ct := Table{Caption: "The prices (modelled constants) and their sources", Header: []string{"constant", "value", "source"}}
	for _, n := range names {
		cn := h.Constants[n]
		ct.Rows = append(ct.Rows, []string{n, strconv.FormatFloat(cn.Value, 'g', 6, 64) + unit(cn.Unit), cn.Source})
	}
	s.table(ct)
}

// sortSeries orders a line's points by x.
func sortSeries(sr *svgplot.Series) {
	idx := make([]int, len(sr.X))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(sr.X[a], sr.X[b]) })
	x, y := make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		x[i], y[i] = sr.X[j], sr.Y[j]
	}
	sr.X, sr.Y = x, y
}
