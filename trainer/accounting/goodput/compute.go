package goodput

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Breakdown is chip-seconds by Category, indexed by Category.
type Breakdown [NumCategories]float64

// Summary is the goodput of one scope: the fleet, a job, or either restricted
// to one phase. doc.go defines every field.
type Summary struct {
	// Phase is empty for a summary over all phases.
	Phase string `json:"phase,omitempty"`

	// SG, RG, PG and MPG are the ratios of the MPG paper §4; each is 0 when
	// its denominator is 0.
	SG  float64 `json:"scheduling_goodput"`
	RG  float64 `json:"runtime_goodput"`
	PG  float64 `json:"program_goodput"`
	MPG float64 `json:"mpg"`

	// CapacityChipSeconds is the fleet's chip-time: set on fleet summaries
	// only, where it is the SG denominator.
	CapacityChipSeconds float64 `json:"capacity_chip_seconds,omitempty"`
	// DemandChipSeconds is requested chips × time: the SG denominator of a
	// job or phase, which has no capacity of its own.
	DemandChipSeconds float64 `json:"demand_chip_seconds"`
	// HeldChipSeconds is chip-time held at all, all-allocated or partial: what
	// an occupancy metric would count (MPG paper §6, Figure 16).
	HeldChipSeconds float64 `json:"held_chip_seconds"`
	// AllAllocatedChipSeconds is chip-time while holding every requested
	// chip: the SG numerator and RG denominator.
	AllAllocatedChipSeconds float64 `json:"all_allocated_chip_seconds"`
	// IdealChipSeconds is the ideal time of the committed productive steps
	// (model FLOPs at peak) × chips: the PG numerator.
	IdealChipSeconds float64 `json:"ideal_chip_seconds"`

	ChipSeconds Breakdown `json:"chip_seconds"`
}

// JobReport is one job's goodput, over all phases and per phase.
type JobReport struct {
	Job         string    `json:"job"`
	Checkpoints int       `json:"checkpoints"`
	Failures    int       `json:"failures"`
	Preemptions int       `json:"preemptions"`
	Total       Summary   `json:"total"`
	Phases      []Summary `json:"phases"`
}

// Report is the result of Compute. Jobs are sorted by name; phases are in the
// order they first demanded chips.
type Report struct {
	Fleet  Summary     `json:"fleet"`
	Phases []Summary   `json:"phases"`
	Jobs   []JobReport `json:"jobs"`
}

// acc accumulates one scope exactly, in chip-nanoseconds.
type acc struct {
	demand int64
	cat    [NumCategories]int64
	ideal  float64 // chip-nanoseconds; fractional because steps split pro rata
	first  time.Time
	set    bool // first is meaningful
}

func (a *acc) add(b *acc) {
	a.demand += b.demand
	for i := range a.cat {
		a.cat[i] += b.cat[i]
	}
	a.ideal += b.ideal
	if b.set && (!a.set || b.first.Before(a.first)) {
		a.first, a.set = b.first, true
	}
}

func (a *acc) allAllocated() int64 {
	var s int64
	for c := Productive; c <= Uncommitted; c++ {
		s += a.cat[c]
	}
	return s
}

func (a *acc) held() int64 { return a.allAllocated() + a.cat[PartialAllocation] }

// phased is a set of per-phase accumulators remembering first appearance.
type phased struct {
	by    map[string]*acc
	order []string
}

func (p *phased) get(phase string, at time.Time) *acc {
	if p.by == nil {
		p.by = map[string]*acc{}
	}
	a, ok := p.by[phase]
	if !ok {
		a = &acc{first: at, set: true}
		p.by[phase] = a
		p.order = append(p.order, phase)
	}
	return a
}

