package results

import "math"

// DefaultConstants are the modelled inputs fleet/run uses unless told
// otherwise, with where each comes from. None is a measurement of this
// system; none was chosen to match the paper's figures.
func DefaultConstants() Constants {
	return Constants{
		HostCores: Constant{Value: 240, Unit: "cores",
			Source: "the vCPUs of a Cloud TPU v4 host (4 chips; GKE machine type ct4p-hightpu-4t), as we recall Google Cloud's documentation, not verified here; the paper's hosts have 2 AMD Rome sockets. Every core counted as available to input reading, Table I's optimistic case"},
		ExamplesPerSecond: Constant{Value: 100_000, Unit: "examples/s per host",
			Source: "a guess: what one host's accelerators consume of a recommendation model (e.g. a 64k-example global batch every 80 ms over 8 hosts); no public figure for the paper's models"},
		ChipsPerHost: Constant{Value: 4, Unit: "chips", Source: "Cloud TPU v4: 4 chips per host (ct4p-hightpu-4t)"},
		ChipHourUSD: Constant{Value: 3.22, Unit: "USD per chip-hour",
			Source: "Cloud TPU v4 on-demand list price, us-central2, as published on cloud.google.com/tpu/pricing in 2022"},
		CoreHourUSD: Constant{Value: 0.0486, Unit: "USD per core-hour",
			Source: "Google Cloud N2 on-demand, us-central1: $0.031611 per vCPU-hour plus 4 GB at $0.004237 per GB-hour, as we recall the list prices, not verified here"},
	}
}

// TableI mirrors paper Table I: per pipeline, the CPU its input readers
// need to feed one host's accelerators (measured CPU per example times
// ExamplesPerSecond) over what the host offers (HostCores). Values above 1
// need more CPU than the host has.
type TableI struct {
	// SIGInitial: SIG readers, initial training (the paper's SIG phase).
	SIGInitial Percentiles `json:"sig_initial"`
	// LIGCaughtUp: LIG readers, caught-up training (the paper's LIG phase).
	LIGCaughtUp Percentiles `json:"lig_caught_up"`
	// LIGInitial: LIG readers over the very units SIGInitial read.
	LIGInitial Percentiles `json:"lig_initial"`
	// Sensitivity: the same with each constant halved and doubled.
	Sensitivity []TableIRow `json:"sensitivity"`
}

// TableIRow is Table I under other constants.
type TableIRow struct {
	Label             string      `json:"label"`
	HostCores         float64     `json:"host_cores"`
	ExamplesPerSecond float64     `json:"examples_per_second"`
	SIGInitial        Percentiles `json:"sig_initial"`
	LIGCaughtUp       Percentiles `json:"lig_caught_up"`
}

// tableI returns the ratios of every pipeline with reads of the phase.
func tableI(ps []Pipeline, hostCores, eps float64) (sigInit, ligCaught, ligInit []float64) {
	for _, p := range ps {
		if p.Initial.Examples > 0 {
			sigInit = append(sigInit, p.Initial.SIGSeconds/float64(p.Initial.Examples)*eps/hostCores)
			ligInit = append(ligInit, p.Initial.LIGSeconds/float64(p.Initial.Examples)*eps/hostCores)
		}
		if p.CaughtUp.Examples > 0 {
			ligCaught = append(ligCaught, p.CaughtUp.LIGSeconds/float64(p.CaughtUp.Examples)*eps/hostCores)
		}
	}
	return
}

// NewTableI computes Table I from the pipelines' measurements.
func NewTableI(ps []Pipeline, c Constants) TableI {
	s, l, li := tableI(ps, c.HostCores.Value, c.ExamplesPerSecond.Value)
	t := TableI{SIGInitial: NewPercentiles(s), LIGCaughtUp: NewPercentiles(l), LIGInitial: NewPercentiles(li)}
	for _, v := range []struct {
		label string
		h, e  float64
	}{
		{"host cores x0.5", 0.5, 1}, {"host cores x2", 2, 1},
		{"examples/s x0.5", 1, 0.5}, {"examples/s x2", 1, 2},
	} {
		h, e := c.HostCores.Value*v.h, c.ExamplesPerSecond.Value*v.e
		s, l, _ := tableI(ps, h, e)
		t.Sensitivity = append(t.Sensitivity, TableIRow{Label: v.label, HostCores: h, ExamplesPerSecond: e,
			SIGInitial: NewPercentiles(s), LIGCaughtUp: NewPercentiles(l)})
	}
	return t
}

// Figure6 is the cost of each pipeline's training, as paper Figure 6:
// accelerator time (examples over ExamplesPerSecond, on ChipsPerHost
// chips at ChipHourUSD) plus input readers (measured CPU at CoreHourUSD),
// with SIG also paying its share of the workers' measured CPU.
type Figure6 struct {
	Rows []Figure6Row `json:"rows"`
	// ReaderReduction is LIG reader cost over SIG's (readers plus worker
	// share) across pipelines; TotalReduction is 1 - SIG total / LIG
	// total. Geometric means, minima and maxima.
	ReaderReductionGeoMean float64 `json:"reader_reduction_geomean"`
	ReaderReductionMin     float64 `json:"reader_reduction_min"`
	ReaderReductionMax     float64 `json:"reader_reduction_max"`
	TotalReductionGeoMean  float64 `json:"total_reduction_geomean"`
	TotalReductionMin      float64 `json:"total_reduction_min"`
	TotalReductionMax      float64 `json:"total_reduction_max"`
	// Sensitivity: the total reduction with the constants that decide it
	// changed (the accelerator time an example costs against the CPU's:
	// examples/s and the chip-hour's price against the core-hour's). The
	// reader reduction depends on no constant (the core-hour's price
	// cancels).
	Sensitivity []Figure6Sweep `json:"sensitivity"`
}

