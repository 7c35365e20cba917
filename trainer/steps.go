package trainer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/runstats"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/model"
)

// A step as the controller sees it (control.ActRunStep, EvStepDone): the
// hosts' batches in, the device's result out into the attempt's ledger,
// goodput and the run's statistics.

// runStep hands the batches of a step to the device.
func (c *Controller) runStep(ctx context.Context, a control.Action) {
	var parts []*pendingBatch
	var missing []string
	for i, h := range a.Hosts {
		k := hostSeq{h, a.Attempt, a.Seqs[i]}
		if p := c.payloads[k]; p != nil {
			parts = append(parts, p)
		} else {
			missing = append(missing, fmt.Sprintf("%s#%d", h, a.Seqs[i]))
		}
		delete(c.payloads, k)
		if s := c.sessions[h]; s != nil {
			s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Ack{Ack: &trainerv1.Ack{Attempt: a.Attempt, Seq: a.Seqs[i]}}})
		}
	}
	if len(missing) > 0 {
		// The machine counts the batch's rows as trained: a step without
		// it would leave them out of the model, so the attempt fails.
		err := fmt.Sprintf("batch %s missing", strings.Join(missing, ", "))
		c.log.Error("step", "attempt", a.Attempt, "err", err)
		go c.post(msg{ev: control.Event{Kind: control.EvStepDone}, step: &stepResult{attempt: a.Attempt, failed: err}})
		return
	}
	global := model.NewExamples(c.feats)
	var segs []buffer.Segment
	for _, p := range parts {
		global.Append(p.ex)
		segs = append(segs, p.segs...)
	}
	c.stepsStarted++
	poison := c.cfg.Faults.NaNAtStep != 0 && !c.nanDone && c.stepsStarted >= c.cfg.Faults.NaNAtStep
	if poison {
		c.nanDone = true
	}
	c.syncActivity(c.now()) // end the input stall before the step starts
	start := c.now()
	profile := c.fstats != nil && fdp.Sampled(c.cfg.Seed, c.stepsStarted, c.cfg.ProfileRate)
	go c.step(ctx, a.Attempt, c.dev.gen.Load(), global, segs, start, poison, profile)
}

// stepDone records a finished step: its event ids go into the attempt's
// ledger and its device time into goodput, if it belongs to the running
// attempt (a step of an aborted attempt is neither trained nor counted).
func (c *Controller) stepDone(now time.Time, r *stepResult, ev *control.Event) {
	ev.Attempt, ev.Err = r.attempt, r.failed
	switch {
	case errors.Is(r.err, model.ErrNonFinite):
		ev.NonFinite = true
	case r.err != nil:
		ev.Err, ev.Permanent = r.err.Error(), true
	}
	if r.attempt != c.m.Attempt() || !c.m.Stepping() || c.attemptLedger == nil {
		return
	}
	if r.err != nil {
		c.log.Error("the model refused the step", "step", c.stepsStarted, "err", r.err)
		return
	}
	if r.failed != "" {
		return
	}
	i := 0
	for _, s := range r.segs {
		u := c.attemptLedger.Unit(s.Unit)
		u.Add(r.ids[i : i+s.Rows])
		if u.Parts == nil && c.sol != nil {
			u.Parts = c.sol.lineage(s.Unit)
		}
		i += s.Rows
	}
	if r.profiled {
		c.fdpRep.ProfiledBatches++
	}
	if err := c.acct.Step(r.start, r.end, r.ideal); err != nil {
		c.log.Debug("goodput step", "err", err)
	}
	c.stats.Observe(c.m.Phase().String(), runstats.Step{Chips: r.chips, TensorCore: r.time.TensorCore, SparseCore: r.time.SparseCore,
		Servers: r.time.Servers, Device: r.time.Device, Examples: r.examples, Values: r.values, Unique: r.unique, Loss: r.loss, SparseCoreBytes: r.scBytes})
}
