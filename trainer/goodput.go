package trainer

import (
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/control"
)

// The job's goodput recording (trainer/accounting/goodput): the recorder's
// open interval follows the machine's Activity, and the machine's goodput
// actions become recorder calls. history.go keeps it across restarts.

// syncActivity keeps the goodput recorder's open interval equal to the
// machine's activity (control.Machine.Activity).
func (c *Controller) syncActivity(now time.Time) {
	cat, ok := c.m.Activity()
	if c.open != nil && (!ok || *c.open != cat) {
		if err := c.jr.End(now); err != nil {
			c.log.Debug("goodput end", "err", err)
		}
		c.open = nil
	}
	if ok && c.open == nil {
		if err := c.jr.Begin(now, cat); err != nil {
			c.log.Debug("goodput begin", "err", err)
			return
		}
		c.open = &cat
	}
}

// stallFraction is input stall over the time spent in epoch attempts.
func stallFraction(s goodput.Summary) float64 {
	cs := s.ChipSeconds
	busy := cs[goodput.InputStall] + cs[goodput.Productive] + cs[goodput.LostWork] + cs[goodput.Uncommitted]
	if busy == 0 {
		return 0
	}
	return cs[goodput.InputStall] / busy
}

// jobGoodput is this job's part of a goodput report (the recorder may be
// a fleet's, shared with other jobs).
func (c *Controller) jobGoodput(r goodput.Report) (goodput.JobReport, bool) {
	for _, j := range r.Jobs {
		if j.Job == c.cfg.Job {
			return j, true
		}
	}
	return goodput.JobReport{}, false
}

// recordGoodput records the machine's goodput actions: allocations,
// committed checkpoints, failures, preemptions and phase changes.
func (c *Controller) recordGoodput(now time.Time, a control.Action) {
	switch a.Kind {
	case control.ActAllocate:
		if err := c.jr.Allocate(now, a.Held, a.Requested); err != nil {
			c.log.Debug("goodput allocate", "err", err)
		}
	case control.ActGoodput:
		var err error
		switch a.Goodput {
		case goodput.Checkpoint:
			err = c.jr.CheckpointCommitted(now)
		case goodput.Failure:
			c.open = nil // the event closes the open interval
			err = c.jr.Failure(now)
		case goodput.Preemption:
			c.open = nil
			err = c.jr.Preemption(now)
		}
		if err != nil {
			c.log.Debug("goodput event", "err", err)
		}
	case control.ActSetPhase:
		c.log.Info("phase", "phase", a.Phase)
		if err := c.jr.SetPhase(now, a.Phase.String()); err != nil {
			c.log.Debug("goodput phase", "err", err)
		}
	}
}
