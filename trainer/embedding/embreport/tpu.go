package embreport

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
)

// The Figure 7 ladder (paper VII.D).
const (
	Baseline   = "baseline"    // row sharding, serialized
	Pipelining = "+pipelining" // row sharding, pipelined
	Hybrid     = "+hybrid"     // the partitioner's plan from compile-time knowledge, pipelined
	FDP        = "+fdp"        // the partitioner's plan from profiled statistics, pipelined
)

// ConfigResult is one rung of the ladder for one model.
type ConfigResult struct {
	Config string `json:"config"`
	Mode   string `json:"mode"`
	Plan   string `json:"plan"`
	// Mean modelled times of the measured steps, in microseconds.
	TensorCoreUS float64 `json:"tensorcore_us"`
	SparseCoreUS float64 `json:"sparsecore_us"`
	DeviceUS     float64 `json:"device_us"`
	// Speedup is the baseline's device time over this one's (Figure 7's
	// "performance").
	Speedup float64 `json:"speedup"`
	// MeasuredLoadImbalance is Eq. 1 over the bytes each SparseCore moved
	// in the real lookups.
	MeasuredLoadImbalance float64 `json:"measured_load_imbalance"`
	// ModelledCostUS and ModelledLoadImbalance are the partitioner's cost
	// model's view of the plan under the profiled statistics.
	ModelledCostUS        float64        `json:"modelled_cost_us"`
	ModelledLoadImbalance float64        `json:"modelled_load_imbalance"`
	Shards                int            `json:"shards"`
	Strategies            map[string]int `json:"strategies"`
}

// ModelResult is one synthetic model's ladder and its parameter-server
// comparison.
type ModelResult struct {
	Model        string  `json:"model"`
	Note         string  `json:"note"`
	Tables       int     `json:"tables"`
	DenseWeights float64 `json:"dense_weights"`
	VocabCap     int64   `json:"vocab_cap"`
	MinVocab     int64   `json:"min_vocab"`
	MinDim       int     `json:"min_dim"`
	MaxDim       int     `json:"max_dim"`
	// ValuesPerExample is the mean feature values per example over all
	// tables, and MaxMeanValency the largest table mean (measured).
	ValuesPerExample float64 `json:"values_per_example"`
	MaxMeanValency   float64 `json:"max_mean_valency"`
	HBMPerChip       int64   `json:"hbm_bytes_per_chip"`
	Elements         int64   `json:"embedding_parameters"`
	ProfiledBatches  uint64  `json:"profiled_batches"`
	// Configs are Baseline, Pipelining, Hybrid and FDP in that order.
	Configs []ConfigResult `json:"configs"`
	// ShardOverheadSweep and ContentionSweep are the ladder at each swept
	// value (Options).
	ShardOverheadSweep []LadderPoint `json:"shard_overhead_sweep,omitempty"`
	ContentionSweep    []LadderPoint `json:"contention_sweep,omitempty"`
	PS                 *PSResult     `json:"parameter_servers,omitempty"`
}

// LadderPoint is the ladder again with one constant changed: the
// speedups of Baseline, Pipelining, Hybrid and FDP over the baseline at
// that value, and their device times.
type LadderPoint struct {
	At       float64   `json:"at"`
	Speedups []float64 `json:"speedups"`
	DeviceUS []float64 `json:"device_us"`
}

// ladder is what a model's rungs share whatever the overheads: the
// features, the compile-time and profiled tables, the held-out batches.
type ladder struct {
	sc             Scaled
	o              Options
	f              model.Features
	shapes         []model.Shape
	compileTables  []partition.Table
	measuredTables []partition.Table
	batches        []*model.Examples
	batch          int
}

// run is one plan's real steps.
type run struct {
	plan    *partition.Plan
	works   []steptime.Work
	pooling []float64
}

