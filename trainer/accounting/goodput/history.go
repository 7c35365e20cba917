package goodput

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrRecorded is returned by Restore when the job already has records in the
// recorder: a history can only be the beginning of a job's timeline.
var ErrRecorded = errors.New("goodput: the job already has records")

// History is one job's records up to End, in the form a checkpoint persists
// (its JSON: absolute times, categories by name), so that a controller
// restarted after a crash continues the job's timeline (Recorder.Restore)
// instead of starting a new one that forgets the chip-time the crash cost.
type History struct {
	// Start is the start of the capacity window of the recorder that kept
	// the history: the job's first incarnation's start, across restores.
	Start time.Time `json:"start"`
	// End is where the records stop; nothing after it is known. Open
	// allocations and intervals are closed at End in Timeline.
	End time.Time `json:"end"`
	// Held and Requested are the job's allocation at End (0 and 0: none);
	// Restore reopens it there.
	Held      int `json:"held"`
	Requested int `json:"requested"`
	// Timeline holds the records, all within [Start, End].
	Timeline JobTimeline `json:"timeline"`
}

// Validate checks that the history is a valid job timeline over [Start, End]
// on a fleet of chips chips; the error wraps ErrInvalidTimeline.
func (h History) Validate(chips int) error {
	if !validName(h.Timeline.Job) {
		return invalid("history of job %q: want non-empty, no spaces or '#', not %q", h.Timeline.Job, allScope)
	}
	if h.End.Before(h.Start) {
		return invalid("history of job %q ends before it starts", h.Timeline.Job)
	}
	if h.Held < 0 || h.Held > h.Requested || h.Requested > chips {
		return invalid("history of job %q: allocation %d/%d at its end on a fleet of %d chips", h.Timeline.Job, h.Held, h.Requested, chips)
	}
	t := Timeline{Capacity: Capacity{Chips: chips, Start: h.Start, End: h.End}, Jobs: []JobTimeline{h.Timeline}}
	return t.Validate()
}

// Uncommitted reports whether the history ends with productive time that no
// event follows: steps after the last checkpoint that a restart from that
// checkpoint will redo.
func (h History) Uncommitted() bool {
	var last time.Time
	for _, e := range h.Timeline.Events {
		if e.At.After(last) {
			last = e.At
		}
	}
	for _, iv := range h.Timeline.Intervals {
		if iv.Category == Productive && iv.End.After(last) && iv.End.After(iv.Start) {
			return true
		}
	}
	return false
}

// History returns the named job's records as if the run stopped at end (as
// Timeline does) together with its allocation at end. end must not be before
// anything the job recorded (ErrOutOfOrder), so that the history holds all
// of it.
func (r *Recorder) History(job string, end time.Time) (History, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !validName(job) {
		return History{}, invalid("job name %q: want non-empty, no spaces or '#', not %q", job, allScope)
	}
	h := History{Start: r.start, End: end, Timeline: JobTimeline{Job: job}}
	if end.Before(r.start) {
		return History{}, fmt.Errorf("%w: history of job %q to %v, before the recorder's start %v", ErrOutOfOrder, job, end, r.start)
	}
	s := r.byName[job]
	if s == nil {
		return h, nil
	}
	if end.Before(s.last) {
		return History{}, fmt.Errorf("%w: history of job %q to %v, recorded up to %v", ErrOutOfOrder, job, end.Sub(r.start), s.last.Sub(r.start))
	}
	h.Timeline = s.cut(end)
	if s.alloc != nil {
		h.Held, h.Requested = s.alloc.Held, s.alloc.Requested
	}
	return h, nil
}

// Restore makes h the beginning of its job's timeline: the records of an
// earlier incarnation of the job's controller, restored from a checkpoint.
// The job must have recorded nothing yet in r (ErrRecorded). The recorder's
// capacity window is extended back to h.Start if it starts later, and h's
// allocation at its end stays open from h.End until the caller records
// another; nothing else is open. What happened after h.End is for the caller
// to record (from h.End on): the trainer records the crash and the downtime
// until the new incarnation started (see the trainer package).
//
// h must be valid (History.Validate, on r's fleet), and together with the
// other jobs' records must not hold more chips than the fleet has; otherwise
// Restore returns an error wrapping ErrInvalidTimeline and changes nothing.
func (r *Recorder) Restore(h History) (*JobRecorder, error) {
	if err := h.Validate(r.chips); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name := h.Timeline.Job
	old, existed := r.byName[name]
	if existed && !old.empty() {
		return nil, fmt.Errorf("%w: job %q", ErrRecorded, name)
	}
	// The caller records what followed from h.End on, even if the recorder
	// started later: the window is extended back below.
	s := &jobState{tl: cloneJobTimeline(h.Timeline), last: h.End, phase: DefaultPhase}
	if pcs := sortedPhaseChanges(h.Timeline.PhaseChanges); len(pcs) > 0 {
		s.phase = pcs[len(pcs)-1].Phase
	}
	if h.Requested > 0 {
		s.alloc = &Allocation{Start: h.End, Held: h.Held, Requested: h.Requested}
	}
	// A JobRecorder handed out before keeps working: the job's state is
	// replaced in place.
	oldStart, oldJobs := r.start, r.jobs
	var saved jobState
	if existed {
		saved = *old
		*old = *s
		s = old
	} else {
		r.jobs = append(slices.Clone(r.jobs), s)
	}
	if h.Start.Before(r.start) {
		r.start = h.Start
	}
	// Check the whole fleet: the restored allocations against every other
	// job's, up to the latest time anything was recorded.
	end := r.start
	for _, o := range r.jobs {
		if o.last.After(end) {
			end = o.last
		}
	}
	err := r.timelineLocked(end).Validate()
	if peak := r.heldByOthers(s, h.End); err == nil && h.Held+peak > r.chips {
		// The reopened allocation lasts until the job records another.
		err = invalid("job %q: holding %d chips from %v would exceed the fleet's %d; other jobs hold up to %d", name, h.Held, h.End.Sub(r.start), r.chips, peak)
	}
	if err != nil {
		r.start, r.jobs = oldStart, oldJobs
		if existed {
			*old = saved
		}
		return nil, err
	}
	r.byName[name] = s
	return &JobRecorder{r: r, s: s}, nil
}

// empty reports whether the job has recorded nothing.
func (s *jobState) empty() bool {
	t := s.tl
	return s.alloc == nil && s.open == nil && len(t.Allocations) == 0 && len(t.Intervals) == 0 &&
		len(t.Events) == 0 && len(t.PhaseChanges) == 0
}

func cloneJobTimeline(t JobTimeline) JobTimeline {
	return JobTimeline{Job: t.Job, Allocations: slices.Clone(t.Allocations), PhaseChanges: slices.Clone(t.PhaseChanges),
		Intervals: slices.Clone(t.Intervals), Events: slices.Clone(t.Events)}
}
