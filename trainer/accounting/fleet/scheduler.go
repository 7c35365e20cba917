package fleet

import (
	"fmt"
	"sort"
)

// JobState is where a job stands with the scheduler.
type JobState int

// Job states.
const (
	// Queued: ready to run, waiting for a whole slice.
	Queued JobState = iota + 1
	// Running: holds its slice.
	Running
	// OnHold: on a training hold; demands its slice but holds nothing.
	OnHold
)

func (s JobState) String() string {
	switch s {
	case Queued:
		return "queued"
	case Running:
		return "running"
	case OnHold:
		return "on-hold"
	}
	return "none"
}

type entry struct {
	name     string
	chips    int
	priority int
	seq      uint64 // arrival order within a priority
	state    JobState
}

// Scheduler allocates whole slices of a fleet of chips to jobs: a job runs
// only when all of its chips are free at once (a bulk-synchronous job
// cannot use part of a slice: MPG paper §4, Scheduling Goodput). Waiting
// jobs form a queue ordered by priority, then arrival; a job that does not
// fit does not block smaller jobs of its own priority behind it
// (backfilling, unless NoBackfill is set), but no job starts while one of
// higher priority waits, so chips freed for a high-priority job (by
// preempting others) go to it. A job on a training hold gives its chips back (Ads
// paper VI.A) and keeps demanding them, which is what Table II's "on hold"
// column counts.
//
// It is pure and not safe for concurrent use; Shared wraps it for real
// jobs, Simulate drives it in virtual time.
type Scheduler struct {
	capacity int
	free     int
	seq      uint64
	jobs     map[string]*entry
	// NoBackfill makes the queue strict: nothing starts while the job at
	// its head does not fit.
	NoBackfill bool
}

// NewScheduler returns a scheduler of a fleet of capacity chips.
func NewScheduler(capacity int) *Scheduler {
	return &Scheduler{capacity: capacity, free: capacity, jobs: map[string]*entry{}}
}

// Capacity is the fleet's size.
func (s *Scheduler) Capacity() int { return s.capacity }

// Free is the number of chips no job holds.
func (s *Scheduler) Free() int { return s.free }

// State returns a job's state (0 when unknown).
func (s *Scheduler) State(job string) JobState {
	if e := s.jobs[job]; e != nil {
		return e.state
	}
	return 0
}

// Request queues job for a slice of chips at priority (higher first) and
// returns the jobs that start, in order. A job already queued or running
// keeps its place; one on hold is queued again (its hold was lifted).
func (s *Scheduler) Request(job string, chips, priority int) ([]string, error) {
	if chips <= 0 || chips > s.capacity {
		return nil, fmt.Errorf("fleet: job %s asks for %d chips of a fleet of %d", job, chips, s.capacity)
	}
	e := s.jobs[job]
	switch {
	case e == nil:
		s.seq++
		e = &entry{name: job, chips: chips, priority: priority, seq: s.seq, state: Queued}
		s.jobs[job] = e
	case e.state == OnHold:
		s.seq++
		e.chips, e.priority, e.seq, e.state = chips, priority, s.seq, Queued
	case e.state == Queued:
		e.chips, e.priority = chips, priority
	}
	return s.schedule(), nil
}

// Release gives back job's chips (it finished, or was preempted) or drops it
// from the queue, and returns the jobs that start.
func (s *Scheduler) Release(job string) []string {
	e := s.jobs[job]
	if e == nil {
		return nil
	}
	if e.state == Running {
		s.free += e.chips
	}
	delete(s.jobs, job)
	return s.schedule()
}

// Hold puts job on a training hold: its chips go back to the fleet, its
// demand stays (on hold). It returns the jobs that start.
func (s *Scheduler) Hold(job string, chips int) []string {
	e := s.jobs[job]
	if e == nil {
		s.seq++
		e = &entry{name: job, chips: chips, seq: s.seq}
		s.jobs[job] = e
	}
	if e.state == Running {
		s.free += e.chips
	}
	e.state = OnHold
	if chips > 0 {
		e.chips = chips
	}
	return s.schedule()
}

// queue returns the queued jobs in scheduling order.
func (s *Scheduler) queue() []*entry {
	var q []*entry
	for _, e := range s.jobs {
		if e.state == Queued {
			q = append(q, e)
		}
	}
	sort.Slice(q, func(i, j int) bool {
		if q[i].priority != q[j].priority {
			return q[i].priority > q[j].priority
		}
		return q[i].seq < q[j].seq
	})
	return q
}

func (s *Scheduler) schedule() []string {
	var started []string
	blocked, blockedPrio := false, 0
	for _, e := range s.queue() {
		if blocked && (s.NoBackfill || e.priority < blockedPrio) {
			break
		}
		if e.chips <= s.free {
			s.free -= e.chips
			e.state = Running
			started = append(started, e.name)
			continue
		}
		if !blocked {
			blocked, blockedPrio = true, e.priority
		}
	}
	return started
}

// Victims returns the running jobs of lower priority than priority whose
// chips, taken lowest priority and latest arrival first, would let a job
// of chips chips start; nil if even all of them would not.
func (s *Scheduler) Victims(chips, priority int) []string {
	if chips <= s.free {
		return nil
	}
	var run []*entry
	for _, e := range s.jobs {
		if e.state == Running && e.priority < priority {
			run = append(run, e)
		}
	}
	sort.Slice(run, func(i, j int) bool {
		if run[i].priority != run[j].priority {
			return run[i].priority < run[j].priority
		}
		return run[i].seq > run[j].seq
	})
	free := s.free
	var out []string
	for _, e := range run {
		out = append(out, e.name)
		free += e.chips
		if free >= chips {
			return out
		}
	}
	return nil
}

// Usage is the chips of the fleet by state: held by running jobs, demanded
// by queued jobs, demanded by jobs on hold (Ads paper Table II).
type Usage struct {
	Training, Queued, OnHold int
}

// Usage returns the current usage.
func (s *Scheduler) Usage() Usage {
	var u Usage
	for _, e := range s.jobs {
		switch e.state {
		case Running:
			u.Training += e.chips
		case Queued:
			u.Queued += e.chips
		case OnHold:
			u.OnHold += e.chips
		}
	}
	return u
}
