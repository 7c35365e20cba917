package jobgoodput

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
)

// Account is one job's part of a goodput recorder and the interval open in
// it. Its recording methods are not safe for concurrent use (the
// controller's loop makes them); Report and Summary only read the recorder,
// which is, and may be called from any goroutine.
type Account struct {
	rec  *goodput.Recorder
	jr   *goodput.JobRecorder
	job  string
	open *goodput.Category
}

// New is job's account in rec (a recorder of the job's own, or a fleet's).
func New(rec *goodput.Recorder, job string) *Account {
	return &Account{rec: rec, jr: rec.Job(job), job: job}
}

// Follow keeps the open interval equal to what the held chips are doing:
// cat, or nothing when ok is false (no chips held, or a step runs, which
// Step records).
func (a *Account) Follow(now time.Time, cat goodput.Category, ok bool) error {
	var errs []error
	if a.open != nil && (!ok || *a.open != cat) {
		if err := a.jr.End(now); err != nil {
			errs = append(errs, fmt.Errorf("goodput end: %w", err))
		}
		a.open = nil
	}
	if ok && a.open == nil {
		if err := a.jr.Begin(now, cat); err != nil {
			return errors.Join(append(errs, fmt.Errorf("goodput begin: %w", err))...)
		}
		a.open = &cat
	}
	return errors.Join(errs...)
}

// End closes the open interval, if any (the controller stops).
func (a *Account) End(now time.Time) error {
	if a.open == nil {
		return nil
	}
	a.open = nil
	return a.jr.End(now)
}

// Allocate records that the job holds held of the requested chips from now.
func (a *Account) Allocate(now time.Time, held, requested int) error {
	return a.jr.Allocate(now, held, requested)
}

// Event records a committed checkpoint, a failure or a preemption; the
// last two end the open interval with the attempt they end.
func (a *Account) Event(now time.Time, kind goodput.EventKind) error {
	switch kind {
	case goodput.Checkpoint:
		return a.jr.CheckpointCommitted(now)
	case goodput.Failure:
		a.open = nil
		return a.jr.Failure(now)
	case goodput.Preemption:
		a.open = nil
		return a.jr.Preemption(now)
	}
	return fmt.Errorf("goodput event %s: not one a job records", kind)
}

// SetPhase records a phase change (Ads III.A: initial, caught-up).
func (a *Account) SetPhase(now time.Time, phase string) error { return a.jr.SetPhase(now, phase) }

// Step records a step that ran from start to end, ideal of it at peak.
func (a *Account) Step(start, end time.Time, ideal time.Duration) error {
	return a.jr.Step(start, end, ideal)
}

// Intervals are the job's recorded intervals of category cat up to now
// (the open one cut at now), across restarts, in time order.
func (a *Account) Intervals(now time.Time, cat goodput.Category) []goodput.Interval {
	var out []goodput.Interval
	for _, j := range a.rec.Timeline(now).Jobs {
		if j.Job != a.job {
			continue
		}
		for _, iv := range j.Intervals {
			if iv.Category == cat {
				out = append(out, iv)
			}
		}
	}
	slices.SortFunc(out, func(x, y goodput.Interval) int { return x.Start.Compare(y.Start) })
	return out
}

// Report is the recorder's report as of now (the whole fleet's when the
// recorder is shared).
func (a *Account) Report(now time.Time) (goodput.Report, error) { return a.rec.Report(now) }

// Summary is the job's part of a report of its recorder.
func (a *Account) Summary(r goodput.Report) (goodput.JobReport, bool) {
	for _, j := range r.Jobs {
		if j.Job == a.job {
			return j, true
		}
	}
	return goodput.JobReport{}, false
}

// StallFraction is input stall over the time spent in epoch attempts
// (input stall, steps, and steps lost or not yet committed).
func StallFraction(s goodput.Summary) float64 {
	cs := s.ChipSeconds
	busy := cs[goodput.InputStall] + cs[goodput.Productive] + cs[goodput.LostWork] + cs[goodput.Uncommitted]
	if busy == 0 {
		return 0
	}
	return cs[goodput.InputStall] / busy
}
