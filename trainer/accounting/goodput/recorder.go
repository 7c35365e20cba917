package goodput

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors of Recorder calls made in the wrong state. They are bugs in the
// caller, not conditions to retry; the call records nothing.
var (
	// ErrOutOfOrder: a call's time is before the job's latest recorded time
	// or before the recorder's start.
	ErrOutOfOrder = errors.New("goodput: time goes backwards")
	// ErrIntervalOpen: Begin or Step while an interval begun earlier is open.
	ErrIntervalOpen = errors.New("goodput: an interval is already open")
	// ErrNoInterval: End with no open interval.
	ErrNoInterval = errors.New("goodput: no open interval")
	// ErrNotAllocated: Step while the job does not hold all its requested
	// chips; a bulk-synchronous step cannot run (MPG paper §4, SG).
	ErrNotAllocated = errors.New("goodput: step without all requested chips")
)

// Recorder builds a Timeline as the trainer runs. It is a state machine fed
// explicit timestamps (take them from internal/clock; the Recorder never
// reads the time itself), so a test drives it by hand. Safe for concurrent
// use. Each job's calls must come in time order; a call that would make the
// timeline invalid returns an error and records nothing.
type Recorder struct {
	mu     sync.Mutex
	chips  int
	start  time.Time
	jobs   []*jobState
	byName map[string]*jobState
}

type jobState struct {
	tl   JobTimeline
	last time.Time // latest time recorded for the job

	alloc     *Allocation // open allocation (End unset), or nil
	open      *Interval   // open interval (End unset), or nil
	phase     string
	mergeStep bool // the last record is a productive interval a Step may extend
}

// NewRecorder returns a recorder for a fleet of chips chips whose capacity
// window starts at start.
func NewRecorder(chips int, start time.Time) *Recorder {
	return &Recorder{chips: chips, start: start, byName: map[string]*jobState{}}
}

// JobRecorder records one job. Get it from Recorder.Job.
type JobRecorder struct {
	r *Recorder
	s *jobState
}

// Job returns the recorder of the named job, creating it on first use. A name
// reports cannot carry (empty, with spaces or '#', or "*", which labels
// aggregates) gives a recorder whose every call fails with
// ErrInvalidTimeline, and no job in the timeline.
func (r *Recorder) Job(name string) *JobRecorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !validName(name) {
		return &JobRecorder{r: r, s: &jobState{tl: JobTimeline{Job: name}}}
	}
	s, ok := r.byName[name]
	if !ok {
		s = &jobState{tl: JobTimeline{Job: name}, last: r.start, phase: DefaultPhase}
		r.byName[name] = s
		r.jobs = append(r.jobs, s)
	}
	return &JobRecorder{r: r, s: s}
}

// do runs f under the lock after checking that at is not in the job's past.
func (j *JobRecorder) do(at time.Time, f func(s *jobState) error) error {
	j.r.mu.Lock()
	defer j.r.mu.Unlock()
	if !validName(j.s.tl.Job) {
		return invalid("job name %q: want non-empty, no spaces or '#', not %q", j.s.tl.Job, allScope)
	}
	if at.Before(j.s.last) {
		return fmt.Errorf("%w: job %q at %v, already recorded up to %v", ErrOutOfOrder, j.s.tl.Job, at.Sub(j.r.start), j.s.last.Sub(j.r.start))
	}
	if err := f(j.s); err != nil {
		return err
	}
	if at.After(j.s.last) {
		j.s.last = at
	}
	return nil
}

// Allocate says that from at on the job requests requested chips and holds
// held of them: held == 0 is queued, held < requested a partial allocation,
// held == requested all-allocated. Allocate(at, 0, 0) says the job demands
// nothing (finished, or on a training hold that released its chips, Ads paper
// VI.A).
func (j *JobRecorder) Allocate(at time.Time, held, requested int) error {
	return j.do(at, func(s *jobState) error {
		if held < 0 || held > requested || requested > j.r.chips {
			return invalid("job %q: allocation %d/%d on a fleet of %d chips", s.tl.Job, held, requested, j.r.chips)
		}
		if s.alloc != nil && s.alloc.Held == held && s.alloc.Requested == requested {
			return nil
		}
		if peak := j.r.heldByOthers(s, at); held+peak > j.r.chips {
			return invalid("job %q: holding %d chips from %v would exceed the fleet's %d; other jobs hold up to %d", s.tl.Job, held, at.Sub(j.r.start), j.r.chips, peak)
		}
		s.closeAlloc(at)
		if requested > 0 {
			s.alloc = &Allocation{Start: at, Held: held, Requested: requested}
		}
		s.mergeStep = false
		return nil
	})
}

