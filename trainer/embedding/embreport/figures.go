package embreport

import (
	"fmt"
	"math"
	"strings"

	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/trainer/steptime"
)

// The report's figures, by name; per-model figures end in the model's
// name (speedup_A).
const (
	FigGeomean       = "geomean_speedup"
	FigSpeedup       = "speedup_"     // all optimizations over the baseline
	FigPipelining    = "pipelining_"  // +Pipelining over the baseline
	FigHybridGain    = "hybrid_gain_" // +Hybrid over +Pipelining
	FigFDPGain       = "fdp_gain_"    // +FDP over +Hybrid
	FigPSGeomean     = "coalescing_ps_speedup_geomean"
	FigStepGeomean   = "coalescing_step_speedup_geomean"
	FigCoalescedStep = "coalescing_step_speedup_"
)

// paperFDPGain and paperCoalescing are the paper's per-model figures
// (VII.D, VII.E).
var (
	paperFDPGain    = map[string]float64{"B": 1.21, "E": 1.19}
	paperCoalescing = map[string]float64{"A": 1.08, "B": 1.10, "C": 1.10, "D": 1.08, "E": 1.06}
)

// tpuConstants are the constants that price a step, with their sources.
func (r *Report) tpuConstants(chip steptime.Chip) map[string]figure.Constant {
	tpuV4 := "TPU v4, cloud.google.com/tpu/docs/v4"
	return map[string]figure.Constant{
		"peak_flops":    {Value: chip.PeakFLOPS, Unit: "FLOP/s", Source: tpuV4},
		"hbm_bandwidth": {Value: chip.HBMBandwidth, Unit: "B/s", Source: tpuV4},
		"sparsecores_per_chip": {Value: float64(chip.SparseCoresPerChip), Source: "Jouppi et al., TPU v4, ISCA 2023; " +
			"docs.jax.dev/en/latest/pallas/tpu/sparsecore.html: 2 or 4 per chip by TPU version"},
		"access_granularity": {Value: float64(chip.AccessGranularity), Unit: "B", Source: figure.Guess},
		"lookup_overhead_ns": {Value: r.LookupNS, Unit: "ns", Source: figure.Guess +
			": an order of magnitude (partition.DefaultLookupOverheadNS); no public measurement"},
		"shard_overhead_ns": {Value: r.ShardNS, Unit: "ns", Source: figure.Guess +
			": an order of magnitude (partition.DefaultShardOverheadNS); no public measurement of a SparseCore's cost per shard"},
		"contention": {Value: r.Contention, Source: figure.Guess +
			": the paper (VII.D) says both engines slow down when pipelined, not by how much"},
		"chips": {Value: float64(r.Chips), Source: fmt.Sprintf("choice: the paper's %d chips (VII.A) scaled %gx to fit this machine", ProdChips, r.ScaleFactor)},
	}
}

