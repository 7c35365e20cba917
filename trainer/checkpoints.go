package trainer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sigdata/sig/trainer/accounting/jobgoodput"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Checkpoints (paper III.C): loading the last one's progress at start
// (control.ActLoadCheckpoint) and writing one at each epoch end
// (control.ActWriteCheckpoint) after checking the attempt's ledger. The
// model's restore from a checkpoint is a device operation (device.go).

// loadCheckpoint reads the last committed checkpoint's manifest and
// progress (none: zero progress) and the goodput history to restore with
// it (accounting.go), and posts EvRestored.
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
	var h *jobgoodput.Restored
	if ev.Err == "" {
		h = c.loadHistory(ctx, m)
	}
	c.post(msg{ev: ev, manifest: m, history: h})
}

// writeCheckpoint checks the attempt's ledger (checkLedger) and writes
// model, ledger and progress; the manifest goes last (package checkpoint).
func (c *Controller) writeCheckpoint(ctx context.Context, now time.Time, a control.Action) {
	merged, bad := checkLedger(c.committedLedger, c.attemptLedger, a.Rows, len(a.Progress.Units))
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
		c.dev.mu.Lock()
		defer c.dev.mu.Unlock()
		ev := control.Event{Kind: control.EvCheckpointDone, Attempt: attempt}
		// With the tables on parameter servers, the servers checkpoint
		// first and the tables are read back into the model state: the
		// manifest, written last, commits both
		// (paramservers.Servers.Save).
		var pss *checkpoint.ParameterServers
		var err error
		if st := c.dev.ps; st.OnServers() {
			if pss, err = st.Save(ctx, c.dev.model); err != nil {
				err = fmt.Errorf("parameter servers: %w", err)
			}
		}
		var state []byte
		if err == nil {
			state, err = c.dev.model.MarshalBinary()
		}
		var man checkpoint.Manifest
		if err == nil && !c.dev.model.Finite() {
			err = errors.New("model parameters are not finite")
		}
		if err == nil {
			man, err = c.cks.Save(ctx, checkpoint.Checkpoint{Job: c.cfg.Job, Progress: p, Fingerprint: c.dev.model.Fingerprint(),
				Model: state, Ledger: merged, Goodput: gp, ParameterServers: pss, Created: c.now()})
		}
		if err != nil {
			ev.Err = err.Error()
			c.log.Warn("checkpoint", "err", err)
		} else {
			// When the manifest became durable (or just after): what a
			// preemption deadline is measured against.
			ev.At = c.now()
			c.log.Info("checkpoint committed", "epochs", p.Epochs, "units", len(p.Units), "event_ids", man.EventIDs)
			c.dev.ps.Committed(pss)
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

// checkLedger checks the running attempt's ledger before its checkpoint
// (paper III.C: every event trained exactly once): every unit the attempt
// trained was handed out (rows: the rows of each, as read) and not
// committed before, holds exactly as many event ids as rows were read, no
// event id occurs twice in the merged ledger, and the merged ledger has the
// units the progress commits. It returns the committed ledger merged with
// the attempt's.
func checkLedger(committed, attempt *checkpoint.Ledger, rows map[blockref.Ref]int64, units int) (*checkpoint.Ledger, error) {
	merged := committed.Clone()
	if attempt == nil {
		return merged, errors.New("no ledger for the attempt")
	}
	var bad error
	for _, u := range attempt.Units {
		if merged.Has(u.Unit) {
			bad = fmt.Errorf("unit %s trained again after it was committed", u.Unit)
			break
		}
		if _, ok := rows[u.Unit]; !ok {
			bad = fmt.Errorf("unit %s trained but not handed out", u.Unit)
			break
		}
	}
	for _, ref := range slices.SortedFunc(maps.Keys(rows), blockref.Ref.Compare) {
		var n int64
		if attempt.Has(ref) {
			n = attempt.Unit(ref).Rows()
		}
		if n != rows[ref] && bad == nil {
			bad = fmt.Errorf("unit %s: %d event ids in the ledger, %d rows read", ref, n, rows[ref])
		}
	}
	merged.Merge(attempt)
	if bad == nil {
		bad = merged.Check()
	}
	if bad == nil && len(merged.Units) != units {
		bad = fmt.Errorf("ledger has %d units, progress %d", len(merged.Units), units)
	}
	return merged, bad
}