func (l *ladder) topology(chip steptime.Chip) partition.Topology {
	return partition.Topology{Chips: l.o.Chips, SparseCoresPerChip: chip.SparseCoresPerChip, HBMBytesPerChip: l.sc.HBMPerChip,
		HBMBandwidth: chip.HBMBandwidth, AccessGranularity: chip.AccessGranularity,
		LookupOverheadNS: chip.LookupOverheadNS, ShardOverheadNS: chip.ShardOverheadNS}
}

// runPlan trains the held-out batches through plan. Every plan trains
// with one-step-stale embedding gradients, as the pipelined rungs do.
func (l *ladder) runPlan(ctx context.Context, plan *partition.Plan, chip steptime.Chip) (*run, error) {
	m, err := model.New(model.Config{Features: l.f, Shapes: l.shapes, Hidden: l.o.Hidden, Seed: l.o.Seed, Plan: plan,
		Cost: steptime.Model{Chip: chip, Chips: l.o.Chips}, StaleEmbeddingGradients: true})
	if err != nil {
		return nil, err
	}
	r := &run{plan: plan}
	for _, b := range l.batches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, err := m.Step(b)
		if err != nil {
			return nil, err
		}
		r.works = append(r.works, out.Work)
		r.pooling = append(r.pooling, out.PoolingFLOPs)
	}
	return r, nil
}

// rungs solves the hybrid and FDP plans for chip's overheads, runs them
// (rows, the row-sharded run, does not depend on the overheads) and prices
// the four rungs with chip and contention.
func (l *ladder) rungs(ctx context.Context, chip steptime.Chip, contention float64, rows *run) ([]ConfigResult, [3]*run, error) {
	name := l.sc.Spec.Name
	topo := l.topology(chip)
	hybrid, err := partition.Solve(&partition.Problem{Tables: l.compileTables, Topology: topo, BatchSize: l.batch}, partition.Options{Seed: l.o.Seed})
	if err != nil {
		return nil, [3]*run{}, fmt.Errorf("model %s: hybrid plan: %w", name, err)
	}
	withFDP, err := partition.Solve(&partition.Problem{Tables: l.measuredTables, Topology: topo, BatchSize: l.batch}, partition.Options{Seed: l.o.Seed})
	if err != nil {
		return nil, [3]*run{}, fmt.Errorf("model %s: FDP plan: %w", name, err)
	}
	hybridRun, err := l.runPlan(ctx, hybrid, chip)
	if err != nil {
		return nil, [3]*run{}, err
	}
	fdpRun, err := l.runPlan(ctx, withFDP, chip)
	if err != nil {
		return nil, [3]*run{}, err
	}
	runs := [3]*run{rows, hybridRun, fdpRun}
	configs, err := l.price(runs, chip, contention)
	return configs, runs, err
}

