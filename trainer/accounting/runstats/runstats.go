package runstats

import (
	"fmt"
	"time"
)

// lossWindow is how many steps the first and last loss means average.
const lossWindow = 20

// Step is what one step did, as the runtime measured it.
type Step struct {
	// Chips is the slice the step ran on.
	Chips int
	// TensorCore, SparseCore, Servers and Device are the step's modelled
	// times (unscaled, trainer/steptime): Servers is the wait on the
	// parameter servers holding its tables, in Device as the SparseCore
	// time is.
	TensorCore, SparseCore, Servers, Device time.Duration
	Examples                                int
	// Values are the feature values looked up, Unique the rows gathered
	// after deduplication.
	Values, Unique int
	Loss           float64
	// SparseCoreBytes are the bytes each SparseCore moved.
	SparseCoreBytes []float64
}

// phase sums one phase's steps.
type phase struct {
	name           string
	steps          uint64
	examples       int64
	first          []float64 // first lossWindow losses
	last           []float64 // ring of the last lossWindow losses
	values, unique int64
	scBytes        []float64 // per SparseCore, summed over the phase's steps
	tcTime, scTime time.Duration
	srvTime, dev   time.Duration
	chipSteps      int64 // Σ chips over the steps
}

// Stats sums a process's steps, overall and per phase. The zero value is
// empty. Not safe for concurrent use.
type Stats struct {
	totals Totals
	phases []*phase
	curve  []LossPoint
}

// Totals are the sums over every step of the process.
type Totals struct {
	Steps    uint64
	Examples int64
	// LastLoss is the last step's loss.
	LastLoss float64
	// TensorCore, SparseCore, Servers and Device sum the modelled time
	// (unscaled) of every step times the chips it ran on, and ChipSteps
	// the chips: the figures behind PG, which weighs each step by its
	// chip-time.
	TensorCore, SparseCore, Servers, Device time.Duration
	ChipSteps                               int64
}

// PerChipStep is the mean modelled TensorCore, SparseCore and device time
// of a step in nanoseconds, each step weighted by its chips; zeros before
// the first step.
func (t Totals) PerChipStep() (tensorCore, sparseCore, device float64) {
	if t.ChipSteps == 0 {
		return 0, 0, 0
	}
	n := float64(t.ChipSteps)
	return float64(t.TensorCore.Nanoseconds()) / n, float64(t.SparseCore.Nanoseconds()) / n, float64(t.Device.Nanoseconds()) / n
}

// Observe adds a step of the named phase.
func (s *Stats) Observe(phaseName string, st Step) {
	t := &s.totals
	t.Steps++
	chips := max(st.Chips, 1)
	t.TensorCore += st.TensorCore * time.Duration(chips)
	t.SparseCore += st.SparseCore * time.Duration(chips)
	t.Servers += st.Servers * time.Duration(chips)
	t.Device += st.Device * time.Duration(chips)
	t.ChipSteps += int64(chips)
	t.Examples += int64(st.Examples)
	t.LastLoss = st.Loss
	var ps *phase
	if n := len(s.phases); n > 0 && s.phases[n-1].name == phaseName {
		ps = s.phases[n-1]
	} else {
		ps = &phase{name: phaseName}
		s.phases = append(s.phases, ps)
	}
	ps.steps++
	ps.examples += int64(st.Examples)
	ps.values += int64(st.Values)
	ps.unique += int64(st.Unique)
	ps.chipSteps += int64(chips)
	ps.tcTime += st.TensorCore
	ps.scTime += st.SparseCore
	ps.srvTime += st.Servers
	ps.dev += st.Device
	if len(ps.scBytes) != len(st.SparseCoreBytes) {
		ps.scBytes = make([]float64, len(st.SparseCoreBytes))
	}
	for i, b := range st.SparseCoreBytes {
		ps.scBytes[i] += b
	}
	if len(ps.first) < lossWindow {
		ps.first = append(ps.first, st.Loss)
	}
	if len(ps.last) < lossWindow {
		ps.last = append(ps.last, st.Loss)
	} else {
		ps.last[ps.steps%lossWindow] = st.Loss
	}
	// The curve keeps every step until it is long, then every other one.
	stride := uint64(1) << uint(max(0, len(s.curve)/512))
	if t.Steps%stride == 0 || len(s.curve) == 0 {
		s.curve = append(s.curve, LossPoint{Step: t.Steps, Loss: st.Loss, Phase: phaseName})
	}
}

// Totals are the sums over every step so far.
func (s *Stats) Totals() Totals { return s.totals }

// LossCurve is the loss of the steps so far: every step until the curve is
// long, then fewer, evenly.
func (s *Stats) LossCurve() []LossPoint { return s.curve }

