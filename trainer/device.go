package trainer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/ready"
)

const rpcTimeout = 30 * time.Second

func (c *Controller) eventRange() *sigv1.EventRange {
	return &sigv1.EventRange{StartMicros: c.cfg.From, EndMicros: c.cfg.endMicros()}
}

// setup registers the graph (when the job has one) and builds the model
// from the read solution's inputs. A graph SIG rejects (InvalidArgument:
// the DSL does not compile) or inputs the model cannot consume are
// permanent: a person must fix the configuration (paper VI.A).
func (c *Controller) setup(ctx context.Context) {
	var keys []string
	var stats map[string]fdp.Statistics
	done := func(err error, permanent bool, sol *solution, m *model.Model) {
		ev := control.Event{Kind: control.EvSetupDone, Permanent: permanent}
		if err != nil {
			ev.Err = err.Error()
			c.log.Warn("setup failed", "err", err, "permanent", permanent)
		}
		c.post(msg{ev: ev, sol: sol, model: m, keys: keys, stats: stats})
	}
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if c.cfg.Graph != "" {
		_, err := c.sig.SubmitGraph(rctx, &sigv1.SubmitGraphRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline,
			Priority: c.cfg.Priority, Range: c.eventRange(),
			Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: c.cfg.Graph}, RawSource: c.cfg.RawSource}})
		if err != nil {
			done(fmt.Errorf("submit graph: %w", err), permanentRPC(err), nil, nil)
			return
		}
	}
	ps, err := c.sig.GetReadSolution(rctx, &sigv1.GetReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()})
	if err != nil {
		done(fmt.Errorf("read solution: %w", err), permanentRPC(err), nil, nil)
		return
	}
	sol := newSolution(ps)
	f, err := sol.features()
	if err != nil {
		done(err, true, nil, nil)
		return
	}
	m, err := model.New(c.modelConfig(f))
	if err != nil {
		done(err, true, nil, nil)
		return
	}
	// Feedback-directed partitioning (paper V.C): what other models (or
	// earlier runs) measured for these features.
	keys = featureKeys(sol, f)
	stats = c.readStatistics(rctx, keys)
	done(nil, false, sol, m)
}

func (c *Controller) modelConfig(f model.Features) model.Config {
	return model.Config{Features: f, Vocab: c.cfg.Vocab, Dim: c.cfg.Dim, Hidden: c.cfg.Hidden,
		LearningRate: c.cfg.LearningRate, EmbeddingLearningRate: c.cfg.EmbeddingLearningRate, Seed: c.cfg.Seed,
		Cost: c.cfg.Device, StaleEmbeddingGradients: c.cfg.Device.Mode == steptime.Pipelined}
}

func (c *Controller) loadCheckpoint(ctx context.Context) {
	m, err := c.cks.Latest(ctx)
	ev := control.Event{Kind: control.EvRestored}
	if err != nil {
		ev.Err = err.Error()
		c.log.Warn("load checkpoint", "err", err)
	} else if m != nil {
		p, err := m.Progress()
		if err != nil {
			ev.Err = err.Error()
		}
		ev.Progress = p
		c.log.Info("resuming from checkpoint", "seq", m.Seq, "epochs", m.Epochs, "units", len(m.Units), "phase", m.Phase)
	}
	var h *restoredHistory
	if ev.Err == "" {
		h = c.loadHistory(ctx, m)
	}
	c.post(msg{ev: ev, manifest: m, history: h})
}

func (c *Controller) refreshBlocks(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	ps, err := c.sig.GetReadSolution(rctx, &sigv1.GetReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()})
	if err != nil {
		c.log.Warn("read solution", "err", err)
		c.post(msg{ev: control.Event{Kind: control.EvBlocks, Err: err.Error()}})
		return
	}
	c.post(msg{ev: control.Event{Kind: control.EvBlocks}, sol: newSolution(ps)})
}

