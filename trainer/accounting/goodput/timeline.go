package goodput

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// ErrInvalidTimeline is wrapped by every error that rejects a timeline or a
// recorder call whose records cannot be accounted for (overlapping intervals,
// times outside the capacity window, more chips held than the fleet has, a
// productive step without all its chips, ...).
var ErrInvalidTimeline = errors.New("goodput: invalid timeline")

// DefaultPhase is the phase of a job before its first PhaseChange: every model
// starts with initial training on historical data before it is caught up (SIG
// paper III.A, "Initial vs Caught-Up Training").
const DefaultPhase = "initial"

// Category classifies chip-time. The first group is what a job records; the
// second is derived by Compute. Together, for one job, they partition the
// chip-time the job demanded (see doc.go).
type Category int

const (
	// Productive is chip-time of training steps that a later checkpoint
	// committed: the numerator of Runtime Goodput (MPG paper §4). Recorded
	// as Productive intervals; Compute reclassifies the uncommitted part.
	Productive Category = iota
	// Initialization is bringing up chips and connecting them into a slice.
	Initialization
	// Compile is loading and compiling the program.
	Compile
	// InputStall is the device waiting for input (the host could not keep up).
	InputStall
	// CheckpointSave is draining, quiescing and writing a checkpoint.
	CheckpointSave
	// CheckpointRestore is loading the last checkpoint after a restart.
	CheckpointRestore
	// Hold is time in a training hold while the job still holds chips
	// (Ads paper VI.A): from detecting the error to releasing the chips.
	Hold
	// Idle is all-allocated chip-time with nothing recorded, or recorded
	// as Idle (e.g. waiting at an epoch barrier for a preempted job to rejoin).
	Idle

	// LostWork is productive chip-time after the last committed checkpoint
	// before a failure or preemption: the run restarts from that checkpoint,
	// so the work is done again (MPG paper §4, Runtime Goodput).
	LostWork
	// Uncommitted is productive chip-time after the last checkpoint when the
	// timeline ends: not lost yet, but not checkpoint-committed either.
	Uncommitted
	// PartialAllocation is chip-time a job holds while it holds fewer chips
	// than it requested: a bulk-synchronous job cannot make progress until
	// all of them are up (MPG paper §4, Scheduling Goodput, Figure 10).
	PartialAllocation
	// UnmetDemand is requested chip-time the job did not hold: queued with
	// nothing, or the missing chips of a partial allocation. Not chip-time
	// any job held; it is the rest of the job's SG denominator.
	UnmetDemand
	// Unallocated is fleet capacity no job held (fleet summaries only).
	Unallocated

	// NumCategories is the number of categories.
	NumCategories int = iota
)

var categoryNames = [NumCategories]string{
	Productive:        "productive",
	Initialization:    "initialization",
	Compile:           "compile",
	InputStall:        "input_stall",
	CheckpointSave:    "checkpoint_save",
	CheckpointRestore: "checkpoint_restore",
	Hold:              "hold",
	Idle:              "idle",
	LostWork:          "lost_work",
	Uncommitted:       "uncommitted",
	PartialAllocation: "partial_allocation",
	UnmetDemand:       "unmet_demand",
	Unallocated:       "unallocated",
}

// String returns the snake_case name used in reports, metrics and the text
// timeline format.
func (c Category) String() string {
	if c < 0 || int(c) >= NumCategories {
		return fmt.Sprintf("Category(%d)", int(c))
	}
	return categoryNames[c]
}

// ParseCategory is the inverse of String.
func ParseCategory(s string) (Category, bool) {
	for c, n := range categoryNames {
		if n == s {
			return Category(c), true
		}
	}
	return 0, false
}

