package workers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/internal/clock"
)

// ScaleConfig bounds and paces the autoscaler (paper IV.A, "Scaling": SIG
// workers must scale up rapidly when training jobs arrive and down promptly
// once results are memoized).
type ScaleConfig struct {
	// Min and Max bound the desired worker count.
	Min, Max int
	// TargetDrain is how long the backlog should take to drain. Default 1m.
	TargetDrain time.Duration
	// CoolDown is how long the computed size must stay below the current
	// one before scaling down. Default 5m.
	CoolDown time.Duration
	// DefaultTaskSeconds is the task cost assumed before any task has been
	// measured. Default 1.
	DefaultTaskSeconds float64
	// TasksPerWorker is how many tasks one busy worker holds on average:
	// 1 for a plain Runner without batches, more for a pipelined or
	// batching worker (Pool's TasksHeld). The measured task cost is
	// lease-to-completion time, which for such a worker spans this many
	// tasks' turns: a worker holding n tasks for s seconds each completes
	// n tasks per s seconds (Little's law). The estimate is exact when the
	// pipelines and batches are full, that is when the backlog is large
	// enough to matter. Default 1.
	TasksPerWorker int
}

// EnsureDefaults fills unset fields.
func (c *ScaleConfig) EnsureDefaults() {
	if c.TargetDrain <= 0 {
		c.TargetDrain = time.Minute
	}
	if c.CoolDown <= 0 {
		c.CoolDown = 5 * time.Minute
	}
	if c.DefaultTaskSeconds <= 0 {
		c.DefaultTaskSeconds = 1
	}
	if c.TasksPerWorker <= 0 {
		c.TasksPerWorker = 1
	}
}

// Validate reports a config that cannot be met.
func (c ScaleConfig) Validate() error {
	if c.Min < 0 || c.Max < c.Min || c.Max == 0 {
		return fmt.Errorf("%w: autoscaler bounds min=%d max=%d (need 0 <= min <= max, max >= 1)", ErrInvalid, c.Min, c.Max)
	}
	return nil
}

// Observation is what the autoscaler sees at one decision.
type Observation struct {
	Now time.Time
	// Backlog is the outstanding tasks: queued plus leased.
	Backlog int
	// TaskSeconds is the measured mean cost of a task (moving average);
	// zero or less means not measured yet.
	TaskSeconds float64
}

// ScaleState is the autoscaler's memory between decisions.
type ScaleState struct {
	// Desired is the size decided last.
	Desired int
	// LowSince is when the computed size first fell below Desired (zero if
	// it has not); LowPeak is the largest computed size since then.
	LowSince time.Time
	LowPeak  int
}

// Decide is the autoscaler's decision, a pure function. The size needed is
// the work outstanding divided by the work one worker does in the time
// allowed for it:
//
//	need = clamp(ceil(backlog × task seconds / (target drain × tasks per worker)), Min, Max)
//
// If need is at least the current size it is taken at once (scale up fast:
// a new training job should not wait). If it is lower, the size is kept
// until need has stayed lower for CoolDown, and then drops to the largest
// need seen during that time, so a brief lull between bursts does not shed
// workers that are needed again a moment later.
func (c ScaleConfig) Decide(s ScaleState, o Observation) (int, ScaleState) {
	c.EnsureDefaults()
	need := c.need(o)
	if need >= s.Desired {
		return need, ScaleState{Desired: need}
	}
	if s.LowSince.IsZero() {
		s.LowSince, s.LowPeak = o.Now, need
	} else if need > s.LowPeak {
		s.LowPeak = need
	}
	if o.Now.Sub(s.LowSince) >= c.CoolDown {
		return s.LowPeak, ScaleState{Desired: s.LowPeak}
	}
	return s.Desired, s
}

func (c ScaleConfig) need(o Observation) int {
	cost := o.TaskSeconds
	if cost <= 0 || math.IsNaN(cost) || math.IsInf(cost, 0) {
		cost = c.DefaultTaskSeconds
	}
	backlog := max(o.Backlog, 0)
	n := math.Ceil(float64(backlog) * cost / (c.TargetDrain.Seconds() * float64(c.TasksPerWorker)))
	switch {
	case n < float64(c.Min):
		return c.Min
	case n > float64(c.Max):
		return c.Max
	}
	return int(n)
}

// Source is what the autoscaler observes; *Queue implements it.
type Source interface {
	Backlog() int
	MeanTaskSeconds() float64
}

// Resizer is what the autoscaler drives; *Pool implements it.
type Resizer interface {
	Resize(n int)
	Size() int
}

// AutoscalerOptions configure an Autoscaler.
type AutoscalerOptions struct {
	// Clock paces decisions. Default clock.Real.
	Clock clock.Clock
	// Interval between decisions. Default 5s.
	Interval time.Duration
	// Registerer, if set, receives the gauges sig_workers_desired and
	// sig_workers_actual.
	Registerer prometheus.Registerer
}

// Autoscaler applies Decide periodically: it sizes the in-process pool and
// exports the desired size so that an orchestrator can scale remote
// workers (`sigd worker`) the same way.
type Autoscaler struct {
	cfg  ScaleConfig
	src  Source
	pool Resizer // nil: only export the desired size
	opts AutoscalerOptions

	mu      sync.Mutex
	st      ScaleState
	desired prometheus.Gauge
}

// NewAutoscaler returns an autoscaler; pool may be nil.
func NewAutoscaler(cfg ScaleConfig, src Source, pool Resizer, opts AutoscalerOptions) (*Autoscaler, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	a := &Autoscaler{cfg: cfg, src: src, pool: pool, opts: opts}
	a.desired = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sig_workers_desired",
		Help: "Memoization workers the autoscaler wants (backlog x task cost / (target drain time x tasks per worker), within min and max).",
	})
	if r := opts.Registerer; r != nil {
		actual := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sig_workers_actual",
			Help: "In-process memoization workers running, including ones finishing their last task.",
		}, func() float64 { return float64(a.Actual()) })
		if err := r.Register(a.desired); err != nil {
			return nil, fmt.Errorf("workers: register metrics: %w", err)
		}
		if err := r.Register(actual); err != nil {
			r.Unregister(a.desired)
			return nil, fmt.Errorf("workers: register metrics: %w", err)
		}
	}
	return a, nil
}

// Tick makes one decision now and applies it; it returns the desired size.
func (a *Autoscaler) Tick() int {
	o := Observation{Now: a.opts.Clock.Now(), Backlog: a.src.Backlog(), TaskSeconds: a.src.MeanTaskSeconds()}
	a.mu.Lock()
	n, st := a.cfg.Decide(a.st, o)
	a.st = st
	a.mu.Unlock()
	a.desired.Set(float64(n))
	if a.pool != nil {
		a.pool.Resize(n)
	}
	return n
}

// Run ticks at once and then every Interval until ctx is done.
func (a *Autoscaler) Run(ctx context.Context) error {
	for {
		a.Tick()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.opts.Clock.After(a.opts.Interval):
		}
	}
}

// Desired is the size decided last.
func (a *Autoscaler) Desired() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st.Desired
}

// Actual is the in-process pool's live size (0 without a pool).
func (a *Autoscaler) Actual() int {
	if a.pool == nil {
		return 0
	}
	return a.pool.Size()
}
