package fleet

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sigdata/sig/internal/figure"
)

// CommitClosedForm is the probability that a preempted epoch commits under
// c's preemption model, without simulating: P(drain + save ≤ notice)
// with the notice exponential of mean N. With the save Save and the drain
// exponential of mean D it is e^(−Save/N) · N/(N+D); with measured
// DrainSaveTimes it is the mean of e^(−t/N) over them. The simulation decides
// each preempted epoch by exactly this draw, so its committed fraction
// differs from this only by sampling: the figure is the constants'.
func (c SimConfig) CommitClosedForm() float64 {
	c.EnsureDefaults()
	n := float64(c.NoticeMean)
	if len(c.DrainSaveTimes) > 0 {
		var sum float64
		for _, t := range c.DrainSaveTimes {
			sum += math.Exp(-float64(t) / n)
		}
		return sum / float64(len(c.DrainSaveTimes))
	}
	d, s := float64(c.DrainMean), float64(c.Save)
	return math.Exp(-s/n) * n / (n + d)
}

// NoticeForCommitted is the notice mean at which the closed form gives
// the committed fraction p, the other constants as in c: where a reader
// finds the paper's figure on the notice sweep. ok is false when no notice
// reaches p (p outside (0, 1)).
func NoticeForCommitted(c SimConfig, p float64) (notice time.Duration, ok bool) {
	c.EnsureDefaults()
	if !(p > 0 && p < 1) {
		return 0, false
	}
	// The closed form grows with the notice from 0 to 1.
	lo, hi := time.Nanosecond, time.Duration(1)
	for {
		c.NoticeMean = Duration(hi)
		if c.CommitClosedForm() >= p {
			break
		}
		if hi > 1<<60 {
			return 0, false
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > max(lo/1e4, 1) {
		mid := lo + (hi-lo)/2
		c.NoticeMean = Duration(mid)
		if c.CommitClosedForm() >= p {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// drainSaveMedian is the median time a preempted epoch needs to commit: of the
// measured drain and save times, or Save + DrainMean·ln 2.
func (c SimConfig) drainSaveMedian() time.Duration {
	if len(c.DrainSaveTimes) > 0 {
		ts := slices.Clone(c.DrainSaveTimes)
		slices.Sort(ts)
		return time.Duration(ts[len(ts)/2])
	}
	return time.Duration(c.Save) + time.Duration(float64(c.DrainMean)*math.Ln2)
}

// Measured is what real runs of this system measured that replaces the
// simulation's constants: the program goodput and input stall of real
// jobs (the trainer's step records and goodput accounting) and the
// times from notice to committed checkpoint of real preemptions. bench/preemption.json carries
// one, written by BenchmarkPreemptionCommits.
type Measured struct {
	ProgramGoodput float64    `json:"program_goodput,omitempty"`
	InputStall     float64    `json:"input_stall,omitempty"`
	DrainSaveTimes []Duration `json:"drain_save_times,omitempty"`
	// How says, by constant name (program_goodput, input_stall,
	// drain_save_times), what was measured and how.
	How map[string]string `json:"how"`
}

// Apply replaces cfg's constants with m's measurements and returns the
// sources to pass to RunStudy (StudyOptions.Sources).
func (m Measured) Apply(cfg *SimConfig) map[string]string {
	src := map[string]string{}
	how := func(name string) string {
		if h := m.How[name]; h != "" {
			return figure.MeasuredPrefix + h
		}
		return figure.MeasuredPrefix + "real runs of this system"
	}
	if m.ProgramGoodput > 0 {
		cfg.ProgramGoodput = m.ProgramGoodput
		src["program_goodput"] = how("program_goodput")
	}
	if m.InputStall > 0 {
		cfg.InputStall = m.InputStall
		src["input_stall"] = how("input_stall")
	}
	if len(m.DrainSaveTimes) > 0 {
		cfg.DrainSaveTimes = slices.Clone(m.DrainSaveTimes)
		src["drain_save_median"] = how("drain_save_times")
	}
	return src
}

// simConstant is one constant of SimConfig as a figure reports it.
type simConstant struct {
	name, unit, source string
	get                func(SimConfig) float64
	set                func(*SimConfig, float64)
}

func durConstant(name string, unit time.Duration, unitName, source string, field func(*SimConfig) *Duration) simConstant {
	return simConstant{name: name, unit: unitName, source: source,
		get: func(c SimConfig) float64 { return float64(*field(&c)) / float64(unit) },
		set: func(c *SimConfig, v float64) { *field(c) = Duration(v * float64(unit)) }}
}

func numConstant(name, unit, source string, field func(*SimConfig) *float64) simConstant {
	return simConstant{name: name, unit: unit, source: source,
		get: func(c SimConfig) float64 { return *field(&c) },
		set: func(c *SimConfig, v float64) { *field(c) = v }}
}

// The sources of the defaults (SimConfig). A guess is a value chosen to
// give a plausible fleet, not taken from any publication.
const (
	srcInitial   = "Ads paper III.A: initial training completes \"within a couple of days\""
	srcEpoch     = "Ads paper III.C: an epoch is \"e.g., 1 hour\""
	srcPG        = "guess: the MPG paper publishes no fleet PG"
	srcHuman     = "guess: the Ads paper (VI.A) says only that a person removes a permanent hold"
	srcHoldAfter = "the trainer's --hold-after (trainer/control), whose default 0 holds at once (Ads paper VI.A)"
	srcNotice    = "guess; for scale, a Compute Engine preemptible VM gets a 30 s notice (cloud.google.com/compute/docs/instances/preemptible)"
)

var simConstants = []simConstant{
	{name: "chips", unit: "chips", source: figure.Guess,
		get: func(c SimConfig) float64 { return float64(c.Chips) },
		set: func(c *SimConfig, v float64) { c.Chips = int(v) }},
	durConstant("arrival_mean", time.Hour, "h", figure.Guess, func(c *SimConfig) *Duration { return &c.ArrivalMean }),
	durConstant("initial_mean", time.Hour, "h", srcInitial, func(c *SimConfig) *Duration { return &c.InitialMean }),
	durConstant("caught_up_mean", time.Hour, "h", figure.Guess, func(c *SimConfig) *Duration { return &c.CaughtUpMean }),
	numConstant("high_priority_share", "fraction", figure.Guess, func(c *SimConfig) *float64 { return &c.HighPriorityShare }),
	{name: "clients", unit: "clients", source: figure.Guess + ": teams sharing the fleet, each job's drawn uniformly",
		get: func(c SimConfig) float64 { return float64(len(c.Clients)) },
		set: func(c *SimConfig, v float64) {
			c.Clients = nil
			for i := range max(int(v), 1) {
				c.Clients = append(c.Clients, fmt.Sprintf("client%d", i+1))
			}
		}},
	durConstant("hold_after", time.Hour, "h", srcHoldAfter, func(c *SimConfig) *Duration { return &c.HoldAfter }),
	durConstant("epoch", time.Hour, "h", srcEpoch, func(c *SimConfig) *Duration { return &c.Epoch }),
	durConstant("initialization", time.Second, "s", figure.Guess, func(c *SimConfig) *Duration { return &c.Initialization }),
	durConstant("compile", time.Second, "s", figure.Guess, func(c *SimConfig) *Duration { return &c.Compile }),
	durConstant("restore", time.Second, "s", figure.Guess, func(c *SimConfig) *Duration { return &c.Restore }),
	durConstant("save", time.Second, "s", figure.Guess, func(c *SimConfig) *Duration { return &c.Save }),
	numConstant("input_stall", "fraction", figure.Guess, func(c *SimConfig) *float64 { return &c.InputStall }),
	numConstant("program_goodput", "fraction", srcPG, func(c *SimConfig) *float64 { return &c.ProgramGoodput }),
	durConstant("failure_mtbf", time.Hour, "h", figure.Guess, func(c *SimConfig) *Duration { return &c.FailureMTBF }),
	durConstant("permanent_mtbf", time.Hour, "h", figure.Guess, func(c *SimConfig) *Duration { return &c.PermanentMTBF }),
	durConstant("human_response", time.Hour, "h", srcHuman, func(c *SimConfig) *Duration { return &c.HumanResponse }),
	numConstant("transient_prob", "fraction", figure.Guess, func(c *SimConfig) *float64 { return &c.TransientProb }),
	durConstant("transient_mean", time.Hour, "h", figure.Guess, func(c *SimConfig) *Duration { return &c.TransientMean }),
	durConstant("maintenance_mtbf", time.Hour, "h", figure.Guess, func(c *SimConfig) *Duration { return &c.MaintenanceMTBF }),
	durConstant("notice_mean", time.Second, "s", srcNotice, func(c *SimConfig) *Duration { return &c.NoticeMean }),
	durConstant("drain_mean", time.Second, "s", figure.Guess, func(c *SimConfig) *Duration { return &c.DrainMean }),
	// Only with measured DrainSaveTimes: their median; a sweep scales them all.
	{name: "drain_save_median", unit: "s", source: figure.MeasuredPrefix + "real preemptions",
		get: func(c SimConfig) float64 { return c.drainSaveMedian().Seconds() },
		set: func(c *SimConfig, v float64) {
			f := v / c.drainSaveMedian().Seconds()
			ts := make([]Duration, len(c.DrainSaveTimes))
			for i, t := range c.DrainSaveTimes {
				ts[i] = Duration(float64(t) * f)
			}
			c.DrainSaveTimes = ts
		}},
}

func constantNamed(name string) simConstant {
	for _, c := range simConstants {
		if c.name == name {
			return c
		}
	}
	panic("fleet: no constant " + name)
}

// The figures of a study, by name.
const (
	FigSG                = "fleet_sg"
	FigRG                = "fleet_rg"
	FigPG                = "fleet_pg"
	FigMPG               = "fleet_mpg"
	FigQueuedPerTraining = "table_ii_queued_per_training"
	FigOnHoldPerTraining = "table_ii_on_hold_per_training"
	FigCommitted         = "preempted_epochs_committed"
	FigCommittedClosed   = "preempted_epochs_committed_closed_form"
	// FigSIGStallShare is the part of the fleet's input stall the stall
	// ledger charges to SIG (stalls.go); the rest is the readers'.
	FigSIGStallShare = "fleet_input_stall_sig_share"
)

// figureSpec says what decides a figure: its constants, and those swept.
type figureSpec struct {
	name, unit, how string
	paper           *figure.Paper
	constants       []string
	sweeps          []string
}

// preemption is the preemption model's constants: the notice and either
// the drain and save or their measured times.
func (c SimConfig) preemptionConstants() []string {
	if len(c.DrainSaveTimes) > 0 {
		return []string{"notice_mean", "drain_save_median"}
	}
	return []string{"notice_mean", "drain_mean", "save"}
}

func figureSpecs(c SimConfig) []figureSpec {
	demand := []string{"chips", "arrival_mean", "initial_mean", "caught_up_mean", "high_priority_share",
		"permanent_mtbf", "human_response", "transient_prob", "transient_mean"}
	runtime := append([]string{"epoch", "initialization", "compile", "restore", "save", "input_stall",
		"failure_mtbf", "maintenance_mtbf"}, c.preemptionConstants()...)
	pre := c.preemptionConstants()
	return []figureSpec{
		{name: FigSG, unit: "fraction", constants: demand, sweeps: []string{"arrival_mean"},
			how: "virtual-time fleet (trainer/accounting/fleet): chip-time held by training jobs over capacity, the goodput accounting of real jobs; equals Table II's training share; mean over seeds"},
		{name: FigRG, unit: "fraction", constants: runtime, sweeps: []string{"failure_mtbf", "input_stall"},
			how: "virtual-time fleet: committed step time over allocated chip-time (the goodput accounting of real jobs); mean over seeds"},
		{name: FigPG, unit: "fraction", constants: []string{"program_goodput"},
			how: "the constant program_goodput, passed through: a simulated step's ideal time is its time × program_goodput"},
		{name: FigMPG, unit: "fraction", constants: slices.Concat([]string{"program_goodput"}, demand, runtime),
			sweeps: []string{"program_goodput"}, how: "virtual-time fleet: SG × RG × PG; mean over seeds"},
		{name: FigQueuedPerTraining, unit: "ratio", constants: demand, sweeps: []string{"arrival_mean"},
			paper: &figure.Paper{Value: 1.03, Where: "Ads paper VII.F, Table II"},
			how:   "virtual-time fleet: time-averaged chips demanded by queued jobs over chips training; mean over seeds"},
		{name: FigOnHoldPerTraining, unit: "ratio", constants: demand,
			sweeps: []string{"human_response", "permanent_mtbf", "transient_prob"},
			paper:  &figure.Paper{Value: 2.49, Where: "Ads paper VII.F, Table II"},
			how:    "virtual-time fleet: time-averaged chips demanded by jobs on a training hold over chips training; mean over seeds"},
		{name: FigCommitted, unit: "fraction", constants: pre, sweeps: pre,
			paper: &figure.Paper{Value: 0.61, Where: "Ads paper VII.G"},
			how:   "virtual-time fleet: preempted epochs whose drain and save fit in the notice, over preempted epochs, all seeds pooled"},
		{name: FigSIGStallShare, unit: "fraction", constants: stallConstants(demand), sweeps: []string{"hold_after", "input_stall"},
			how: "virtual-time fleet: each job's input stall charged by the stall ledger (trainer/accounting/stall.Compute) " +
				"to the SIG work it waited on (an epoch whose data is pending, stalled for up to hold_after) or to its readers " +
				"(the constant input_stall); SIG-side chip-hours over all, seeds pooled"},
		{name: FigCommittedClosed, unit: "fraction", constants: pre, sweeps: pre,
			paper: &figure.Paper{Value: 0.61, Where: "Ads paper VII.G"},
			how:   "closed form of the same model, no simulation: " + closedFormText(c)},
	}
}

// stallConstants decide the stall by cause: the demand (who is ahead),
// the transient waits, hold_after and the readers' constant stall.
func stallConstants(demand []string) []string {
	return slices.Concat(demand, []string{"clients", "hold_after", "input_stall", "epoch"})
}

func closedFormText(c SimConfig) string {
	if len(c.DrainSaveTimes) > 0 {
		return "mean over the measured drain and save times t of e^(-t/notice_mean)"
	}
	return "e^(-save/notice_mean) · notice_mean/(notice_mean+drain_mean)"
}

// sweepPoints are the values a constant is swept over: multiples of its
// value, and for the notice multiples of the median drain and save (where the
// committed fraction moves), always with the configured value.
func sweepPoints(c SimConfig, name string) []float64 {
	k := constantNamed(name)
	v := k.get(c)
	mult := func(ms ...float64) []float64 {
		var out []float64
		for _, m := range ms {
			out = append(out, v*m)
		}
		return out
	}
	var pts []float64
	switch name {
	case "notice_mean":
		e := c.drainSaveMedian().Seconds()
		pts = []float64{e / 4, e / 2, e, 2 * e, 4 * e, 16 * e, v}
	case "human_response":
		pts = mult(0.2, 0.4, 1, 2)
	case "program_goodput":
		pts = []float64{0.05, 0.1, 0.25, 0.55, 1, v}
	case "input_stall":
		pts = []float64{0.01, v / 2, v, min(2*v, 0.9), min(4*v, 0.9)}
	case "transient_prob":
		pts = mult(0.25, 0.5, 1, 2)
	case "hold_after":
		pts = []float64{0, 0.25, 1, 4, v}
	default:
		pts = mult(0.25, 0.5, 1, 2, 4)
	}
	slices.Sort(pts)
	return slices.CompactFunc(pts, func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) })
}

// StudyOptions configure RunStudy.
type StudyOptions struct {
	// Seeds is the number of seeds, from the config's Seed (default 3).
	Seeds int
	// Sources overrides the source of constants by name (Measured.Apply).
	Sources map[string]string
	// NoSweeps leaves the sweeps out.
	NoSweeps bool
}

// Study is Simulate over several seeds, with the figures of the fleet:
// each labelled modelled (or measured, where a measurement of this system
// decides it) with the constants that decide it and their sources, and
// swept over the deciding ones.
type Study struct {
	Config  SimConfig
	Runs    []SimResult
	Figures figure.Set
	// Stall is the stall by cause of every run, pooled (Runs' Stall
	// summed): modelled, decided by the constants of FigSIGStallShare.
	Stall StallByCause
}

// RunStudy simulates cfg for each seed and computes the figures and their
// sweeps (every sweep point is the mean over the same seeds).
func RunStudy(cfg SimConfig, o StudyOptions) (*Study, error) {
	cfg.EnsureDefaults()
	if o.Seeds <= 0 {
		o.Seeds = 3
	}
	st := &Study{Config: cfg, Figures: figure.Set{}}
	base, runs, err := evaluate(cfg, o.Seeds)
	if err != nil {
		return nil, err
	}
	st.Runs = runs
	for _, r := range runs {
		st.Stall.Add(r.Stall)
	}
	specs := figureSpecs(cfg)
	for _, sp := range specs {
		f := figure.Figure{Value: base[sp.name], Unit: sp.unit, Kind: figure.Modelled, How: sp.how, Paper: sp.paper,
			Constants: map[string]figure.Constant{}}
		for _, name := range sp.constants {
			k := constantNamed(name)
			src := k.source
			if s, ok := o.Sources[name]; ok {
				src = s
			}
			f.Constants[name] = figure.Constant{Value: k.get(cfg), Unit: k.unit, Source: src}
		}
		if sp.name == FigPG && isMeasured(f.Constants["program_goodput"].Source) {
			f.Kind = figure.Measured
			f.How = "the program goodput of real jobs of this system (program_goodput, " +
				strings.TrimPrefix(f.Constants["program_goodput"].Source, figure.MeasuredPrefix) +
				"), passed through the simulation: a simulated step's ideal time is its time × program_goodput"
		}
		st.Figures[sp.name] = f
	}
	if o.NoSweeps {
		return st, nil
	}
	// Each swept constant's points are simulated once for every figure
	// that sweeps it.
	swept := map[string][]string{} // constant -> figures
	var order []string
	for _, sp := range specs {
		for _, k := range sp.sweeps {
			if _, ok := swept[k]; !ok {
				order = append(order, k)
			}
			swept[k] = append(swept[k], sp.name)
		}
	}
	for _, name := range order {
		k := constantNamed(name)
		for _, at := range sweepPoints(cfg, name) {
			c := cfg
			k.set(&c, at)
			vals := base
			if at != k.get(cfg) {
				if vals, _, err = evaluate(c, o.Seeds); err != nil {
					return nil, fmt.Errorf("fleet: sweep of %s at %g: %w", name, at, err)
				}
			}
			for _, fig := range swept[name] {
				f := st.Figures[fig]
				f.Sweep = append(f.Sweep, figure.Point{Constant: name, At: at, Value: vals[fig]})
				st.Figures[fig] = f
			}
		}
	}
	return st, nil
}

func isMeasured(source string) bool { return strings.HasPrefix(source, figure.MeasuredPrefix) }

// evaluate simulates c for seeds c.Seed, c.Seed+1, … and returns each
// figure's value (means over seeds; the committed fraction pooled).
func evaluate(c SimConfig, seeds int) (map[string]float64, []SimResult, error) {
	vals := map[string]float64{}
	var runs []SimResult
	var committed, preempted int
	var stalls StallByCause
	for i := range seeds {
		cc := c
		cc.Seed = c.Seed + uint64(i)
		r, err := Simulate(cc)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, r)
		f := r.Goodput.Fleet
		vals[FigSG] += f.SG / float64(seeds)
		vals[FigRG] += f.RG / float64(seeds)
		vals[FigPG] += f.PG / float64(seeds)
		vals[FigMPG] += f.MPG / float64(seeds)
		vals[FigQueuedPerTraining] += r.TableII.QueuedPerTraining / float64(seeds)
		vals[FigOnHoldPerTraining] += r.TableII.OnHoldPerTraining / float64(seeds)
		committed += r.PreemptedCommitted
		preempted += r.PreemptedEpochs
		stalls.Add(r.Stall)
	}
	vals[FigSIGStallShare] = stalls.SIGShare()
	if preempted > 0 {
		vals[FigCommitted] = float64(committed) / float64(preempted)
	}
	vals[FigCommittedClosed] = c.CommitClosedForm()
	return vals, runs, nil
}
