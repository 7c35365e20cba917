package embreport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/steptime"
)

// Options size the report's runs. Zero fields take the defaults.
type Options struct {
	// Models to run, by name (default all of A–E).
	Models []string
	// Chips of the emulated initial-training slice (default 16: the
	// paper's 128 scaled 8-fold) and examples per chip per step (default
	// 256).
	Chips, BatchPerChip int
	// Elements bounds each model's embedding parameters in memory (default
	// 128M, 512 MiB of float32).
	Elements int64
	// Steps are the real steps run per plan (default 3) and ProfileSteps
	// the steps of the earlier model whose ~3% sampled batches are profiled
	// (default 300).
	Steps, ProfileSteps int
	// Hidden is the width of the real dense layer (default 4): the real
	// MLP only makes the step a training step; the TensorCore time comes
	// from the model's dense weights.
	Hidden int
	// Parameter servers (caught-up phase): servers (default 4), TPU cores
	// (default 8), chips of the caught-up slice (default 2), embedding
	// parameters they hold (default 8M), measured steps (default 3). PSSteps
	// < 0 skips the comparison.
	PSServers, PSCores, CaughtUpChips int
	PSElements                        int64
	PSSteps                           int
	// Seed of the partitioner's heuristic and the model.
	Seed uint64
	// LookupOverheadNS and ShardOverheadNS are the SparseCore's fixed
	// costs per row slice and per shard (default the partitioner's,
	// partition.DefaultLookupOverheadNS and DefaultShardOverheadNS;
	// negative for none), Contention pipelining's (default
	// steptime.DefaultContention; negative for none). All three are
	// guesses; the sweeps show what they decide.
	LookupOverheadNS, ShardOverheadNS, Contention float64
	// ShardOverheadSweep re-solves, re-runs and re-prices the ladder at
	// each shard overhead (default 0, 250, 1000, 4000 ns);
	// ContentionSweep re-prices it at each contention (default 0, 0.05,
	// 0.1, 0.2, 0.5). The configured values are always among them, unless
	// NoSweeps.
	ShardOverheadSweep, ContentionSweep []float64
	NoSweeps                            bool
	// Progress, if set, gets a line per finished model.
	Progress io.Writer
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if len(o.Models) == 0 {
		for _, m := range Models {
			o.Models = append(o.Models, m.Name)
		}
	}
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&o.Chips, 16)
	def(&o.BatchPerChip, 256)
	def(&o.Steps, 3)
	def(&o.ProfileSteps, 300)
	def(&o.Hidden, 4)
	def(&o.PSServers, 4)
	def(&o.PSCores, 8)
	def(&o.CaughtUpChips, 2)
	if o.PSSteps == 0 {
		o.PSSteps = 3
	}
	if o.Elements <= 0 {
		o.Elements = 128 << 20
	}
	if o.PSElements <= 0 {
		o.PSElements = 8 << 20
	}
	orDefault := func(v, d float64) float64 {
		switch {
		case v == 0:
			return d
		case v < 0:
			return 0
		}
		return v
	}
	o.LookupOverheadNS = orDefault(o.LookupOverheadNS, partition.DefaultLookupOverheadNS)
	o.ShardOverheadNS = orDefault(o.ShardOverheadNS, partition.DefaultShardOverheadNS)
	o.Contention = orDefault(o.Contention, steptime.DefaultContention)
	if o.NoSweeps {
		o.ShardOverheadSweep, o.ContentionSweep = nil, nil
		return
	}
	if o.ShardOverheadSweep == nil {
		o.ShardOverheadSweep = []float64{0, 250, 1000, 4000}
	}
	if o.ContentionSweep == nil {
		o.ContentionSweep = []float64{0, 0.05, 0.1, 0.2, 0.5}
	}
	withValue := func(pts []float64, v float64) []float64 {
		pts = append(slices.Clone(pts), v)
		slices.Sort(pts)
		return slices.Compact(pts)
	}
	o.ShardOverheadSweep = withValue(o.ShardOverheadSweep, o.ShardOverheadNS)
	o.ContentionSweep = withValue(o.ContentionSweep, o.Contention)
}

