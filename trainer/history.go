package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/checkpoint"
)

// Goodput across controller restarts (doc.go, "Goodput"): the job's goodput
// history goes into every checkpoint, and a journal of it is written between
// checkpoints; a restarted controller restores it and records what the crash
// cost.

// goodputJournal is the JSON of the pipeline's goodput journal
// (checkpoint.Store.PutJournal).
type goodputJournal struct {
	// Checkpoint is the sequence number of the last committed checkpoint
	// the history includes; -1 when there is none. A restarted controller
	// uses the journal only if it follows the checkpoint it restores.
	Checkpoint  int    `json:"checkpoint"`
	Incarnation string `json:"incarnation"`
	// Final: written as the controller exited, so History.End is when the
	// run ended. Otherwise it is the last time the run is known to have
	// been alive.
	Final   bool            `json:"final"`
	History goodput.History `json:"history"`
}

// restoredHistory is what loadCheckpoint found to restore.
type restoredHistory struct {
	h      goodput.History
	final  bool
	source string // "checkpoint" or "journal", for the log
}

// checkpointHistory is the goodput history a checkpoint written now carries:
// the job's records to now, with the checkpoint itself committed at now (the
// history is read only if the checkpoint commits, and every step it trained
// ended before its save began). nil when there is none to write.
func (c *Controller) checkpointHistory(now time.Time) []byte {
	h, err := c.rec.History(c.cfg.Job, now)
	if err != nil {
		c.log.Warn("goodput history for the checkpoint", "err", err)
		return nil
	}
	h.Timeline.Events = append(h.Timeline.Events, goodput.Event{At: now, Kind: goodput.Checkpoint})
	b, err := json.Marshal(h)
	if err != nil {
		c.log.Warn("goodput history for the checkpoint", "err", err)
		return nil
	}
	return b
}

// journalBody returns the journal as of now.
func (c *Controller) journalBody(now time.Time, final bool) ([]byte, error) {
	h, err := c.rec.History(c.cfg.Job, now)
	if err != nil {
		return nil, err
	}
	j := goodputJournal{Checkpoint: -1, Incarnation: c.incarnation, Final: final, History: h}
	if c.manifest != nil {
		j.Checkpoint = c.manifest.Seq
	}
	return json.Marshal(j)
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
// none committed): the checkpoint's own, or the journal if it follows that
// checkpoint and reaches further. Errors are logged, not returned: goodput
// is accounting, and the job must resume without it.
func (c *Controller) loadHistory(ctx context.Context, m *checkpoint.Manifest) *restoredHistory {
	var out *restoredHistory
	seq := -1
	if m != nil {
		seq = m.Seq
		b, err := c.cks.LoadGoodput(ctx, m)
		var h goodput.History
		switch {
		case err != nil:
			c.log.Warn("goodput history of the checkpoint", "seq", m.Seq, "err", err)
		case b == nil:
			c.log.Info("the checkpoint has no goodput history", "seq", m.Seq)
		default:
			if err := json.Unmarshal(b, &h); err != nil {
				c.log.Warn("goodput history of the checkpoint", "seq", m.Seq, "err", err)
			} else {
				out = &restoredHistory{h: h, source: "checkpoint"}
			}
		}
	}
	b, err := c.cks.Journal(ctx)
	if err != nil {
		c.log.Warn("goodput journal", "err", err)
		return out
	}
	if b == nil {
		return out
	}
	var j goodputJournal
	if err := json.Unmarshal(b, &j); err != nil {
		c.log.Warn("goodput journal", "err", err)
		return out
	}
	if j.Checkpoint != seq || j.History.Timeline.Job != c.cfg.Job || (out != nil && j.History.End.Before(out.h.End)) {
		c.log.Debug("goodput journal does not follow the checkpoint", "journal_checkpoint", j.Checkpoint, "checkpoint", seq)
		return out
	}
	return &restoredHistory{h: j.History, final: j.Final, source: "journal"}
}

// restoreGoodput continues the job's goodput timeline from rh, the records
// of the controller's earlier incarnation, and accounts for the time between
// their end and this incarnation's start:
//
//   - a crash (not a final journal) is a Failure at the last record: steps
//     after the last committed checkpoint are lost work, since training
//     resumes from that checkpoint. A clean exit that left uncommitted steps
//     (the controller was stopped) is a Preemption there, for the same
//     reason.
//   - the job keeps the allocation it had at the last record until this
//     incarnation started: chips reserved for a job whose controller is
//     down, doing nothing, count as idle (all-allocated time with nothing
//     recorded), so the downtime lowers runtime goodput.
//   - from its start this incarnation records as a fresh one does: it
//     demands nothing until it plans an epoch.
func (c *Controller) restoreGoodput(rh *restoredHistory) {
	c.gpRestored = true
	if rh == nil {
		return
	}
	h := rh.h
	if h.Timeline.Job != c.cfg.Job {
		c.log.Warn("goodput history of another job", "job", h.Timeline.Job)
		return
	}
	if _, err := c.rec.Restore(h); err != nil {
		c.log.Warn("restore goodput history", "err", err)
		return
	}
	var err error
	event := "none"
	switch {
	case !rh.final:
		event, err = "failure", c.jr.Failure(h.End)
	case h.Uncommitted():
		event, err = "preemption", c.jr.Preemption(h.End)
	}
	if err == nil {
		err = c.jr.Allocate(later(c.started, h.End), 0, 0)
	}
	if err != nil {
		c.log.Warn("goodput of the restart", "err", err)
	}
	c.log.Info("goodput history restored", "source", rh.source, "from", h.Start, "to", h.End,
		"downtime", fmt.Sprint(later(c.started, h.End).Sub(h.End)), "event", event)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