// figures labels Figure 7's speedups as modelled (the constants that
// price them, swept over the shard overhead and the contention) and the
// coalescing speedups as measured.
func (r *Report) figures(chip steptime.Chip) figure.Set {
	set := figure.Set{}
	consts := r.tpuConstants(chip)
	how := "steptime's pricing of real lookups through each plan (trainer/model: bytes, row slices and shards per SparseCore), "
	add := func(name string, value float64, what string, paper *figure.Paper, at func(p LadderPoint, m ModelResult) float64, models []ModelResult) {
		f := figure.Figure{Value: value, Unit: "x", Kind: figure.Modelled, How: how + what, Paper: paper, Constants: consts}
		for _, sw := range []struct {
			constant string
			points   func(ModelResult) []LadderPoint
		}{
			{"shard_overhead_ns", func(m ModelResult) []LadderPoint { return m.ShardOverheadSweep }},
			{"contention", func(m ModelResult) []LadderPoint { return m.ContentionSweep }},
		} {
			if len(models) == 0 || len(sw.points(models[0])) == 0 {
				continue
			}
			for i, p := range sw.points(models[0]) {
				// The geometric mean over models at this point (one model:
				// its value).
				var logs float64
				for _, m := range models {
					logs += math.Log(at(sw.points(m)[i], m))
				}
				f.Sweep = append(f.Sweep, figure.Point{Constant: sw.constant, At: p.At, Value: math.Exp(logs / float64(len(models)))})
			}
		}
		set[name] = f
	}
	final := func(p LadderPoint, _ ModelResult) float64 { return p.Speedups[3] }
	add(FigGeomean, r.GeomeanFinal, "geometric mean over the models of the device time of Baseline over +FDP",
		&figure.Paper{Value: 2.16, Where: "Ads paper VII.D: geometric mean improvement 116%"}, final, r.Models)
	for _, m := range r.Models {
		ms := []ModelResult{m}
		c := m.Configs
		add(FigSpeedup+m.Model, c[3].Speedup, "model "+m.Model+": device time of Baseline over +FDP", nil, final, ms)
		add(FigPipelining+m.Model, c[1].Speedup, "model "+m.Model+": device time of Baseline over +Pipelining", nil,
			func(p LadderPoint, _ ModelResult) float64 { return p.Speedups[1] }, ms)
		add(FigHybridGain+m.Model, c[1].DeviceUS/c[2].DeviceUS, "model "+m.Model+": device time of +Pipelining over +Hybrid", nil,
			func(p LadderPoint, _ ModelResult) float64 { return p.DeviceUS[1] / p.DeviceUS[2] }, ms)
		var paper *figure.Paper
		if v, ok := paperFDPGain[m.Model]; ok {
			paper = &figure.Paper{Value: v, Where: "Ads paper VII.D: FDP improves model " + m.Model}
		}
		add(FigFDPGain+m.Model, c[2].DeviceUS/c[3].DeviceUS, "model "+m.Model+": device time of +Hybrid over +FDP", paper,
			func(p LadderPoint, _ ModelResult) float64 { return p.DeviceUS[2] / p.DeviceUS[3] }, ms)
	}
	if r.GeomeanPS > 0 {
		psHow := "wall time of real Lookup and Apply RPCs to in-process parameter servers over loopback gRPC, uncoalesced vs coalesced on the same batches (one process, this machine's CPUs)"
		var logPS float64
		for _, m := range r.Models {
			if m.PS == nil {
				continue
			}
			logPS += math.Log(m.PS.PSSpeedup)
			var paper *figure.Paper
			if v, ok := paperCoalescing[m.Model]; ok {
				paper = &figure.Paper{Value: v, Where: "Ads paper VII.E: coalescing speeds up caught-up model " + m.Model}
			}
			set[FigCoalescedStep+m.Model] = figure.Figure{Value: m.PS.Speedup, Unit: "x", Kind: figure.Measured, Paper: paper,
				How: "model " + m.Model + ": " + psHow + ", plus the TensorCore's modelled step time (" +
					fmt.Sprintf("%.3f ms of %.1f ms uncoalesced", m.PS.TPUms, m.PS.Uncoalesced.StepMS) + ")",
				Constants: map[string]figure.Constant{"peak_flops": consts["peak_flops"]}}
		}
		set[FigPSGeomean] = figure.Figure{Value: math.Exp(logPS / float64(len(r.Models))), Unit: "x", Kind: figure.Measured,
			How: "geometric mean over the models of the " + psHow}
		set[FigStepGeomean] = figure.Figure{Value: r.GeomeanPS, Unit: "x", Kind: figure.Measured,
			How:       "geometric mean over the models of the caught-up step speedup: " + psHow + ", plus the modelled TensorCore time",
			Constants: map[string]figure.Constant{"peak_flops": consts["peak_flops"]}}
	}
	return set
}

// writeSweeps prints how Figure 7's speedups move with the shard overhead
// and the contention.
func (r *Report) writeSweeps(b *strings.Builder) {
	if len(r.Models) == 0 || len(r.Models[0].ShardOverheadSweep) == 0 {
		return
	}
	table := func(title, unit string, points func(ModelResult) []LadderPoint) {
		b.WriteString(title + "\n")
		fmt.Fprintf(b, "%-20s", "model")
		for _, p := range points(r.Models[0]) {
			fmt.Fprintf(b, " %8s", strings.TrimSpace(fmt.Sprintf("%g %s", p.At, unit)))
		}
		b.WriteString("\n")
		logs := make([][3]float64, len(points(r.Models[0])))
		for _, m := range r.Models {
			fmt.Fprintf(b, "%-20s", m.Model)
			for i, p := range points(m) {
				fmt.Fprintf(b, " %8.2f", p.Speedups[3])
				for k := range 3 {
					logs[i][k] += math.Log(p.Speedups[k+1])
				}
			}
			b.WriteString("\n")
		}
		n := float64(len(r.Models))
		for k, rung := range []string{Pipelining, Hybrid, FDP} {
			fmt.Fprintf(b, "%-20s", "geomean "+rung)
			for i := range logs {
				fmt.Fprintf(b, " %8.2f", math.Exp(logs[i][k]/n))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("What the constants decide: speedup with all optimizations per model, and the geometric means of each rung over the baseline\n")
	table("by shard overhead (the partitioner re-plans, the model re-runs, steptime re-prices at each):", "ns",
		func(m ModelResult) []LadderPoint { return m.ShardOverheadSweep })
	table(fmt.Sprintf("by pipelining contention (the plans of %g ns per shard, re-priced; 0 is perfect overlap):", r.ShardNS), "",
		func(m ModelResult) []LadderPoint { return m.ContentionSweep })
	b.WriteString("\n")
}
