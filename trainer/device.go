package trainer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/embedding/placement"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
	"github.com/sigdata/sig/warehouse/objstore"
)

// The emulated slice's device operations: restore the model from a
// checkpoint, compile the slice, run a step; a checkpoint write reads the
// model (checkpoints.go). Each holds the device's mutex.

// device is the emulated slice: the model (trainer/model, its tables
// placed by the partition plan) and the profiler of sampled batches.
// Device operations (restore, compile, step, checkpoint write) hold mu, so
// an operation still running for an aborted attempt finishes before the
// next one starts. gen counts restores: a step decided before one must not
// run after it, on the restored model (its attempt was aborted, and the
// retry trains its batch again); it waits for mu like the restore, so the
// mutex alone does not order them.
type device struct {
	mu    sync.Mutex
	gen   atomic.Uint64
	model *model.Model
	prof  *fdp.Profiler // nil: no statistics store, or profiling disabled
	// ps is the parameter servers of the caught-up phase
	// (trainer/embedding/paramservers); nil when the job keeps its tables
	// on the slice. The tables are on them while ps.OnServers().
	ps *paramservers.Servers
}

// restoreModel loads the last checkpoint onto the slice (or initial
// parameters when there is none); in the caught-up phase of a job with
// parameter servers its tables go onto them (paramservers.Servers.Place).
func (c *Controller) restoreModel(ctx context.Context, m *checkpoint.Manifest, phase control.Phase) {
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	c.dev.gen.Add(1) // steps decided before now belong to aborted attempts
	ev := control.Event{Kind: control.EvModelRestored}
	ledger := &checkpoint.Ledger{}
	err := func() error {
		fresh, err := model.New(c.dev.model.Config())
		if err != nil {
			return err
		}
		if m != nil {
			mb, l, err := c.cks.Load(ctx, m)
			if err != nil {
				return err
			}
			if err := fresh.UnmarshalBinary(mb); err != nil {
				return err
			}
			ledger = l
		}
		if st := c.dev.ps; st != nil {
			st.Drop()
			if phase == control.CaughtUp {
				var committed *checkpoint.ParameterServers
				if m != nil {
					committed = m.ParameterServers
				}
				if err := st.Place(ctx, fresh, committed); err != nil {
					return fmt.Errorf("parameter servers: %w", err)
				}
			}
		}
		c.dev.model = fresh
		return nil
	}()
	if err != nil {
		ev.Err = err.Error()
		// A checkpoint whose objects do not match its manifest, are gone,
		// or are not this model's does not heal by retrying: a person
		// must act (paper VI.A).
		ev.Permanent = errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, objstore.ErrCorrupt) ||
			errors.Is(err, objstore.ErrNotFound) || errors.Is(err, model.ErrIncompatible)
		c.log.Warn("restore checkpoint", "err", err, "permanent", ev.Permanent)
	}
	c.post(msg{ev: ev, ledger: ledger})
}

// compile places the embedding tables on the new slice by the
// partitioner's solved plan (trainer/embedding/placement: measured
// statistics when the store has them; out of memory and invalid problems
// are permanent, paper VI.A) and "compiles" the step.
func (c *Controller) compile(ctx context.Context, chips int, phase control.Phase) {
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	ev := control.Event{Kind: control.EvCompiled}
	plan, rep, err := c.slice().Solve(chips, phase.String(), c.dev.model.Config(), c.fdpFeatures)
	if err == nil {
		err = c.dev.model.Replan(plan)
	}
	if err == nil {
		c.log.Info("partition plan", "chips", chips, "tables_with_statistics", rep.TablesWithStatistics,
			"load_imbalance", rep.LoadImbalance, "cost_ns", rep.CostNS, "layouts", placement.LayoutsText(rep.Layouts))
		if c.dev.prof != nil {
			c.dev.prof.ResetLoad()
		}
	}
	if err != nil {
		ev.Err = err.Error()
		ev.Permanent = errors.Is(err, partition.ErrOutOfMemory) || errors.Is(err, partition.ErrInvalidProblem) || errors.Is(err, model.ErrInvalidConfig)
		c.log.Warn("compile", "chips", chips, "err", err)
	} else {
		select {
		case <-ctx.Done():
		case <-c.cfg.Clock.After(c.cfg.CompileTime):
		}
	}
	c.post(msg{ev: ev, plan: rep})
}