// heldByOthers is the most chips that jobs other than s hold at any time from
// at on, counting open allocations as lasting for ever. Jobs record at their
// own pace, so another job may already have recorded a later allocation, or
// may later record one starting before at; checking every new allocation
// against everything recorded after its start covers both orders.
func (r *Recorder) heldByOthers(s *jobState, at time.Time) int {
	type change struct {
		at    time.Time
		delta int
	}
	var changes []change
	base := 0
	add := func(a Allocation, open bool) {
		if !open && !a.End.After(at) {
			return
		}
		if a.Start.After(at) {
			changes = append(changes, change{a.Start, a.Held})
		} else {
			base += a.Held
		}
		if !open {
			changes = append(changes, change{a.End, -a.Held})
		}
	}
	for _, o := range r.jobs {
		if o == s {
			continue
		}
		for _, a := range o.tl.Allocations {
			add(a, false)
		}
		if o.alloc != nil {
			add(*o.alloc, true)
		}
	}
	slices.SortFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // releases first, as in Validate
	})
	peak, cur := base, base
	for _, c := range changes {
		cur += c.delta
		peak = max(peak, cur)
	}
	return peak
}

func (s *jobState) closeAlloc(at time.Time) {
	if s.alloc == nil {
		return
	}
	if a := *s.alloc; at.After(a.Start) {
		a.End = at
		s.tl.Allocations = append(s.tl.Allocations, a)
	}
	s.alloc = nil
}

func (s *jobState) closeInterval(at time.Time) {
	if s.open == nil {
		return
	}
	if iv := *s.open; at.After(iv.Start) {
		iv.End = at
		s.tl.Intervals = append(s.tl.Intervals, iv)
	}
	s.open = nil
}

// SetPhase starts phase (e.g. "initial", "caught-up", Ads paper III.A) at at.
// A job is in DefaultPhase until its first SetPhase.
func (j *JobRecorder) SetPhase(at time.Time, phase string) error {
	return j.do(at, func(s *jobState) error {
		if !validName(phase) {
			return invalid("job %q: phase name %q", s.tl.Job, phase)
		}
		if phase == s.phase {
			return nil
		}
		s.tl.PhaseChanges = append(s.tl.PhaseChanges, PhaseChange{At: at, Phase: phase})
		s.phase = phase
		s.mergeStep = false
		return nil
	})
}

// Begin starts an interval of category c (Initialization, Compile,
// InputStall, CheckpointSave, CheckpointRestore, Hold or Idle) at at; End
// closes it. Record training steps with Step instead. Time with no open
// interval while all-allocated is Idle.
func (j *JobRecorder) Begin(at time.Time, c Category) error {
	return j.do(at, func(s *jobState) error {
		if !c.Recordable() || c == Productive {
			return invalid("job %q: Begin(%s): record steps with Step; derived categories are not recorded", s.tl.Job, c)
		}
		if s.open != nil {
			return fmt.Errorf("%w: job %q: Begin(%s) while %s is open", ErrIntervalOpen, s.tl.Job, c, s.open.Category)
		}
		s.open = &Interval{Start: at, Category: c}
		s.mergeStep = false
		return nil
	})
}

// End closes the interval opened by Begin.
func (j *JobRecorder) End(at time.Time) error {
	return j.do(at, func(s *jobState) error {
		if s.open == nil {
			return fmt.Errorf("%w: job %q", ErrNoInterval, s.tl.Job)
		}
		s.closeInterval(at)
		s.mergeStep = false
		return nil
	})
}

// Step records training steps that ran on the device over [start, end): the
// actual device time (MPG paper §4, PG denominator). ideal is the time the
// same steps would take at peak, model FLOPs / peak FLOP/s of the job's
// chips (the PG numerator), so 0 <= ideal <= end-start. Back-to-back steps
// are merged into one interval, so the timeline grows with state changes,
// not with steps.
func (j *JobRecorder) Step(start, end time.Time, ideal time.Duration) error {
	return j.do(start, func(s *jobState) error {
		if end.Before(start) || ideal < 0 || ideal > end.Sub(start) {
			return invalid("job %q: step of %v with ideal %v", s.tl.Job, end.Sub(start), ideal)
		}
		if s.open != nil {
			return fmt.Errorf("%w: job %q: Step while %s is open", ErrIntervalOpen, s.tl.Job, s.open.Category)
		}
		if s.alloc == nil || s.alloc.Held < s.alloc.Requested {
			return fmt.Errorf("%w: job %q", ErrNotAllocated, s.tl.Job)
		}
		if !end.After(start) {
			return nil
		}
		if n := len(s.tl.Intervals); s.mergeStep && n > 0 && s.tl.Intervals[n-1].End.Equal(start) {
			s.tl.Intervals[n-1].End = end
			s.tl.Intervals[n-1].Ideal += ideal
		} else {
			s.tl.Intervals = append(s.tl.Intervals, Interval{Start: start, End: end, Category: Productive, Ideal: ideal})
		}
		s.mergeStep = true
		s.last = end // nothing can be recorded inside the step
		return nil
	})
}