// Figure6Sweep is Figure 6's total reduction under other constants.
type Figure6Sweep struct {
	Label                 string  `json:"label"`
	ExamplesPerSecond     float64 `json:"examples_per_second"`
	ChipHourUSD           float64 `json:"chip_hour_usd"`
	CoreHourUSD           float64 `json:"core_hour_usd"`
	TotalReductionGeoMean float64 `json:"total_reduction_geomean"`
	TotalReductionMin     float64 `json:"total_reduction_min"`
	TotalReductionMax     float64 `json:"total_reduction_max"`
}

// Figure6Row is one pipeline's costs in USD.
type Figure6Row struct {
	Pipeline    string  `json:"pipeline"`
	Examples    int64   `json:"examples"`
	Accelerator float64 `json:"accelerator"`
	SIGReaders  float64 `json:"sig_readers"`
	SIGWorkers  float64 `json:"sig_workers"`
	LIGReaders  float64 `json:"lig_readers"`
}

// SIG is the pipeline's cost with SIG.
func (r Figure6Row) SIG() float64 { return r.Accelerator + r.SIGReaders + r.SIGWorkers }

// LIG is its cost with LIG.
func (r Figure6Row) LIG() float64 { return r.Accelerator + r.LIGReaders }

// NewFigure6 prices every pipeline with reads, and again under the
// sensitivity's constants.
func NewFigure6(ps []Pipeline, c Constants) Figure6 {
	f := figure6(ps, c)
	for _, v := range []struct {
		label           string
		eps, chip, core float64
	}{
		{"examples/s x0.1", 0.1, 1, 1}, {"examples/s x10", 10, 1, 1}, {"examples/s x100", 100, 1, 1},
		{"chip-hour x0.1", 1, 0.1, 1}, {"core-hour x10", 1, 1, 10},
	} {
		k := c
		k.ExamplesPerSecond.Value *= v.eps
		k.ChipHourUSD.Value *= v.chip
		k.CoreHourUSD.Value *= v.core
		g := figure6(ps, k)
		f.Sensitivity = append(f.Sensitivity, Figure6Sweep{Label: v.label, ExamplesPerSecond: k.ExamplesPerSecond.Value,
			ChipHourUSD: k.ChipHourUSD.Value, CoreHourUSD: k.CoreHourUSD.Value,
			TotalReductionGeoMean: g.TotalReductionGeoMean, TotalReductionMin: g.TotalReductionMin, TotalReductionMax: g.TotalReductionMax})
	}
	return f
}

func figure6(ps []Pipeline, c Constants) Figure6 {
	var f Figure6
	core := c.CoreHourUSD.Value / 3600
	var readerLogs, totalLogs []float64
	for _, p := range ps {
		r := p.Initial.Add(p.CaughtUp)
		if r.Examples == 0 {
			continue
		}
		row := Figure6Row{Pipeline: p.Pipeline, Examples: r.Examples,
			Accelerator: float64(r.Examples) / c.ExamplesPerSecond.Value * c.ChipsPerHost.Value * c.ChipHourUSD.Value / 3600,
			SIGReaders:  r.SIGSeconds * core, SIGWorkers: p.WorkerShare * core, LIGReaders: r.LIGSeconds * core}
		f.Rows = append(f.Rows, row)
		if sig := row.SIGReaders + row.SIGWorkers; sig > 0 && row.LIGReaders > 0 {
			readerLogs = append(readerLogs, row.LIGReaders/sig)
		}
		if row.LIG() > 0 {
			totalLogs = append(totalLogs, 1-row.SIG()/row.LIG())
		}
	}
	f.ReaderReductionGeoMean, f.ReaderReductionMin, f.ReaderReductionMax = geoStats(readerLogs)
	// The total reductions are fractions that may be negative (SIG dearer
	// for a pipeline): their geometric mean is of 1 - reduction, the
	// relative cost, as the paper's "geometric mean of the cost reduction".
	var rel []float64
	for _, x := range totalLogs {
		rel = append(rel, 1-x)
	}
	g, lo, hi := geoStats(rel)
	f.TotalReductionGeoMean, f.TotalReductionMin, f.TotalReductionMax = 1-g, 1-hi, 1-lo
	return f
}

// geoStats returns the geometric mean, minimum and maximum of positive xs.
func geoStats(xs []float64) (geo, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	sum := 0.0
	for _, x := range xs {
		sum += math.Log(x)
		lo, hi = min(lo, x), max(hi, x)
	}
	return math.Exp(sum / float64(len(xs))), lo, hi
}
