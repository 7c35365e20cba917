package results

import (
	"fmt"
	"math"

	"github.com/sigdata/sig/fleet/gen"
)

// AmortizationPoint is the fleet at the end of one epoch: how many
// pipelines it has and what each side's processes have spent so far (paper
// VII.C: SIG's cost against local input generation's as the fleet grows).
type AmortizationPoint struct {
	Epoch int `json:"epoch"`
	// Pipelines submitted so far (the x of the curve) and Active, training
	// in this epoch.
	Pipelines int `json:"pipelines"`
	Active    int `json:"active"`
	// Cumulative CPU seconds to the end of the epoch: SIG = Worker +
	// SIGReader; LIG = LIGReader. Ratio = SIG/LIG.
	WorkerSeconds    float64 `json:"worker_seconds"`
	SIGReaderSeconds float64 `json:"sig_reader_seconds"`
	SIGSeconds       float64 `json:"sig_seconds"`
	LIGSeconds       float64 `json:"lig_seconds"`
	Ratio            float64 `json:"ratio"`
	// EpochRatio is the same ratio over this epoch's CPU alone (the
	// marginal cost of serving the fleet at this size; its first point
	// equals Ratio).
	EpochRatio float64 `json:"epoch_ratio"`
	// Examples read so far (the same examples both ways).
	Examples int64 `json:"examples"`
	// The same with the MinIO CPU each side caused added
	// (CPU.SIGWithStorage, LIGWithStorage).
	SIGWithStorageSeconds float64 `json:"sig_with_storage_seconds"`
	LIGWithStorageSeconds float64 `json:"lig_with_storage_seconds"`
	RatioWithStorage      float64 `json:"ratio_with_storage"`
}

// NewAmortization is the curve of epochs' cumulative CPU.
func NewAmortization(epochs []Epoch) []AmortizationPoint {
	var out []AmortizationPoint
	var prev CPU
	for _, e := range epochs {
		c := e.Cumulative
		d := c.Sub(prev)
		prev = c
		out = append(out, AmortizationPoint{Epoch: e.Epoch, Pipelines: e.Submitted, Active: e.Active,
			WorkerSeconds: c.Worker, SIGReaderSeconds: c.SIGReader, SIGSeconds: c.SIG(), LIGSeconds: c.LIG(),
			Ratio: c.Ratio(), EpochRatio: d.Ratio(), Examples: c.Examples,
			SIGWithStorageSeconds: c.SIGWithStorage(), LIGWithStorageSeconds: c.LIGWithStorage(), RatioWithStorage: c.RatioWithStorage()})
	}
	return out
}

// HitRatePoint is one epoch's hit rates, of its own submissions and of all
// submissions so far (cold start to steady state).
type HitRatePoint struct {
	Epoch     int `json:"epoch"`
	Pipelines int `json:"pipelines"`
	// BlockHitRate and ComponentHitRate of the epoch's submissions;
	// Initial and CaughtUp its block hit rate per phase (0 without
	// submissions of the phase: see the counts in Epochs).
	BlockHitRate         float64 `json:"block_hit_rate"`
	ComponentHitRate     float64 `json:"component_hit_rate"`
	InitialBlockHitRate  float64 `json:"initial_block_hit_rate"`
	CaughtUpBlockHitRate float64 `json:"caught_up_block_hit_rate"`
	// Cumulative*: over every submission to the end of the epoch (what
	// sigd's Stats report).
	CumulativeBlockHitRate     float64 `json:"cumulative_block_hit_rate"`
	CumulativeComponentHitRate float64 `json:"cumulative_component_hit_rate"`
	// Reuse is sigd's mean and max pipelines per ready block at the end of
	// the epoch.
	ReuseMean float64 `json:"reuse_mean"`
	ReuseMax  int     `json:"reuse_max"`
}

// NewHitRates is the hit rate over time.
func NewHitRates(epochs []Epoch) []HitRatePoint {
	var out []HitRatePoint
	var sum Counts
	for _, e := range epochs {
		a := e.All()
		sum = sum.Add(a)
		out = append(out, HitRatePoint{Epoch: e.Epoch, Pipelines: e.Submitted,
			BlockHitRate: a.BlockHitRate(), ComponentHitRate: a.ComponentHitRate(),
			InitialBlockHitRate: e.Initial.BlockHitRate(), CaughtUpBlockHitRate: e.CaughtUp.BlockHitRate(),
			CumulativeBlockHitRate: sum.BlockHitRate(), CumulativeComponentHitRate: sum.ComponentHitRate(),
			ReuseMean: e.ReuseMean, ReuseMax: e.ReuseMax})
	}
	return out
}

