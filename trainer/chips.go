package trainer

import (
	"context"

	"github.com/sigdata/sig/trainer/control"
)

// The job's chips, from its Allocator (paper VI.A: a hold gives them back
// "so they can be assigned to another queued service";
// trainer/accounting/fleet's Shared is the allocator of jobs sharing a
// fleet).

// acquireChips asks the allocator for chips in the background (it blocks
// until the fleet has them) and posts EvChipsGranted once they are the
// job's; a newer request or a release cancels it.
func (c *Controller) acquireChips(ctx context.Context, chips int) {
	if c.acquireCancel != nil {
		c.acquireCancel()
	}
	actx, cancel := context.WithCancel(ctx)
	c.acquireCancel = cancel
	go func() {
		if err := c.cfg.Allocator.Acquire(actx, c.cfg.Job, chips); err == nil {
			c.post(msg{ev: control.Event{Kind: control.EvChipsGranted}})
		}
	}()
}

// releaseChips gives the job's chips back (and stops a request waiting).
func (c *Controller) releaseChips() {
	if c.acquireCancel != nil {
		c.acquireCancel()
		c.acquireCancel = nil
	}
	c.cfg.Allocator.Release(c.cfg.Job)
}
