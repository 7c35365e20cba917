package embreport

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

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
	PS      *PSResult      `json:"parameter_servers,omitempty"`
}

// tpuRun runs one model through the ladder.
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
	batch := o.Chips * o.BatchPerChip
	chip := defaultChip()
	topo := partition.Topology{Chips: o.Chips, SparseCoresPerChip: chip.SparseCoresPerChip, HBMBytesPerChip: sc.HBMPerChip,
		HBMBandwidth: chip.HBMBandwidth, AccessGranularity: chip.AccessGranularity,
		LookupOverheadNS: chip.LookupOverheadNS, ShardOverheadNS: chip.ShardOverheadNS}
	sgd, _ := partition.OptimizerByName("sgd")

	// Compile-time knowledge: sizes and the declared maximum valency;
	// access assumed uniform.
	compileTables := make([]partition.Table, len(sc.Tables))
	for i, t := range sc.Tables {
		compileTables[i] = partition.Table{Name: t.Name, Vocab: t.Vocab, Dim: t.Dim, Optimizer: sgd,
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
		prof.Observe(prev.batch(f, step, batch), nil)
	}
	res.ProfiledBatches = prof.Batches()
	measuredTables := append([]partition.Table(nil), compileTables...)
	var values float64
	index := map[string]int{}
	for i, t := range sc.Tables {
		index[t.Name] = i
	}
	for _, st := range prof.Statistics("previous-" + sc.Spec.Name) {
		st = fdp.FromProto(st.Proto())
		i := index[st.Feature]
		measuredTables[i].Measured = st.Measured(sc.Tables[i].Vocab, batch)
		values += st.MeanValency
		res.MaxMeanValency = math.Max(res.MaxMeanValency, st.MeanValency)
	}
	res.ValuesPerExample = values
	measured := &partition.Problem{Tables: measuredTables, Topology: topo, BatchSize: batch}

	rows, err := partition.RowSharding(compileTables, topo)
	if err != nil {
		return res, fmt.Errorf("model %s: row sharding: %w", sc.Spec.Name, err)
	}
	hybrid, err := partition.Solve(&partition.Problem{Tables: compileTables, Topology: topo, BatchSize: batch}, partition.Options{Seed: o.Seed})
	if err != nil {
		return res, fmt.Errorf("model %s: hybrid plan: %w", sc.Spec.Name, err)
	}
	withFDP, err := partition.Solve(measured, partition.Options{Seed: o.Seed})
	if err != nil {
		return res, fmt.Errorf("model %s: FDP plan: %w", sc.Spec.Name, err)
	}

	// The real runs: the same held-out batches through each plan.
	held := generator{prod: sc.Prod, seed: sc.Spec.Seed<<8 | 2}
	batches := make([]*model.Examples, o.Steps)
	for i := range batches {
		batches[i] = held.batch(f, uint64(i), batch)
	}
	shapes := make([]model.Shape, len(sc.Tables))
	for i, t := range sc.Tables {
		shapes[i] = model.Shape{Vocab: t.Vocab, Dim: t.Dim}
	}
	dev := steptime.Model{Chip: chip, Chips: o.Chips}
	type run struct {
		plan    *partition.Plan
		works   []steptime.Work
		pooling []float64
	}
	// Every plan trains with one-step-stale embedding gradients, as the
	// pipelined rungs do.
	runPlan := func(plan *partition.Plan) (*run, error) {
		m, err := model.New(model.Config{Features: f, Shapes: shapes, Hidden: o.Hidden, Seed: o.Seed, Plan: plan,
			Cost: dev, StaleEmbeddingGradients: true})
		if err != nil {
			return nil, err
		}
		r := &run{plan: plan}
		for _, b := range batches {
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
	// Row sharding runs once: its lookups move the same bytes whether the
	// gradients are fresh or stale; serialized and pipelined price it.
	rowRun, err := runPlan(rows)
	if err != nil {
		return res, err
	}
	hybridRun, err := runPlan(hybrid)
	if err != nil {
		return res, err
	}
	fdpRun, err := runPlan(withFDP)
	if err != nil {
		return res, err
	}
	denseFLOPs := 6 * sc.DenseWeights * float64(batch) // forward 2·W, backward 4·W per example
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
		for _, l := range r.plan.Layouts {
			cr.Strategies[l.Strategy]++
		}
		ev := *r.plan
		ev.Shards = append([]partition.Shard(nil), r.plan.Shards...)
		if err := partition.Evaluate(measured, &ev); err != nil {
			return cr, fmt.Errorf("model %s: evaluating the %s plan: %w", sc.Spec.Name, planName, err)
		}
		cr.ModelledCostUS, cr.ModelledLoadImbalance = ev.CostNS/1e3, ev.LoadImbalance
		return cr, nil
	}
	for _, c := range []struct {
		name, plan string
		r          *run
		mode       steptime.Mode
	}{
		{Baseline, "row sharding", rowRun, steptime.Serialized},
		{Pipelining, "row sharding", rowRun, steptime.Pipelined},
		{Hybrid, "heuristic, compile-time statistics", hybridRun, steptime.Pipelined},
		{FDP, "heuristic, profiled statistics", fdpRun, steptime.Pipelined},
	} {
		cr, err := price(c.name, c.r, c.mode, c.plan)
		if err != nil {
			return res, err
		}
		res.Configs = append(res.Configs, cr)
	}
	for i := range res.Configs {
		res.Configs[i].Speedup = res.Configs[0].DeviceUS / res.Configs[i].DeviceUS
	}
	return res, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func profTables(ts []TableSpec) []fdp.Table {
	out := make([]fdp.Table, len(ts))
	for i, t := range ts {
		out[i] = fdp.Table{Feature: t.Name, Vocab: t.Vocab}
	}
	return out
}

// strategiesText is "row 12, table 20, column 1".
func strategiesText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// defaultChip is the report's chip: TPU v4 peaks and the partitioner's
// default overheads, so the step-time model and the cost model agree.
func defaultChip() steptime.Chip {
	c := steptime.Chip{LookupOverheadNS: partition.DefaultLookupOverheadNS, ShardOverheadNS: partition.DefaultShardOverheadNS}
	c.EnsureDefaults()
	return c
}