// price prices the four rungs of runs (rows, hybrid, FDP) with chip and
// contention (steptime.Model.Contention: negative for none).
func (l *ladder) price(runs [3]*run, chip steptime.Chip, contention float64) ([]ConfigResult, error) {
	dev := steptime.Model{Chip: chip, Chips: l.o.Chips, Contention: contention}
	measured := &partition.Problem{Tables: l.measuredTables, Topology: l.topology(chip), BatchSize: l.batch}
	denseFLOPs := 6 * l.sc.DenseWeights * float64(l.batch) // forward 2·W, backward 4·W per example
	price := func(name string, r *run, mode steptime.Mode, planName string) (ConfigResult, error) {
		d := dev
		d.Mode = mode
		cr := ConfigResult{Config: name, Mode: mode.String(), Plan: planName, Shards: len(r.plan.Shards), Strategies: map[string]int{}}
		bytes := make([]float64, r.plan.SparseCores)
		for i, w := range r.works {
			w.FLOPs = denseFLOPs + r.pooling[i]
			t := d.Step(w)
			cr.TensorCoreUS += us(t.TensorCore) / float64(len(r.works))
			cr.SparseCoreUS += us(t.SparseCore) / float64(len(r.works))
			cr.DeviceUS += us(t.Device) / float64(len(r.works))
			for sc, b := range w.SparseCoreBytes {
				bytes[sc] += b
			}
		}
		cr.MeasuredLoadImbalance = fdp.LoadImbalance(bytes)
		for _, ly := range r.plan.Layouts {
			cr.Strategies[ly.Strategy]++
		}
		ev := *r.plan
		ev.Shards = append([]partition.Shard(nil), r.plan.Shards...)
		if err := partition.Evaluate(measured, &ev); err != nil {
			return cr, fmt.Errorf("model %s: evaluating the %s plan: %w", l.sc.Spec.Name, planName, err)
		}
		cr.ModelledCostUS, cr.ModelledLoadImbalance = ev.CostNS/1e3, ev.LoadImbalance
		return cr, nil
	}
	var out []ConfigResult
	for _, c := range []struct {
		name, plan string
		r          *run
		mode       steptime.Mode
	}{
		{Baseline, "row sharding", runs[0], steptime.Serialized},
		{Pipelining, "row sharding", runs[0], steptime.Pipelined},
		{Hybrid, "heuristic, compile-time statistics", runs[1], steptime.Pipelined},
		{FDP, "heuristic, profiled statistics", runs[2], steptime.Pipelined},
	} {
		cr, err := price(c.name, c.r, c.mode, c.plan)
		if err != nil {
			return nil, err
		}
		out = append(out, cr)
	}
	for i := range out {
		out[i].Speedup = out[0].DeviceUS / out[i].DeviceUS
	}
	return out, nil
}

func ladderPoint(at float64, cs []ConfigResult) LadderPoint {
	p := LadderPoint{At: at}
	for _, c := range cs {
		p.Speedups = append(p.Speedups, c.Speedup)
		p.DeviceUS = append(p.DeviceUS, c.DeviceUS)
	}
	return p
}