// CheckpointCommitted records that a checkpoint was committed at at: every
// productive step before it is saved (MPG paper §4, RG numerator). Call it
// when the checkpoint is durable, not when saving starts.
func (j *JobRecorder) CheckpointCommitted(at time.Time) error {
	return j.event(at, Checkpoint)
}

// Failure records a crash or error at at, ending any open interval: steps
// since the last committed checkpoint become lost work, because training
// restarts from that checkpoint (Ads paper III.C, VI.A).
func (j *JobRecorder) Failure(at time.Time) error { return j.event(at, Failure) }

// Preemption records that the cluster stopped the job at at, ending any open
// interval. Steps since the last committed checkpoint are lost, as with a
// Failure; after a preemption notice the job checkpoints first and loses
// nothing (Ads paper VI.B). Record the loss of chips with Allocate.
func (j *JobRecorder) Preemption(at time.Time) error { return j.event(at, Preemption) }

func (j *JobRecorder) event(at time.Time, k EventKind) error {
	return j.do(at, func(s *jobState) error {
		if k != Checkpoint {
			s.closeInterval(at)
		}
		s.tl.Events = append(s.tl.Events, Event{At: at, Kind: k})
		s.mergeStep = false
		return nil
	})
}

// Timeline returns what has been recorded, as if the run stopped at end:
// the capacity window is [start, end), open allocations and intervals close
// at end, and anything recorded after end is cut off (a step that straddles
// end keeps its share of ideal time pro rata). It does not change the
// recorder, so it can be called while the trainer runs.
func (r *Recorder) Timeline(end time.Time) Timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.timelineLocked(end)
}

func (r *Recorder) timelineLocked(end time.Time) Timeline {
	if end.Before(r.start) {
		end = r.start
	}
	t := Timeline{Capacity: Capacity{Chips: r.chips, Start: r.start, End: end}}
	for _, s := range r.jobs {
		t.Jobs = append(t.Jobs, s.cut(end))
	}
	return t
}

// cut returns the job's records as if the run stopped at end.
func (s *jobState) cut(end time.Time) JobTimeline {
	jt := JobTimeline{Job: s.tl.Job}
	allocs := slices.Clone(s.tl.Allocations)
	if s.alloc != nil {
		allocs = append(allocs, Allocation{Start: s.alloc.Start, End: end, Held: s.alloc.Held, Requested: s.alloc.Requested})
	}
	for _, a := range allocs {
		if a.End.After(end) {
			a.End = end
		}
		if a.End.After(a.Start) {
			jt.Allocations = append(jt.Allocations, a)
		}
	}
	ivs := slices.Clone(s.tl.Intervals)
	if s.open != nil {
		ivs = append(ivs, Interval{Start: s.open.Start, End: end, Category: s.open.Category})
	}
	for _, iv := range ivs {
		if iv.End.After(end) {
			if iv.Category == Productive {
				iv.Ideal = time.Duration(float64(iv.Ideal) * float64(end.Sub(iv.Start)) / float64(iv.End.Sub(iv.Start)))
			}
			iv.End = end
			// Rounding must not push ideal past device time.
			iv.Ideal = min(iv.Ideal, iv.End.Sub(iv.Start))
		}
		if iv.End.After(iv.Start) {
			jt.Intervals = append(jt.Intervals, iv)
		}
	}
	for _, p := range s.tl.PhaseChanges {
		if !p.At.After(end) {
			jt.PhaseChanges = append(jt.PhaseChanges, p)
		}
	}
	for _, e := range s.tl.Events {
		if !e.At.After(end) {
			jt.Events = append(jt.Events, e)
		}
	}
	return jt
}

// Report is Compute(r.Timeline(end)).
func (r *Recorder) Report(end time.Time) (Report, error) { return Compute(r.Timeline(end)) }
