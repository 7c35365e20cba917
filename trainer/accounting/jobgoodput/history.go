package jobgoodput

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
)

// Journal is the JSON of a job's goodput journal, written between
// checkpoints (package doc, "Across restarts").
type Journal struct {
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

// CheckpointHistory is the history a checkpoint whose save begins now
// carries: the job's records to now, with the checkpoint itself committed
// at now (the history is read only if the checkpoint commits, and every
// step it trained ended before its save began).
func (a *Account) CheckpointHistory(now time.Time) ([]byte, error) {
	h, err := a.rec.History(a.job, now)
	if err != nil {
		return nil, err
	}
	h.Timeline.Events = append(h.Timeline.Events, goodput.Event{At: now, Kind: goodput.Checkpoint})
	return json.Marshal(h)
}

// Journal is the job's journal as of now, following checkpoint (-1: none
// committed), written by the controller incarnation; final when it exits.
func (a *Account) Journal(now time.Time, checkpoint int, incarnation string, final bool) ([]byte, error) {
	h, err := a.rec.History(a.job, now)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Journal{Checkpoint: checkpoint, Incarnation: incarnation, Final: final, History: h})
}

// Restored is the history a restarted controller restores.
type Restored struct {
	History goodput.History
	// Final: the history is a final journal (its process exited).
	Final bool
	// Source is "checkpoint" or "journal", for the log.
	Source string
}

// Choose picks the history to restore for job with checkpoint seq (-1:
// none committed): checkpoint is that checkpoint's history (nil: it has
// none, or none was committed), journal the pipeline's journal (nil:
// none). The journal wins if it follows that checkpoint, is the job's, and
// reaches at least as far; otherwise the checkpoint's history. nil when
// there is neither. err says what could not be read, which is left out:
// goodput is accounting, and the job resumes without it.
func Choose(job string, seq int, checkpoint, journal []byte) (rh *Restored, err error) {
	var errs []error
	if checkpoint != nil {
		var h goodput.History
		if err := json.Unmarshal(checkpoint, &h); err != nil {
			errs = append(errs, fmt.Errorf("goodput history of checkpoint %d: %w", seq, err))
		} else {
			rh = &Restored{History: h, Source: "checkpoint"}
		}
	}
	if journal != nil {
		var j Journal
		switch err := json.Unmarshal(journal, &j); {
		case err != nil:
			errs = append(errs, fmt.Errorf("goodput journal: %w", err))
		case j.Checkpoint != seq || j.History.Timeline.Job != job || (rh != nil && j.History.End.Before(rh.History.End)):
			// The journal does not follow the checkpoint: it was written
			// before it, or by another job.
		default:
			rh = &Restored{History: j.History, Final: j.Final, Source: "journal"}
		}
	}
	return rh, errors.Join(errs...)
}

// Resume continues the job's timeline from rh, the records of its
// controller's earlier incarnation, and records what happened between
// their end and started, this incarnation's start (package doc): a crash
// is a Failure at the history's end, a clean exit with uncommitted steps a
// Preemption there, and the downtime is charged to the allocation the job
// had. event says which ("failure", "preemption" or "none"); "" when
// nothing was restored (a history of another job, or one the recorder
// refuses), and err says why. An error after the restore (recording the
// restart) comes with its event.
func (a *Account) Resume(rh Restored, started time.Time) (event string, err error) {
	h := rh.History
	if h.Timeline.Job != a.job {
		return "", fmt.Errorf("goodput history of another job, %q", h.Timeline.Job)
	}
	if _, err := a.rec.Restore(h); err != nil {
		return "", err
	}
	event = "none"
	switch {
	case !rh.Final:
		event, err = "failure", a.jr.Failure(h.End)
	case h.Uncommitted():
		event, err = "preemption", a.jr.Preemption(h.End)
	}
	if err == nil {
		err = a.jr.Allocate(Later(started, h.End), 0, 0)
	}
	return event, err
}

// Later is the later of two times: a restarted process's start, or the end
// of its history if the clocks disagree.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