type stepResult struct {
	attempt    uint64
	start, end time.Time
	ideal      time.Duration
	ids        []int64
	segs       []buffer.Segment
	loss       float64
	examples   int
	unique     int
	values     int
	time       steptime.Time
	chips      int // the slice the step ran on
	profiled   bool
	scBytes    []float64 // per SparseCore
	// err: the model refused the step (model.ErrNonFinite: its loss is not
	// finite; anything else: a batch it cannot train). Either stops
	// training: a person must look.
	err error
	// failed: the step did not run (the attempt is retrained).
	failed string
}

// step runs one training step on the emulated slice: the real computation
// on the CPU, then the rest of the modelled device time (steptime).
// gen is deviceGen when the step was decided.
func (c *Controller) step(ctx context.Context, attempt, gen uint64, b *model.Examples, segs []buffer.Segment, start time.Time, poison, profile bool) {
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	r := &stepResult{attempt: attempt, start: start, ids: b.EventIDs, segs: segs, examples: b.Len()}
	if c.dev.gen.Load() != gen {
		// The model was restored since: the step's attempt was aborted.
		r.failed = "the model was restored before the step ran"
		c.post(msg{ev: control.Event{Kind: control.EvStepDone}, step: r})
		return
	}
	if poison {
		c.dev.model.Poison()
	}
	var (
		res model.Result
		err error
	)
	remote := c.dev.ps.Remote()
	if remote != nil {
		res, err = c.dev.model.StepRemote(ctx, b, remote)
		c.dev.ps.Stepped(remote, err)
	} else {
		res, err = c.dev.model.Step(b)
	}
	if errors.Is(err, model.ErrRemote) {
		// A parameter server failed (killed, restarting): the step did
		// not happen, and its update may have reached some servers. The
		// attempt is retrained from the last checkpoint, which rolls
		// every server back (paramservers.Servers.Place).
		r.failed = err.Error()
		c.log.Warn("step on the parameter servers failed", "err", err)
		c.post(msg{ev: control.Event{Kind: control.EvStepDone}, step: r})
		return
	}
	r.err = err
	r.loss, r.unique, r.values, r.scBytes = res.Loss, res.Unique, res.Values, res.Work.SparseCoreBytes
	if err == nil && profile && c.dev.prof != nil {
		// Feedback-directed partitioning's profile (paper V.C).
		c.dev.prof.Observe(b, res.Work.SparseCoreBytes)
		r.profiled = true
	}
	dev := c.cfg.Device
	dev.Chips = c.dev.chips()
	r.time, r.chips = dev.Step(res.Work), dev.Chips
	// The step holds the slice for its modelled device time, stretched by
	// the time scale, on the tables' either placement: with the tables on
	// parameter servers it includes the wait for their rows before the
	// device step and for the servers' acknowledgement after it, priced by
	// the step-time model from the bytes it exchanged with them
	// (steptime.Time.Servers), on the same basis as the SparseCore's
	// lookups it replaces. PG is the ideal over this time (MPG paper §4):
	// one definition in both placements (issue 27: adding the RPCs' real
	// loopback time instead put an unscaled wait beside scaled device
	// time, so the servers' PG moved with the time scale and could not be
	// compared with the slice's). The real RPCs run inside this time, as
	// the real computation does; if the
	// emulator's CPU and loopback take longer, the step lasts longer and
	// the report says the emulator set the pace.
	wall := dev.Scale(r.time.Device)
	if rest := start.Add(wall).Sub(c.now()); rest > 0 {
		select {
		case <-ctx.Done():
		case <-c.cfg.Clock.After(rest):
		}
	}
	r.end = c.now()
	r.ideal = min(dev.Scale(r.time.Ideal), r.end.Sub(r.start))
	c.post(msg{ev: control.Event{Kind: control.EvStepDone}, step: r})
}

// chips is the slice size the model was compiled for (under mu).
func (d *device) chips() int {
	if p := d.model.Plan(); p != nil && p.SparseCoresPerChip > 0 {
		return max(p.SparseCores/p.SparseCoresPerChip, 1)
	}
	return 1
}