// Report is the embeddings report: Figure 7's ladder and VII.E's
// coalescing comparison for the synthetic models.
type Report struct {
	Chips        int           `json:"chips"`
	SparseCores  int           `json:"sparsecores"`
	Batch        int           `json:"batch"`
	ScaleFactor  float64       `json:"scale_factor"`
	Contention   float64       `json:"contention"`
	LookupNS     float64       `json:"lookup_overhead_ns"`
	ShardNS      float64       `json:"shard_overhead_ns"`
	Models       []ModelResult `json:"models"`
	GeomeanFinal float64       `json:"geomean_speedup"`
	// GeomeanPS is the geometric mean of the coalescing step speedups.
	GeomeanPS float64 `json:"geomean_ps_speedup,omitempty"`
	// Figures are the report's figures (internal/figure): Figure 7's
	// speedups modelled, with the constants that price them and their
	// sweeps; the coalescing speedups measured.
	Figures   figure.Set `json:"figures"`
	Elapsed   string     `json:"elapsed"`
	GoVersion string     `json:"go"`
}

// Run runs the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.EnsureDefaults()
	start := time.Now()
	rep := &Report{Chips: o.Chips, Batch: o.Chips * o.BatchPerChip, ScaleFactor: float64(ProdChips) / float64(o.Chips), GoVersion: runtime.Version()}
	byName := map[string]ModelSpec{}
	for _, m := range Models {
		byName[m.Name] = m
	}
	logF, logPS := 0.0, 0.0
	for _, name := range o.Models {
		spec, ok := byName[strings.ToUpper(name)]
		if !ok {
			return nil, fmt.Errorf("embreport: unknown model %q (want A to E)", name)
		}
		sc := Scale(spec, o.Chips, o.Elements)
		mr, err := tpuRun(ctx, sc, o)
		if err != nil {
			return nil, err
		}
		if o.PSSteps > 0 {
			if mr.PS, err = psRun(ctx, sc, o); err != nil {
				return nil, fmt.Errorf("model %s: parameter servers: %w", spec.Name, err)
			}
			logPS += math.Log(mr.PS.Speedup)
		}
		logF += math.Log(mr.Configs[len(mr.Configs)-1].Speedup)
		rep.Models = append(rep.Models, mr)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "model %s done after %v\n", spec.Name, time.Since(start).Round(time.Second))
		}
	}
	n := float64(len(rep.Models))
	rep.GeomeanFinal = math.Exp(logF / n)
	if o.PSSteps > 0 {
		rep.GeomeanPS = math.Exp(logPS / n)
	}
	chip := o.chip()
	rep.SparseCores = o.Chips * chip.SparseCoresPerChip
	rep.LookupNS, rep.ShardNS = chip.LookupOverheadNS, chip.ShardOverheadNS
	rep.Contention = o.Contention
	rep.Figures = rep.figures(chip)
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	return rep, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the tables.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Embedding optimizations (paper VII.D, Figure 7): %d chips (%d SparseCores), global batch %d, models scaled %gx (see trainer/embedding/embreport)\n",
		r.Chips, r.SparseCores, r.Batch, r.ScaleFactor)
	fmt.Fprintf(&b, "Every speedup of Figure 7 is MODELLED: steptime prices the bytes, row slices and shards of real lookups through each plan with these constants:\n")
	if g, ok := r.Figures[FigGeomean]; ok {
		for _, name := range slices.Sorted(maps.Keys(g.Constants)) {
			c := g.Constants[name]
			fmt.Fprintf(&b, "  %-20s %10.4g %-7s %s\n", name, c.Value, c.Unit, c.Source)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Figure 7: performance relative to the baseline (1 / device time per step)\n")
	fmt.Fprintf(&b, "%-5s %6s %9s %7s | %8s %11s %8s %6s | %8s %21s | %21s\n", "model", "tables", "values/ex", "dense",
		"baseline", "+pipelining", "+hybrid", "+FDP", "TC us", "SC us: rows hyb FDP", "load imb.: rows hyb FDP")
	for _, m := range r.Models {
		c := m.Configs
		fmt.Fprintf(&b, "%-5s %6d %9.1f %6.1fM | %8.2f %11.2f %8.2f %6.2f | %8.1f %9.1f %5.1f %5.1f | %9.2f %5.2f %5.2f\n",
			m.Model, m.Tables, m.ValuesPerExample, m.DenseWeights/1e6,
			c[0].Speedup, c[1].Speedup, c[2].Speedup, c[3].Speedup,
			c[0].TensorCoreUS, c[0].SparseCoreUS, c[2].SparseCoreUS, c[3].SparseCoreUS,
			c[0].MeasuredLoadImbalance, c[2].MeasuredLoadImbalance, c[3].MeasuredLoadImbalance)
	}
	fmt.Fprintf(&b, "geometric mean speedup, all optimizations: %.2fx (+%.0f%%), MODELLED (paper VII.D: 2.16x, +116%%)\n\n", r.GeomeanFinal, 100*(r.GeomeanFinal-1))
	r.writeSweeps(&b)

	fmt.Fprintf(&b, "step times (us, modelled from the real lookups; SC = busiest SparseCore) and the partitioner's cost under the profiled statistics:\n")
	fmt.Fprintf(&b, "%-5s %-12s %-11s %9s %9s %9s %12s %9s  %s\n", "model", "config", "mode", "TC", "SC", "device", "modelled SC", "mod. LI", "layouts")
	for _, m := range r.Models {
		for _, c := range m.Configs {
			fmt.Fprintf(&b, "%-5s %-12s %-11s %9.1f %9.1f %9.1f %12.1f %9.2f  %s\n", m.Model, c.Config, c.Mode,
				c.TensorCoreUS, c.SparseCoreUS, c.DeviceUS, c.ModelledCostUS, c.ModelledLoadImbalance, strategiesText(c.Strategies))
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "scaled models: smallest vocabulary, widths, vocabulary cap, HBM per chip, embedding parameters, largest mean valency, batches profiled for FDP\n")
	fmt.Fprintf(&b, "%-5s %9s %7s %10s %9s %8s %8s %9s\n", "model", "min vocab", "dims", "vocab cap", "HBM/chip", "params", "valency", "profiled")
	for _, m := range r.Models {
		fmt.Fprintf(&b, "%-5s %9d %7s %10d %8.0fM %7.0fM %8.1f %9d\n", m.Model, m.MinVocab, fmt.Sprintf("%d-%d", m.MinDim, m.MaxDim), m.VocabCap,
			float64(m.HBMPerChip)/(1<<20), float64(m.Elements)/1e6, m.MaxMeanValency, m.ProfiledBatches)
	}
	if r.GeomeanPS > 0 {
		b.WriteString("\nParameter servers, caught-up training (paper VII.E): loopback gRPC, one process\n")
		fmt.Fprintf(&b, "%-5s %6s %7s %5s %6s %8s | %-24s | %-24s | %8s %8s\n", "model", "tables", "servers", "cores", "batch", "TPU ms",
			"uncoalesced ms  RPCs/step", "coalesced ms  RPCs/step", "PS x", "step x")
		for _, m := range r.Models {
			p := m.PS
			if p == nil {
				continue
			}
			fmt.Fprintf(&b, "%-5s %6d %7d %5d %6d %8.3f | %14.1f %9.0f | %12.1f %11.0f | %8.2f %8.2f\n", m.Model, p.Tables, p.Servers, p.Cores, p.Batch, p.TPUms,
				p.Uncoalesced.PSMS, p.Uncoalesced.RPCs, p.Coalesced.PSMS, p.Coalesced.RPCs, p.PSSpeedup, p.Speedup)
		}
		fmt.Fprintf(&b, "geometric mean step speedup from coalescing: %.2fx, MEASURED (wall time of real RPCs; the TPU part of a step is modelled and small);\n", r.GeomeanPS)
		b.WriteString("paper VII.E: 1.06-1.10 per model; this machine's loopback gRPC and shared CPUs make RPC overhead far larger relative to the TPU step\n")
	}
	fmt.Fprintf(&b, "\n(%s, %s)\n", r.Elapsed, r.GoVersion)
	_, err := io.WriteString(w, b.String())
	return err
}