// Phases reports each phase in the order the process ran them;
// loadImbalance is paper Eq. 1 over per-SparseCore bytes (the embedding
// wing's, fdp.LoadImbalance).
func (s *Stats) Phases(loadImbalance func(sparseCoreBytes []float64) float64) []PhaseReport {
	var out []PhaseReport
	for _, ps := range s.phases {
		pr := PhaseReport{Phase: ps.name, Steps: ps.steps, Examples: ps.examples,
			FirstLoss: mean(ps.first), LastLoss: mean(ps.last)}
		if ps.steps > 0 {
			pr.ValuesPerStep = float64(ps.values) / float64(ps.steps)
			pr.UniquePerStep = float64(ps.unique) / float64(ps.steps)
			pr.Chips = float64(ps.chipSteps) / float64(ps.steps)
			pr.TensorCoreNSPerStep = float64(ps.tcTime.Nanoseconds()) / float64(ps.steps)
			pr.SparseCoreNSPerStep = float64(ps.scTime.Nanoseconds()) / float64(ps.steps)
			pr.ServersNSPerStep = float64(ps.srvTime.Nanoseconds()) / float64(ps.steps)
			pr.DeviceNSPerStep = float64(ps.dev.Nanoseconds()) / float64(ps.steps)
		}
		pr.LoadImbalance = loadImbalance(ps.scBytes)
		out = append(out, pr)
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// LossPoint is one step's training loss (before its update).
type LossPoint struct {
	Step  uint64  `json:"step"`
	Loss  float64 `json:"loss"`
	Phase string  `json:"phase"`
}

// PhaseReport is one phase of a run (paper III.A).
type PhaseReport struct {
	Phase    string `json:"phase"`
	Steps    uint64 `json:"steps"`
	Examples int64  `json:"examples"`
	// FirstLoss and LastLoss are the mean training loss of the phase's
	// first and last 20 steps.
	FirstLoss float64 `json:"first_loss"`
	LastLoss  float64 `json:"last_loss"`
	// Feature values looked up and unique rows gathered per step after
	// deduplication (paper V.A).
	ValuesPerStep float64 `json:"values_per_step"`
	UniquePerStep float64 `json:"unique_per_step"`
	// LoadImbalance is paper Eq. 1 over the bytes each SparseCore moved in
	// the phase's real lookups under the plan; TensorCoreNSPerStep (the
	// ideal, PG's numerator), SparseCoreNSPerStep, ServersNSPerStep (the
	// wait on parameter servers holding the tables) and DeviceNSPerStep
	// (PG's denominator, which holds the other two) are the mean modelled
	// times of a step (unscaled, steptime).
	LoadImbalance float64 `json:"load_imbalance"`
	// Chips is the mean number of chips a step ran on.
	Chips               float64 `json:"chips"`
	TensorCoreNSPerStep float64 `json:"tensorcore_ns_per_step"`
	SparseCoreNSPerStep float64 `json:"sparsecore_ns_per_step"`
	ServersNSPerStep    float64 `json:"servers_ns_per_step,omitempty"`
	DeviceNSPerStep     float64 `json:"device_ns_per_step"`
}

// Text is the phase's line of a run's report.
func (p PhaseReport) Text() string {
	var servers string
	if p.ServersNSPerStep > 0 {
		servers = fmt.Sprintf("  parameter servers %.0f ns/step", p.ServersNSPerStep)
	}
	return fmt.Sprintf("phase %-9s %6d steps %9d examples  loss %.4f -> %.4f  values/step %.0f unique/step %.0f  load imbalance %.3f  TensorCore %.3g ns/step  SparseCore %.0f ns/step%s  device %.0f ns/step\n",
		p.Phase, p.Steps, p.Examples, p.FirstLoss, p.LastLoss, p.ValuesPerStep, p.UniquePerStep, p.LoadImbalance, p.TensorCoreNSPerStep, p.SparseCoreNSPerStep, servers, p.DeviceNSPerStep)
}

// StepNS is the mean modelled TensorCore, SparseCore, parameter-server and
// device time of the phases' steps in nanoseconds (unscaled), over all
// phases, each step weighted by the chips it ran on as PG weighs it (a
// step on 4 chips is 4 times the chip-time of one on 1).
func StepNS(phases []PhaseReport) (tensorCore, sparseCore, servers, device float64) {
	var steps float64
	for _, p := range phases {
		n := float64(p.Steps) * max(p.Chips, 1)
		tensorCore += p.TensorCoreNSPerStep * n
		sparseCore += p.SparseCoreNSPerStep * n
		servers += p.ServersNSPerStep * n
		device += p.DeviceNSPerStep * n
		steps += n
	}
	if steps == 0 {
		return 0, 0, 0, 0
	}
	return tensorCore / steps, sparseCore / steps, servers / steps, device / steps
}