// MarshalText writes the category's name, so JSON carries names rather than
// numbers that would change meaning if categories were reordered.
func (c Category) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= NumCategories {
		return nil, fmt.Errorf("goodput: no such category %d", int(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText is the inverse of MarshalText.
func (c *Category) UnmarshalText(b []byte) error {
	v, ok := ParseCategory(string(b))
	if !ok {
		return fmt.Errorf("goodput: unknown category %q", b)
	}
	*c = v
	return nil
}

// Recordable reports whether intervals of this category can be recorded.
// The others are derived by Compute from allocations and events.
func (c Category) Recordable() bool { return c >= Productive && c <= Idle }

// allAllocated reports whether the category is part of all-allocated
// chip-time (the SG numerator and RG denominator).
func (c Category) allAllocated() bool { return c >= Productive && c <= Uncommitted }

// EventKind is what happened at an instant.
type EventKind int

const (
	// Checkpoint is a committed checkpoint: productive time up to it is saved.
	Checkpoint EventKind = iota
	// Failure is a crash or error that restarts the job from its last
	// checkpoint (Ads paper VI.A: temporary errors restart from the last
	// checkpoint; permanent errors additionally place a hold).
	Failure
	// Preemption is the job being stopped by the cluster (Ads paper VI.B). It
	// loses work since the last checkpoint exactly like a Failure; with a
	// preemption notice the job commits a checkpoint first, so it loses none.
	Preemption
)

var eventNames = [...]string{Checkpoint: "checkpoint", Failure: "failure", Preemption: "preemption"}

func (k EventKind) String() string {
	if k < 0 || int(k) >= len(eventNames) {
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
	return eventNames[k]
}

// MarshalText writes the event kind's name.
func (k EventKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(eventNames) {
		return nil, fmt.Errorf("goodput: no such event kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText is the inverse of MarshalText.
func (k *EventKind) UnmarshalText(b []byte) error {
	v, ok := parseEventKind(string(b))
	if !ok {
		return fmt.Errorf("goodput: unknown event kind %q", b)
	}
	*k = v
	return nil
}

// parseEventKind is the inverse of EventKind.String.
func parseEventKind(s string) (EventKind, bool) {
	for i, n := range eventNames {
		if n == s {
			return EventKind(i), true
		}
	}
	return 0, false
}

// Capacity is the fleet: Chips chips over [Start, End). It is the denominator
// of the fleet's Scheduling Goodput.
type Capacity struct {
	Chips      int
	Start, End time.Time
}

// Allocation says that over [Start, End) the job requested Requested chips and
// held Held of them. Held == 0 is a queued job; 0 < Held < Requested is a
// partial allocation; Held == Requested is all-allocated. Outside every
// Allocation the job demanded nothing (finished, or on a training hold that
// released its chips).
type Allocation struct {
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Held      int       `json:"held"`
	Requested int       `json:"requested"`
}

// PhaseChange starts phase Phase at At; it lasts until the job's next change.
type PhaseChange struct {
	At    time.Time `json:"at"`
	Phase string    `json:"phase"`
}

// Interval is what a job's chips did over [Start, End). Category must be
// Recordable. For Productive, the interval's length is the actual device time
// of its steps and Ideal the time the same steps would take at the chips'
// peak (model FLOPs / peak FLOP/s), so 0 <= Ideal <= End-Start.
type Interval struct {
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end"`
	Category Category      `json:"category"`
	Ideal    time.Duration `json:"ideal_ns,omitempty"`
}

// Event is an instant in a job's life.
type Event struct {
	At   time.Time `json:"at"`
	Kind EventKind `json:"kind"`
}

// JobTimeline is everything recorded about one job. Slices need not be sorted.
// Its JSON form (snake_case, times in RFC 3339, categories and event kinds
// by name) is what History persists.
type JobTimeline struct {
	Job          string        `json:"job"`
	Allocations  []Allocation  `json:"allocations,omitempty"`
	PhaseChanges []PhaseChange `json:"phase_changes,omitempty"`
	Intervals    []Interval    `json:"intervals,omitempty"`
	Events       []Event       `json:"events,omitempty"`
}

// Timeline is the input of Compute: a fleet and its jobs.
type Timeline struct {
	Capacity Capacity
	Jobs     []JobTimeline
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidTimeline, fmt.Sprintf(format, args...))
}

// Validate checks that the timeline can be accounted for; the error wraps
// ErrInvalidTimeline. Compute calls it.
func (t Timeline) Validate() error {
	c := t.Capacity
	if c.Chips < 0 {
		return invalid("capacity of %d chips", c.Chips)
	}
	if c.End.Before(c.Start) {
		return invalid("capacity window ends before it starts")
	}
	in := func(s, e time.Time) bool { return !s.Before(c.Start) && !e.After(c.End) && !e.Before(s) }
	seen := map[string]bool{}
	// Chip-time is accumulated exactly in int64 chip-nanoseconds; bound every
	// sum Compute forms (capacity, and each job's demand) so none overflows.
	window := c.End.Sub(c.Start)
	budget := int64(math.MaxInt64)
	spend := func(chips int) bool {
		if chips == 0 || window == 0 {
			return true
		}
		if int64(chips) > budget/int64(window) {
			return false
		}
		budget -= int64(chips) * int64(window)
		return true
	}
	if !spend(c.Chips) {
		return invalid("capacity chip-time overflows int64 nanoseconds")
	}
	type change struct {
		at    time.Time
		delta int
	}
	var changes []change
	for _, j := range t.Jobs {
		if !validName(j.Job) {
			return invalid("job name %q: want non-empty, no spaces or '#', not %q", j.Job, allScope)
		}
		if seen[j.Job] {
			return invalid("job %q appears twice", j.Job)
		}
		seen[j.Job] = true
		allocs := sortedAllocations(j.Allocations)
		maxRequested := 0
		for i, a := range allocs {
			if !in(a.Start, a.End) {
				return invalid("job %q: allocation outside the capacity window or ending before it starts", j.Job)
			}
			if a.Requested <= 0 || a.Held < 0 || a.Held > a.Requested {
				return invalid("job %q: allocation %d/%d: need 0 <= held <= requested, requested > 0", j.Job, a.Held, a.Requested)
			}
			if a.Requested > c.Chips {
				return invalid("job %q requests %d chips, more than the fleet's %d", j.Job, a.Requested, c.Chips)
			}
			if i > 0 && a.Start.Before(allocs[i-1].End) {
				return invalid("job %q: overlapping allocations", j.Job)
			}
			maxRequested = max(maxRequested, a.Requested)
			changes = append(changes, change{a.Start, a.Held}, change{a.End, -a.Held})
		}
		if !spend(maxRequested) {
			return invalid("job %q: demanded chip-time overflows int64 nanoseconds", j.Job)
		}
		for _, p := range j.PhaseChanges {
			if !validName(p.Phase) {
				return invalid("job %q: phase name %q: want non-empty, no spaces or '#', not %q", j.Job, p.Phase, allScope)
			}
			if !in(p.At, p.At) {
				return invalid("job %q: phase change outside the capacity window", j.Job)
			}
		}
		ivs := sortedIntervals(j.Intervals)
		for i, iv := range ivs {
			if !in(iv.Start, iv.End) {
				return invalid("job %q: %s interval outside the capacity window or ending before it starts", j.Job, iv.Category)
			}
			if !iv.Category.Recordable() {
				return invalid("job %q: %s cannot be recorded; it is derived", j.Job, iv.Category)
			}
			if iv.Category != Productive && iv.Ideal != 0 {
				return invalid("job %q: ideal time on a %s interval", j.Job, iv.Category)
			}
			if iv.Ideal < 0 || iv.Ideal > iv.End.Sub(iv.Start) {
				// An ideal above the device time means the FLOP count or the
				// peak is wrong; PG would exceed 1 (MPG paper §4: 100% is
				// the theoretical peak).
				return invalid("job %q: ideal %v outside [0, %v]", j.Job, iv.Ideal, iv.End.Sub(iv.Start))
			}
			if i > 0 && iv.Start.Before(ivs[i-1].End) {
				return invalid("job %q: overlapping intervals", j.Job)
			}
		}
		for _, e := range j.Events {
			if !in(e.At, e.At) {
				return invalid("job %q: %s event outside the capacity window", j.Job, e.Kind)
			}
			if e.Kind < Checkpoint || e.Kind > Preemption {
				return invalid("job %q: unknown event kind %d", j.Job, int(e.Kind))
			}
		}
	}
	// Releases sort before acquisitions at the same instant, so a chip handed
	// from one job to another at t is not counted twice.
	slices.SortFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	held := 0
	for _, ch := range changes {
		held += ch.delta
		if held > c.Chips {
			return invalid("jobs hold %d chips at %v, capacity is %d", held, ch.at.Sub(c.Start), c.Chips)
		}
	}
	return nil
}

// validName keeps names writable in the text form and distinct from allScope,
// which labels aggregates in reports and metrics.
func validName(s string) bool { return plainName(s) && s != allScope }

func sortedAllocations(in []Allocation) []Allocation {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b Allocation) int { return a.Start.Compare(b.Start) })
	return out
}

func sortedIntervals(in []Interval) []Interval {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b Interval) int { return a.Start.Compare(b.Start) })
	return out
}

func sortedPhaseChanges(in []PhaseChange) []PhaseChange {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b PhaseChange) int { return a.At.Compare(b.At) })
	return out
}

func sortedEvents(in []Event) []Event {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}