// tpuRun runs one model through the ladder, then again for each swept
// shard overhead (plans re-solved and re-run: the partitioner weighs
// shards by it) and each swept contention (the same runs re-priced).
func tpuRun(ctx context.Context, sc Scaled, o Options) (ModelResult, error) {
	res := ModelResult{Model: sc.Spec.Name, Note: sc.Spec.Note, Tables: len(sc.Tables), DenseWeights: sc.DenseWeights,
		VocabCap: sc.VocabCap, HBMPerChip: sc.HBMPerChip, Elements: sc.Elements, MinVocab: math.MaxInt64, MinDim: math.MaxInt}
	for _, t := range sc.Tables {
		res.MinVocab, res.MinDim, res.MaxDim = min(res.MinVocab, t.Vocab), min(res.MinDim, t.Dim), max(res.MaxDim, t.Dim)
	}
	f, err := features(sc.Tables)
	if err != nil {
		return res, err
	}
	l := &ladder{sc: sc, o: o, f: f, batch: o.Chips * o.BatchPerChip}
	chip := o.chip()
	sgd, _ := partition.OptimizerByName("sgd")

	// Compile-time knowledge: sizes and the declared maximum valency;
	// access assumed uniform.
	l.compileTables = make([]partition.Table, len(sc.Tables))
	for i, t := range sc.Tables {
		l.compileTables[i] = partition.Table{Name: t.Name, Vocab: t.Vocab, Dim: t.Dim, Optimizer: sgd,
			Valency: partition.Valency{Mean: float64(t.MaxValency)}}
	}

	// Feedback-directed partitioning: another model with the same
	// features trained earlier, profiling ~3% of its batches (fdp.Sampled)
	// and storing the statistics (here through their wire form, as sigd
	// stores them).
	prof := fdp.NewProfiler(profTables(sc.Tables))
	prev := generator{prod: sc.Prod, seed: sc.Spec.Seed<<8 | 1}
	for step := uint64(1); step <= uint64(o.ProfileSteps); step++ {
		if !fdp.Sampled(sc.Spec.Seed, step, fdp.DefaultRate) {
			continue
		}
		prof.Observe(prev.batch(f, step, l.batch), nil)
	}
	res.ProfiledBatches = prof.Batches()
	l.measuredTables = append([]partition.Table(nil), l.compileTables...)
	var values float64
	index := map[canon.Key]int{}
	for i, t := range sc.Tables {
		index[featureKey(t.Name)] = i
	}
	for _, st := range prof.Statistics("previous-" + sc.Spec.Name) {
		st, err := fdp.FromProto(st.Proto())
		if err != nil {
			return res, fmt.Errorf("model %s: %w", sc.Spec.Name, err)
		}
		i := index[st.Feature]
		l.measuredTables[i].Measured = st.Measured(sc.Tables[i].Vocab, l.batch)
		values += st.MeanValency
		res.MaxMeanValency = math.Max(res.MaxMeanValency, st.MeanValency)
	}
	res.ValuesPerExample = values

	// The real runs: the same held-out batches through each plan.
	held := generator{prod: sc.Prod, seed: sc.Spec.Seed<<8 | 2}
	l.batches = make([]*model.Examples, o.Steps)
	for i := range l.batches {
		l.batches[i] = held.batch(f, uint64(i), l.batch)
	}
	l.shapes = make([]model.Shape, len(sc.Tables))
	for i, t := range sc.Tables {
		l.shapes[i] = model.Shape{Vocab: t.Vocab, Dim: t.Dim}
	}
	rows, err := partition.RowSharding(l.compileTables, l.topology(chip))
	if err != nil {
		return res, fmt.Errorf("model %s: row sharding: %w", sc.Spec.Name, err)
	}
	// Row sharding runs once: its lookups move the same bytes whether the
	// gradients are fresh or stale, and whatever the overheads;
	// serialized and pipelined price it.
	rowRun, err := l.runPlan(ctx, rows, chip)
	if err != nil {
		return res, err
	}
	var runs [3]*run
	if res.Configs, runs, err = l.rungs(ctx, chip, o.Contention, rowRun); err != nil {
		return res, err
	}
	for _, at := range o.ShardOverheadSweep {
		cs := res.Configs
		if at != chip.ShardOverheadNS {
			c := chip
			c.ShardOverheadNS = at
			if cs, _, err = l.rungs(ctx, c, o.Contention, rowRun); err != nil {
				return res, fmt.Errorf("shard overhead %g ns: %w", at, err)
			}
		}
		res.ShardOverheadSweep = append(res.ShardOverheadSweep, ladderPoint(at, cs))
	}
	for _, at := range o.ContentionSweep {
		k := at
		if at == 0 {
			k = -1 // steptime: negative is none, zero the default
		}
		cs, err := l.price(runs, chip, k)
		if err != nil {
			return res, err
		}
		res.ContentionSweep = append(res.ContentionSweep, ladderPoint(at, cs))
	}
	return res, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func profTables(ts []TableSpec) []fdp.Table {
	out := make([]fdp.Table, len(ts))
	for i, t := range ts {
		out[i] = fdp.Table{Feature: featureKey(t.Name), Vocab: t.Vocab}
	}
	return out
}

// featureKey keys a synthetic table's statistics. The synthetic models'
// features are computed by no SIG component, so they have no component
// key, the key fdp stores statistics under; the SHA-256 of the table's
// name stands in for it (one key per feature is all the profile needs).
func featureKey(name string) canon.Key { return sha256.Sum256([]byte("embreport/" + name)) }

// strategiesText is "row 12, table 20, column 1".
func strategiesText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// chip is the report's chip: TPU v4 peaks and the options' overheads (by
// default the partitioner's), so the step-time model and the cost model
// agree.
func (o Options) chip() steptime.Chip {
	c := steptime.Chip{LookupOverheadNS: o.LookupOverheadNS, ShardOverheadNS: o.ShardOverheadNS}
	c.EnsureDefaults()
	return c
}