// restoreModel loads the last checkpoint onto the slice (or initial
// parameters when there is none).
func (c *Controller) restoreModel(ctx context.Context, m *checkpoint.Manifest) {
	c.deviceMu.Lock()
	defer c.deviceMu.Unlock()
	c.deviceGen.Add(1) // steps decided before now belong to aborted attempts
	ev := control.Event{Kind: control.EvModelRestored}
	ledger := &checkpoint.Ledger{}
	err := func() error {
		fresh, err := model.New(c.model.Config())
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
		c.model = fresh
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
// partitioner's solved plan (feedback.go: measured statistics when the
// store has them; out of memory and invalid problems are permanent, paper
// VI.A) and "compiles" the step.
func (c *Controller) compile(ctx context.Context, chips int, phase control.Phase) {
	c.deviceMu.Lock()
	defer c.deviceMu.Unlock()
	ev := control.Event{Kind: control.EvCompiled}
	plan, rep, err := c.solvePlan(chips, phase)
	if err == nil {
		err = c.model.Replan(plan)
	}
	if err == nil {
		c.log.Info("partition plan", "chips", chips, "tables_with_statistics", rep.TablesWithStatistics,
			"load_imbalance", rep.LoadImbalance, "cost_ns", rep.CostNS, "layouts", layoutsText(rep.Layouts))
		if c.prof != nil {
			c.prof.ResetLoad()
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
	c.deviceMu.Lock()
	defer c.deviceMu.Unlock()
	r := &stepResult{attempt: attempt, start: start, ids: b.EventIDs, segs: segs, examples: b.Len()}
	if c.deviceGen.Load() != gen {
		// The model was restored since: the step's attempt was aborted.
		r.failed = "the model was restored before the step ran"
		c.post(msg{ev: control.Event{Kind: control.EvStepDone}, step: r})
		return
	}
	if poison {
		c.model.Poison()
	}
	res, err := c.model.Step(b)
	r.err = err
	r.loss, r.unique, r.values, r.scBytes = res.Loss, res.Unique, res.Values, res.Work.SparseCoreBytes
	if err == nil && profile && c.prof != nil {
		// Feedback-directed partitioning's profile (paper V.C).
		c.prof.Observe(b, res.Work.SparseCoreBytes)
		r.profiled = true
	}
	dev := c.cfg.Device
	dev.Chips = c.compiledChips()
	r.time, r.chips = dev.Step(res.Work), dev.Chips
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

// compiledChips is the slice size the model was compiled for.
func (c *Controller) compiledChips() int {
	if p := c.model.Plan(); p != nil && p.SparseCoresPerChip > 0 {
		return max(p.SparseCores/p.SparseCoresPerChip, 1)
	}
	return 1
}

// writeCheckpoint checks the attempt's ledger (every new unit trained
// exactly once: as many event ids as the unit's rows, none twice) and
// writes model, ledger and progress; the manifest goes last (package
// checkpoint).
func (c *Controller) writeCheckpoint(ctx context.Context, now time.Time, a control.Action) {
	merged := c.committedLedger.Clone()
	var bad error
	if c.attemptLedger == nil {
		bad = errors.New("no ledger for the attempt")
	} else {
		for _, u := range c.attemptLedger.Units {
			if merged.Has(u.Unit) {
				bad = fmt.Errorf("unit %s trained again after it was committed", u.Unit)
				break
			}
			if _, ok := a.Rows[u.Unit]; !ok {
				bad = fmt.Errorf("unit %s trained but not handed out", u.Unit)
				break
			}
		}
		for _, id := range slices.Sorted(maps.Keys(a.Rows)) {
			var n int64
			if c.attemptLedger.Has(id) {
				n = c.attemptLedger.Unit(id).Rows()
			}
			if n != a.Rows[id] && bad == nil {
				bad = fmt.Errorf("unit %s: %d event ids in the ledger, %d rows read", id, n, a.Rows[id])
			}
		}
		merged.Merge(c.attemptLedger)
		if bad == nil {
			bad = merged.Check()
		}
		if bad == nil && len(merged.Units) != len(a.Progress.Units) {
			bad = fmt.Errorf("ledger has %d units, progress %d", len(merged.Units), len(a.Progress.Units))
		}
	}
	attempt := a.Attempt
	if bad != nil {
		c.log.Error("ledger check failed: not committing", "err", bad)
		go c.post(msg{ev: control.Event{Kind: control.EvCheckpointDone, Attempt: attempt, Err: "ledger: " + bad.Error()}})
		return
	}
	p := a.Progress
	deadline := c.preemptDeadline
	gp := c.checkpointHistory(now) // goes in before the manifest, the commit point
	go func() {
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		c.deviceMu.Lock()
		defer c.deviceMu.Unlock()
		ev := control.Event{Kind: control.EvCheckpointDone, Attempt: attempt}
		state, err := c.model.MarshalBinary()
		var man checkpoint.Manifest
		if err == nil && !c.model.Finite() {
			err = errors.New("model parameters are not finite")
		}
		if err == nil {
			man, err = c.cks.Save(ctx, checkpoint.Checkpoint{Job: c.cfg.Job, Progress: p, Fingerprint: c.model.Fingerprint(),
				Model: state, Ledger: merged, Goodput: gp, Created: c.now()})
		}
		if err != nil {
			ev.Err = err.Error()
			c.log.Warn("checkpoint", "err", err)
		} else {
			// When the manifest became durable (or just after): what a
			// preemption deadline is measured against.
			ev.At = c.now()
			c.log.Info("checkpoint committed", "epochs", p.Epochs, "units", len(p.Units), "event_ids", man.EventIDs)
			c.publishStatistics(ctx)
		}
		c.post(msg{ev: ev, manifest: &man, ledger: merged})
		if err == nil {
			// Older checkpoints go once the controller has been told: the
			// commit does not wait for their deletion.
			c.cks.Prune(ctx, p.Epochs)
		}
	}()
}

// syncWatcher runs the completion watcher while the job waits for data: a
// transient hold (paper VI.A: lifted "once the data has become available")
// or a caught-up job at the head of the stream.
func (c *Controller) syncWatcher(ctx context.Context) {
	st := c.m.Status()
	h, held := c.m.Hold()
	want := (st == control.StHeld && held && h.Kind == control.Transient) || st == control.StWaitingData
	switch {
	case want && c.watchCancel == nil:
		wctx, cancel := context.WithCancel(ctx)
		c.watchCancel = cancel
		go c.watch(wctx)
	case !want && c.watchCancel != nil:
		c.watchCancel()
		c.watchCancel = nil
	}
}

// watch re-reads the solution whenever a completion event arrives on
// sig.memo.ready (Kafka) or the WatchReadSolution stream, and every
// HoldPollInterval in case an event was lost.
func (c *Controller) watch(ctx context.Context) {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if len(c.cfg.KafkaBrokers) > 0 {
		sub, err := ready.NewSubscriber(ready.SubscriberConfig{Brokers: c.cfg.KafkaBrokers})
		if err != nil {
			c.log.Warn("sig.memo.ready subscriber", "err", err)
		} else {
			go func() {
				defer sub.Close()
				for {
					e, err := sub.Next(ctx)
					if err != nil {
						return
					}
					c.log.Debug("completion event", "component", e.ComponentKey, "block", e.BlockID)
					poke()
				}
			}()
		}
	}
	go func() {
		for ctx.Err() == nil {
			stream, err := c.sig.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()})
			if err == nil {
				first := true
				for {
					up, err := stream.Recv()
					if err != nil {
						break
					}
					if !first || up.GetSolution().GetComplete() {
						poke()
					}
					first = false
				}
			} else if status.Code(err) == codes.Unimplemented {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(c.cfg.RetryDelay):
			}
		}
	}()
	poke() // an event may have come before the subscription
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-c.cfg.Clock.After(c.cfg.HoldPollInterval):
		}
		c.refreshBlocks(ctx)
	}
}
