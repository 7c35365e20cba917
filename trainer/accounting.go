package trainer

import (
	"context"
	"fmt"
	"time"

	"github.com/sigdata/sig/trainer/accounting/jobgoodput"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
)

// The accounting wing wired into the controller (doc.go, "Goodput"): the
// job's goodput account (trainer/accounting/jobgoodput) follows the
// machine's activity and records its goodput actions; its history goes
// into every checkpoint and, between checkpoints, into a journal this file
// writes one at a time in the background; a restarted controller restores
// it. The steps' statistics (trainer/accounting/runstats) are summed in
// steps.go and reported in report.go and status.go.

// syncActivity keeps the goodput account's open interval equal to the
// machine's activity (control.Machine.Activity).
func (c *Controller) syncActivity(now time.Time) {
	cat, ok := c.m.Activity()
	if err := c.acct.Follow(now, cat, ok); err != nil {
		c.log.Debug("goodput activity", "err", err)
	}
}

// recordGoodput records the machine's goodput actions: allocations,
// committed checkpoints, failures, preemptions and phase changes.
func (c *Controller) recordGoodput(now time.Time, a control.Action) {
	var err error
	switch a.Kind {
	case control.ActAllocate:
		err = c.acct.Allocate(now, a.Held, a.Requested)
	case control.ActGoodput:
		err = c.acct.Event(now, a.Goodput)
	case control.ActSetPhase:
		c.log.Info("phase", "phase", a.Phase)
		err = c.acct.SetPhase(now, a.Phase.String())
	}
	if err != nil {
		c.log.Debug("goodput", "action", a.Kind, "err", err)
	}
}

// checkpointHistory is the goodput history a checkpoint written now
// carries; nil when there is none to write.
func (c *Controller) checkpointHistory(now time.Time) []byte {
	b, err := c.acct.CheckpointHistory(now)
	if err != nil {
		c.log.Warn("goodput history for the checkpoint", "err", err)
		return nil
	}
	return b
}

// journalBody returns the journal as of now.
func (c *Controller) journalBody(now time.Time, final bool) ([]byte, error) {
	seq := -1
	if c.manifest != nil {
		seq = c.manifest.Seq
	}
	return c.acct.Journal(now, seq, c.incarnation, final)
}

// journaling reports whether the journal is written: not when disabled, and
// not before the history was restored (the journal would replace the one
// the restore needs).
func (c *Controller) journaling() bool {
	return c.gpRestored && c.cfg.GoodputJournalInterval >= 0
}

// writeJournal writes the journal in the background, one write at a time
// (so that writes land in the order they were taken); a call while one is
// running makes another follow it.
func (c *Controller) writeJournal(ctx context.Context, now time.Time) {
	if !c.journaling() {
		return
	}
	if c.journalDone != nil {
		c.journalAgain = true
		return
	}
	body, err := c.journalBody(now, false)
	if err != nil {
		c.log.Debug("goodput journal", "err", err)
		return
	}
	c.lastJournal = now
	done := make(chan struct{})
	c.journalDone = done
	go func() {
		if err := c.cks.PutJournal(ctx, body); err != nil && ctx.Err() == nil {
			c.log.Debug("goodput journal", "err", err)
		}
		close(done) // before post, which blocks while the loop is busy exiting
		c.post(msg{fn: func() {
			if c.journalDone == done {
				c.journalDone = nil
				if c.journalAgain {
					c.journalAgain = false
					c.writeJournal(ctx, c.now())
				}
			}
		}})
	}()
}

// finalJournal writes the journal as the controller exits, after any
// background write.
func (c *Controller) finalJournal(end time.Time) {
	if !c.journaling() {
		return
	}
	if c.journalDone != nil {
		<-c.journalDone
		c.journalDone = nil
	}
	body, err := c.journalBody(end, true)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		err = c.cks.PutJournal(ctx, body)
		cancel()
	}
	if err != nil {
		c.log.Warn("goodput journal at exit", "err", err)
	}
}

// loadHistory reads the goodput history to restore with checkpoint m (nil:
// none committed) and the journal, and picks one (jobgoodput.Choose).
// Errors are logged, not returned: goodput is accounting, and the job must
// resume without it.
func (c *Controller) loadHistory(ctx context.Context, m *checkpoint.Manifest) *jobgoodput.Restored {
	var fromCheckpoint []byte
	seq := -1
	if m != nil {
		seq = m.Seq
		b, err := c.cks.LoadGoodput(ctx, m)
		switch {
		case err != nil:
			c.log.Warn("goodput history of the checkpoint", "seq", m.Seq, "err", err)
		case b == nil:
			c.log.Info("the checkpoint has no goodput history", "seq", m.Seq)
		default:
			fromCheckpoint = b
		}
	}
	journal, err := c.cks.Journal(ctx)
	if err != nil {
		c.log.Warn("goodput journal", "err", err)
		journal = nil
	}
	rh, err := jobgoodput.Choose(c.cfg.Job, seq, fromCheckpoint, journal)
	if err != nil {
		c.log.Warn("goodput history", "err", err)
	}
	if journal != nil && (rh == nil || rh.Source != "journal") {
		c.log.Debug("goodput journal does not follow the checkpoint", "checkpoint", seq)
	}
	return rh
}

// restoreGoodput continues the job's goodput timeline from rh, the records
// of the controller's earlier incarnation, and accounts for the time
// between their end and this incarnation's start
// (jobgoodput.Account.Resume).
func (c *Controller) restoreGoodput(rh *jobgoodput.Restored) {
	c.gpRestored = true
	if rh == nil {
		return
	}
	event, err := c.acct.Resume(*rh, c.started)
	if event == "" {
		c.log.Warn("restore goodput history", "err", err)
		return
	}
	if err != nil {
		c.log.Warn("goodput of the restart", "err", err)
	}
	h := rh.History
	c.log.Info("goodput history restored", "source", rh.Source, "from", h.Start, "to", h.End,
		"downtime", fmt.Sprint(jobgoodput.Later(c.started, h.End).Sub(h.End)), "event", event)
}