// sorted returns phase names by first demand, then name.
func (p *phased) sorted() []string {
	out := slices.Clone(p.order)
	slices.SortStableFunc(out, func(x, y string) int {
		if c := p.by[x].first.Compare(p.by[y].first); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	return out
}

// Compute classifies every chip-second of the timeline and returns SG, RG, PG
// and MPG with their breakdowns for the fleet, each phase, each job and each
// job's phases. It is a pure function of t; the error wraps
// ErrInvalidTimeline.
func Compute(t Timeline) (Report, error) {
	if err := t.Validate(); err != nil {
		return Report{}, err
	}
	// Empty slices, not nil, so the JSON report has [] rather than null.
	rep := Report{Phases: []Summary{}, Jobs: []JobReport{}}
	var fleetPhases phased
	var fleet acc
	for _, j := range t.Jobs {
		jp, err := classify(j, t.Capacity.Start)
		if err != nil {
			return Report{}, err
		}
		jr := JobReport{Job: j.Job, Phases: []Summary{}}
		for _, e := range j.Events {
			switch e.Kind {
			case Checkpoint:
				jr.Checkpoints++
			case Failure:
				jr.Failures++
			case Preemption:
				jr.Preemptions++
			}
		}
		var total acc
		for _, ph := range jp.sorted() {
			a := jp.by[ph]
			jr.Phases = append(jr.Phases, summarize(ph, a, a.demand))
			total.add(a)
			fleetPhases.get(ph, a.first).add(a)
		}
		jr.Total = summarize("", &total, total.demand)
		fleet.add(&total)
		rep.Jobs = append(rep.Jobs, jr)
	}
	slices.SortFunc(rep.Jobs, func(a, b JobReport) int { return cmp.Compare(a.Job, b.Job) })
	for _, ph := range fleetPhases.sorted() {
		// A phase is a segment of the fleet with no capacity of its own, so
		// its SG is against what it demanded (see doc.go).
		a := fleetPhases.by[ph]
		rep.Phases = append(rep.Phases, summarize(ph, a, a.demand))
	}
	capacity := int64(t.Capacity.Chips) * int64(t.Capacity.End.Sub(t.Capacity.Start))
	fleet.cat[Unallocated] = capacity - fleet.held()
	rep.Fleet = summarize("", &fleet, capacity)
	rep.Fleet.CapacityChipSeconds = float64(capacity) / nsPerSecond
	return rep, nil
}

// classify splits one job's time at every boundary of its records, so that
// within each slice the allocation, phase and activity are constant, and adds
// each slice's chip-time to its phase and category.
func classify(j JobTimeline, origin time.Time) (*phased, error) {
	allocs := sortedAllocations(j.Allocations)
	ivs := sortedIntervals(j.Intervals)
	phases := sortedPhaseChanges(j.PhaseChanges)
	events := sortedEvents(j.Events)

	var times []time.Time
	for _, a := range allocs {
		times = append(times, a.Start, a.End)
	}
	for _, iv := range ivs {
		times = append(times, iv.Start, iv.End)
	}
	for _, p := range phases {
		times = append(times, p.At)
	}
	for _, e := range events {
		times = append(times, e.At)
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.CompactFunc(times, time.Time.Equal)

	var out phased
	ai, ii, pi := 0, 0, 0
	for k := 0; k+1 < len(times); k++ {
		a, b := times[k], times[k+1]
		for ai < len(allocs) && !allocs[ai].End.After(a) {
			ai++
		}
		if ai == len(allocs) || allocs[ai].Start.After(a) {
			continue // no demand: the job neither asked for nor held chips
		}
		held, req := int64(allocs[ai].Held), int64(allocs[ai].Requested)
		for pi < len(phases) && !phases[pi].At.After(a) {
			pi++
		}
		phase := DefaultPhase
		if pi > 0 {
			phase = phases[pi-1].Phase
		}
		for ii < len(ivs) && !ivs[ii].End.After(a) {
			ii++
		}
		var iv *Interval
		if ii < len(ivs) && !ivs[ii].Start.After(a) {
			iv = &ivs[ii]
		}

		d := int64(b.Sub(a))
		s := out.get(phase, a)
		s.demand += req * d
		if held < req {
			// Not all-allocated: whatever the held chips do, a
			// bulk-synchronous job makes no progress (MPG paper §4, SG).
			if iv != nil && iv.Category == Productive {
				return nil, invalid("job %q: productive step at %v without all %d requested chips", j.Job, a.Sub(origin), req)
			}
			s.cat[PartialAllocation] += held * d
			s.cat[UnmetDemand] += (req - held) * d
			continue
		}
		cat := Idle
		if iv != nil {
			cat = iv.Category
		}
		if cat == Productive {
			cat = fate(events, b)
			if cat == Productive {
				s.ideal += float64(iv.Ideal) * float64(d) / float64(iv.End.Sub(iv.Start)) * float64(req)
			}
		}
		s.cat[cat] += req * d
	}
	return &out, nil
}

// fate says what became of productive work done before end: committed by
// the next checkpoint, lost if a failure or preemption comes first (the job
// restarts from the previous checkpoint, MPG paper §4, RG), or uncommitted if
// nothing comes. At one instant a checkpoint wins: a failure cannot undo a
// checkpoint committed at the same time.
func fate(events []Event, end time.Time) Category {
	i := sort.Search(len(events), func(i int) bool { return !events[i].At.Before(end) })
	if i == len(events) {
		return Uncommitted
	}
	for k := i; k < len(events) && events[k].At.Equal(events[i].At); k++ {
		if events[k].Kind == Checkpoint {
			return Productive
		}
	}
	return LostWork
}

func ratio(n, d float64) float64 {
	if d == 0 {
		return 0
	}
	return n / d
}

const nsPerSecond = float64(time.Second)

// summarize turns an accumulator into ratios and chip-seconds. The SG
// denominator is the fleet's capacity for the fleet and the demand for a job
// or phase.
func summarize(phase string, a *acc, sgDenominator int64) Summary {
	s := Summary{
		Phase:                   phase,
		DemandChipSeconds:       float64(a.demand) / nsPerSecond,
		HeldChipSeconds:         float64(a.held()) / nsPerSecond,
		AllAllocatedChipSeconds: float64(a.allAllocated()) / nsPerSecond,
		IdealChipSeconds:        a.ideal / nsPerSecond,
	}
	for c := range a.cat {
		s.ChipSeconds[c] = float64(a.cat[c]) / nsPerSecond
	}
	s.SG = ratio(float64(a.allAllocated()), float64(sgDenominator))
	s.RG = ratio(float64(a.cat[Productive]), float64(a.allAllocated()))
	s.PG = ratio(a.ideal, float64(a.cat[Productive]))
	s.MPG = s.SG * s.RG * s.PG
	return s
}

// String is a one-line summary for logs.
func (s Summary) String() string {
	return fmt.Sprintf("SG=%.4f RG=%.4f PG=%.4f MPG=%.4f", s.SG, s.RG, s.PG, s.MPG)
}
