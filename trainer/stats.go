package trainer

import (
	"time"

	"github.com/sigdata/sig/trainer/control"
)

// What this process's steps did, per phase: the figures of the report
// (report.go), the status and the metrics (status.go).

// lossWindow is how many steps the first and last loss means average.
const lossWindow = 20

// phaseStats sums one phase's steps.
type phaseStats struct {
	phase          control.Phase
	steps          uint64
	examples       int64
	first          []float64 // first lossWindow losses
	last           []float64 // ring of the last lossWindow losses
	values, unique int64
	scBytes        []float64 // per SparseCore, summed over the phase's steps
	tcTime, scTime time.Duration
	dev            time.Duration
	chipSteps      int64 // Σ chips over the steps
}

// runStats sums this process's steps, overall and per phase.
type runStats struct {
	steps uint64
	// tc, sc and dev sum the modelled TensorCore, SparseCore and device
	// time (unscaled) of every step times the chips it ran on, and
	// chipSteps the chips: the figures behind PG, which weighs each step by
	// its chip-time.
	tc, sc, dev time.Duration
	chipSteps   int64
	examples    int64
	lastLoss    float64
	phases      []*phaseStats
	curve       []LossPoint
	checkpoints int
	failures    []string
}

func (s *runStats) observe(p control.Phase, r *stepResult) {
	s.steps++
	chips := max(r.chips, 1)
	s.tc += r.time.TensorCore * time.Duration(chips)
	s.sc += r.time.SparseCore * time.Duration(chips)
	s.dev += r.time.Device * time.Duration(chips)
	s.chipSteps += int64(chips)
	s.examples += int64(r.examples)
	s.lastLoss = r.loss
	var ps *phaseStats
	if n := len(s.phases); n > 0 && s.phases[n-1].phase == p {
		ps = s.phases[n-1]
	} else {
		ps = &phaseStats{phase: p}
		s.phases = append(s.phases, ps)
	}
	ps.steps++
	ps.examples += int64(r.examples)
	ps.values += int64(r.values)
	ps.unique += int64(r.unique)
	ps.chipSteps += int64(max(r.chips, 1))
	ps.tcTime += r.time.TensorCore
	ps.scTime += r.time.SparseCore
	ps.dev += r.time.Device
	if len(ps.scBytes) != len(r.scBytes) {
		ps.scBytes = make([]float64, len(r.scBytes))
	}
	for i, b := range r.scBytes {
		ps.scBytes[i] += b
	}
	if len(ps.first) < lossWindow {
		ps.first = append(ps.first, r.loss)
	}
	if len(ps.last) < lossWindow {
		ps.last = append(ps.last, r.loss)
	} else {
		ps.last[ps.steps%lossWindow] = r.loss
	}
	// The curve keeps every step until it is long, then every other one.
	stride := uint64(1) << uint(max(0, len(s.curve)/512))
	if s.steps%stride == 0 || len(s.curve) == 0 {
		s.curve = append(s.curve, LossPoint{Step: s.steps, Loss: r.loss, Phase: p.String()})
	}
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