// Target is one of the targets (the paper's figures), measured:
// Met says whether the measurement reaches it; a target that does not
// apply to the run (a fleet smaller than it names) says so in Note and is
// not met.
type Target struct {
	Name     string  `json:"name"`
	Want     string  `json:"want"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
	Note     string  `json:"note,omitempty"`
}

// TargetPipelines is the fleet size the reuse and CPU targets are stated
// at (issue 18: "at >= 300 pipelines").
const TargetPipelines = 300

// NewTargets measures the run against the targets: steady-state
// block hit rate >= 95%, mean reuse >= 22 and SIG total CPU <= 1/5 of LIG
// total, the last two at >= TargetPipelines pipelines.
func NewTargets(r *Results) []Target {
	size := ""
	if r.Reuse.Pipelines < TargetPipelines {
		size = fmt.Sprintf("the run has %d pipelines, fewer than the %d the target is stated at", r.Reuse.Pipelines, TargetPipelines)
	}
	ss := r.SteadyState.BlockHitRate
	out := []Target{{Name: "steady-state block hit rate", Want: ">= 0.95", Measured: ss, Met: ss >= 0.95,
		Note: fmt.Sprintf("epochs %d and later", r.SteadyState.FromEpoch)}}
	reuse := r.Reuse.Sigd.Mean
	out = append(out, Target{Name: "mean reuse (pipelines per ready memo block)", Want: ">= 22 at >= 300 pipelines",
		Measured: reuse, Met: reuse >= 22 && size == "", Note: size})
	ratio := r.CPU.Ratio()
	floor := fmt.Sprintf("its floor, the SIG reader's CPU alone over the LIG reader's, is %.3f; with the MinIO CPU each side caused, SIG/LIG is %.3f",
		r.CPU.ReaderRatio(), r.CPU.RatioWithStorage())
	if size != "" {
		floor = size + "; " + floor
	}
	out = append(out, Target{Name: "SIG total CPU / LIG total CPU", Want: "<= 0.2 at >= 300 pipelines",
		Measured: ratio, Met: ratio > 0 && ratio <= 0.2 && size == "", Note: floor})
	return out
}

// PlanPoint is the fleet's plan (gen.Plan: the hits and reuse the fleet
// implies, counted from its spec alone, slots for blocks) at the run's
// configuration with one knob changed. The run checks that sigd's answers
// and reuse equal the plan's at its own configuration, so the sweep says
// what the same system would measure at the others, without running them.
type PlanPoint struct {
	Knob  string  `json:"knob"`
	Value float64 `json:"value"`
	// Run marks the run's own configuration.
	Run        bool    `json:"run,omitempty"`
	Pipelines  int     `json:"pipelines"`
	Components int     `json:"components"` // used, of the population
	Population int     `json:"population"`
	ReuseMean  float64 `json:"reuse_mean"`
	ReuseMax   int     `json:"reuse_max"`
	// SteadyStateBlockHitRate is over the same epochs as SteadyState.
	SteadyStateBlockHitRate float64 `json:"steady_state_block_hit_rate"`
}

// NewReuseSweep plans the fleet of cfg with each knob that decides reuse
// changed in turn: the popularity exponent (a guess), the variants per
// family (the population's size) and the number of pipelines.
func NewReuseSweep(cfg gen.Config) ([]PlanPoint, error) {
	cfg = cfg.EnsureDefaults()
	var out []PlanPoint
	add := func(knob string, v float64, c gen.Config) error {
		f, err := gen.Generate(c)
		if err != nil {
			return fmt.Errorf("%s %v: %w", knob, v, err)
		}
		p := f.Plan()
		var ss Counts
		from := len(p.Epochs) - max(1, len(p.Epochs)/3)
		for _, e := range p.Epochs[from:] {
			for _, c := range []gen.Count{e.Initial, e.CaughtUp} {
				ss = ss.Add(Counts{Blocks: c.Blocks, BlockHits: c.BlockHits})
			}
		}
		out = append(out, PlanPoint{Knob: knob, Value: v, Run: c == cfg, Pipelines: c.Pipelines, Components: p.Components,
			Population: p.Population, ReuseMean: p.ReuseMean, ReuseMax: p.ReuseMax, SteadyStateBlockHitRate: ss.BlockHitRate()})
		return nil
	}
	for _, s := range []float64{0.5, 0.75, 1, 1.5, 2} {
		c := cfg
		c.ZipfS = s
		if err := add("zipf_s", s, c); err != nil {
			return nil, err
		}
	}
	for _, v := range []int{1, 2, 3, 6} {
		c := cfg
		c.Variants = v
		if c.Validate() != nil {
			continue // too few components for the inputs a pipeline has
		}
		if err := add("variants", float64(v), c); err != nil {
			return nil, err
		}
	}
	for _, f := range []float64{1.0 / 3, 1, 10.0 / 3} {
		c := cfg
		c.Pipelines = max(c.FirstEpoch, int(math.Round(f*float64(cfg.Pipelines))))
		if err := add("pipelines", float64(c.Pipelines), c); err != nil {
			return nil, err
		}
	}
	return out, nil
}
