package fleet

import (
	"container/heap"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
)

// SimConfig describes a fleet and its training jobs for Simulate. Zero
// fields take defaults (EnsureDefaults). Durations are simulated time.
type SimConfig struct {
	// Chips is the fleet's capacity. Default 1024.
	Chips int `json:"chips"`
	// Duration is the simulated time, from an empty fleet. Default 28 days
	// (long enough for the fleet to fill up; the paper's Table II averages
	// 7 days of a fleet in steady state).
	Duration Duration `json:"duration"`
	Seed     uint64   `json:"seed"`

	// ArrivalMean is the mean time between job arrivals (exponential).
	// Default 6h.
	ArrivalMean Duration `json:"arrival_mean"`
	// Slices and CaughtUpSlices are the slice sizes of the initial and
	// caught-up phases, drawn uniformly (paper III.A: 64-256 and 1-4).
	// Defaults {64, 128, 256} and {1, 2, 4}.
	Slices         []int `json:"slices"`
	CaughtUpSlices []int `json:"caught_up_slices"`
	// InitialMean is the mean training time the initial phase needs on
	// its slice, CaughtUpMean the mean length of the caught-up phase
	// (exponential). Defaults 36h and 48h.
	InitialMean  Duration `json:"initial_mean"`
	CaughtUpMean Duration `json:"caught_up_mean"`
	// HighPriorityShare of the jobs have priority 1 and may preempt jobs
	// of priority 0. Default 0.2.
	HighPriorityShare float64 `json:"high_priority_share"`
	// Clients are the teams whose jobs share the fleet: a job's client is
	// drawn uniformly from them (from a random stream of its own, so the
	// other draws do not change with them). Default {ads, feeds, ranking,
	// search}.
	Clients []string `json:"clients"`
	// HighPriorityClients, when set, decide a job's priority instead of
	// HighPriorityShare: a job of one of them has priority 1, any other
	// priority 0.
	HighPriorityClients []string `json:"high_priority_clients,omitempty"`

	// Epoch is the length of an epoch (paper III.C: "e.g., 1 hour").
	// Default 1h.
	Epoch Duration `json:"epoch"`
	// Initialization, Compile, Restore and Save are the times to bring a
	// slice up, compile, restore and write a checkpoint. Defaults 3m, 5m,
	// 3m, 2m.
	Initialization Duration `json:"initialization"`
	Compile        Duration `json:"compile"`
	Restore        Duration `json:"restore"`
	Save           Duration `json:"save"`
	// InputStall is the fraction of an epoch the slice waits for input.
	// Default 0.05.
	InputStall float64 `json:"input_stall"`
	// ProgramGoodput is the ideal over actual time of steps. Default 0.55.
	ProgramGoodput float64 `json:"program_goodput"`

	// FailureMTBF is the mean time between temporary errors of a running
	// job (restart from the last checkpoint, no hold). Default 24h.
	FailureMTBF Duration `json:"failure_mtbf"`
	// PermanentMTBF is the mean time between permanent errors (a
	// permanent hold, paper VI.A); HumanResponse the mean time until a
	// person releases it (debugging a diverging model takes days).
	// Defaults 36h and 120h.
	PermanentMTBF Duration `json:"permanent_mtbf"`
	HumanResponse Duration `json:"human_response"`
	// TransientProb is the chance that an epoch finds its data still
	// pending in SIG (a transient hold, lifted after TransientMean on
	// average). Defaults 0.04 and 8h.
	TransientProb float64  `json:"transient_prob"`
	TransientMean Duration `json:"transient_mean"`
	// HoldAfter mirrors the trainer's --hold-after (trainer/control,
	// "Stalls on SIG"): a job whose next epoch's data is pending keeps its
	// slice, stalled on input, for up to HoldAfter; if the data comes in
	// that time the epoch runs on the kept slice, otherwise the job goes
	// on a transient hold for the rest of the wait. Default 0: the hold
	// comes at once, as the trainer's default and the paper's.
	HoldAfter Duration `json:"hold_after"`
	// MaintenanceMTBF is the mean time between preemptions of a running
	// job by maintenance or releases (besides priority preemptions).
	// Default 72h.
	MaintenanceMTBF Duration `json:"maintenance_mtbf"`
	// NoticeMean is the mean preemption notice and DrainMean the mean time
	// to finish outstanding work (both exponential): a preempted epoch
	// commits when drain + Save fit in the notice (paper VI.B). Defaults
	// 12m and 5m.
	NoticeMean Duration `json:"notice_mean"`
	DrainMean  Duration `json:"drain_mean"`
	// DrainSaveTimes, when set, are the times from a preemption notice to
	// the committed checkpoint (drain and save) measured on real
	// preemptions of this system's trainer (BenchmarkPreemptionCommits,
	// Measured): a preempted epoch's drain and save take one of them,
	// drawn uniformly, instead of DrainMean and Save, and it commits when
	// that fits in the notice.
	DrainSaveTimes []Duration `json:"drain_save_times,omitempty"`
	// NoBackfill makes the scheduler's queue strict.
	NoBackfill bool `json:"no_backfill"`
}

// Duration is a time.Duration that reads and writes JSON as "1h30m".
type Duration time.Duration

// MarshalText writes the duration like time.Duration.String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// EnsureDefaults fills zero fields.
func (c *SimConfig) EnsureDefaults() {
	def := func(d *Duration, v time.Duration) {
		if *d <= 0 {
			*d = Duration(v)
		}
	}
	if c.Chips <= 0 {
		c.Chips = 1024
	}
	def(&c.Duration, 28*24*time.Hour)
	def(&c.ArrivalMean, 6*time.Hour)
	if len(c.Slices) == 0 {
		c.Slices = []int{64, 128, 256}
	}
	if len(c.CaughtUpSlices) == 0 {
		c.CaughtUpSlices = []int{1, 2, 4}
	}
	if len(c.Clients) == 0 {
		c.Clients = []string{"ads", "feeds", "ranking", "search"}
	}
	def(&c.InitialMean, 36*time.Hour)
	def(&c.CaughtUpMean, 48*time.Hour)
	if c.HighPriorityShare == 0 {
		c.HighPriorityShare = 0.2
	}
	def(&c.Epoch, time.Hour)
	def(&c.Initialization, 3*time.Minute)
	def(&c.Compile, 5*time.Minute)
	def(&c.Restore, 3*time.Minute)
	def(&c.Save, 2*time.Minute)
	if c.InputStall == 0 {
		c.InputStall = 0.05
	}
	if c.ProgramGoodput == 0 {
		c.ProgramGoodput = 0.55
	}
	def(&c.FailureMTBF, 24*time.Hour)
	def(&c.PermanentMTBF, 36*time.Hour)
	def(&c.HumanResponse, 120*time.Hour)
	if c.TransientProb == 0 {
		c.TransientProb = 0.04
	}
	def(&c.TransientMean, 8*time.Hour)
	def(&c.MaintenanceMTBF, 72*time.Hour)
	def(&c.NoticeMean, 12*time.Minute)
	def(&c.DrainMean, 5*time.Minute)
}

func (c *SimConfig) validate() error {
	for _, s := range slices.Concat(c.Slices, c.CaughtUpSlices) {
		if s <= 0 || s > c.Chips {
			return fmt.Errorf("fleet: slice of %d chips on a fleet of %d", s, c.Chips)
		}
	}
	if c.HoldAfter < 0 {
		return fmt.Errorf("fleet: hold_after %v is negative", time.Duration(c.HoldAfter))
	}
	for _, t := range c.DrainSaveTimes {
		if t <= 0 {
			return fmt.Errorf("fleet: drain and save time %v is not positive", time.Duration(t))
		}
	}
	if c.InputStall < 0 || c.InputStall >= 1 || c.ProgramGoodput <= 0 || c.ProgramGoodput > 1 ||
		c.TransientProb < 0 || c.TransientProb >= 1 || c.HighPriorityShare < 0 || c.HighPriorityShare > 1 {
		return fmt.Errorf("fleet: input_stall, transient_prob in [0,1), program_goodput in (0,1], high_priority_share in [0,1]")
	}
	return nil
}

// TableII is the Ads paper's Table II: the chips training, demanded by
// queued jobs, and demanded by jobs on a training hold, averaged over time.
type TableII struct {
	// As fractions of the fleet's capacity.
	Training, Queued, OnHold float64
	// Relative to Training (the paper's normalization: 1, 1.03, 2.49).
	QueuedPerTraining, OnHoldPerTraining float64
}

// SimResult is what Simulate measured.
type SimResult struct {
	Config  SimConfig
	Goodput goodput.Report
	TableII TableII
	// Jobs arrived, and those that finished both phases.
	Jobs, Finished int
	// Preemptions of running jobs; PreemptedEpochs those that cut an
	// epoch, PreemptedCommitted those whose early epoch end committed
	// (paper VII.G: 61%).
	Preemptions, PreemptedEpochs, PreemptedCommitted int
	Failures, PermanentHolds, TransientHolds         int
	// Stall is the fleet's input stall charged to causes by the stall
	// ledger, and the waits on SIG by client (stalls.go).
	Stall StallByCause
}

// ChipHours converts chip-seconds of the result's goodput report into
// simulated chip-hours (see RecordScale).
func ChipHours(reportChipSeconds float64) float64 { return reportChipSeconds * RecordScale / 3600 }

// CommittedFraction is PreemptedCommitted / PreemptedEpochs.
func (r SimResult) CommittedFraction() float64 {
	if r.PreemptedEpochs == 0 {
		return 0
	}
	return float64(r.PreemptedCommitted) / float64(r.PreemptedEpochs)
}

type evKind int

const (
	evArrive evKind = iota
	evStage
	evEpochEnd
	evSaved
	evInterrupt
	evPreemptDone
	evRequeue
	evDataReady // the data a stalled job waited for is there
	evStallHold // a stalled job has waited hold_after: it holds
)

type interruptKind int

const (
	intFailure interruptKind = iota
	intPermanent
	intMaintenance
)

type event struct {
	at     time.Duration
	seq    uint64
	kind   evKind
	job    *simJob
	gen    uint64
	intr   interruptKind
	commit bool
	save   time.Duration // evPreemptDone: the final part of the drain and save that wrote the checkpoint
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type stage struct {
	cat goodput.Category
	d   time.Duration
}

// simJob is one training job of the simulation.
type simJob struct {
	name      string
	index     int // arrival order
	client    string
	priority  int
	caughtUp  bool
	slice     int
	remaining time.Duration // productive step time left in the phase
	// gen invalidates the job's scheduled events when its run is cut
	// short (a failure, a hold, a preemption).
	gen       uint64
	rec       *goodput.JobRecorder
	restore   bool // the next start restores a checkpoint
	stages    []stage
	open      bool          // a recorded interval is open
	epochAt   time.Duration // start of the running epoch
	inEpoch   bool
	saving    bool
	pending   time.Duration // productive time of the epoch being saved
	preempted bool
	done      bool
	// The stall ledger's records (stalls.go): stalling from stallFrom,
	// the open SIG wait's index in led's waits (-1: none), the epochs
	// whose data was pending.
	led       jobLedger
	stalling  bool
	stallFrom time.Duration
	sigWait   int
	epochs    int
	holdRest  time.Duration // evStallHold: the rest of the wait, on hold
}

type sim struct {
	cfg   SimConfig
	r     *rand.Rand
	cr    *rand.Rand // clients' draws
	start time.Time
	now   time.Duration
	q     eventQueue
	seq   uint64
	sched *Scheduler
	rec   *goodput.Recorder
	res   SimResult
	jobs  map[string]*simJob
	// Table II accumulators: chips × nanoseconds of training, queued and
	// on-hold demand.
	lastU  Usage
	lastAt time.Duration
	acc    [3]float64
	err    error
}

// Simulate runs a fleet of training jobs in virtual time: jobs arrive, queue
// for whole slices, train epochs with checkpoints, fail and restart from
// their last checkpoint, go on permanent holds (until a person releases
// them) and transient holds (until their data is ready), releasing their
// chips either way, are preempted by higher-priority jobs and by maintenance
// with a notice (committing an early epoch end when the drain fits the
// notice), and move from initial to caught-up training on a smaller slice.
// It returns the fleet's goodput (MPG paper) and the Ads paper's Table II.
// Deterministic for a seed.
func Simulate(cfg SimConfig) (SimResult, error) {
	cfg.EnsureDefaults()
	if err := cfg.validate(); err != nil {
		return SimResult{}, err
	}
	s := &sim{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, 0x666c656574)), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		sched: NewScheduler(cfg.Chips), jobs: map[string]*simJob{},
		cr: rand.New(rand.NewPCG(cfg.Seed, 0x636c69656e74))}
	s.sched.NoBackfill = cfg.NoBackfill
	s.rec = goodput.NewRecorder(cfg.Chips, s.start)
	s.res.Config = cfg
	s.push(&event{at: 0, kind: evArrive})
	end := time.Duration(cfg.Duration)
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(*event)
		if e.at > end {
			break
		}
		s.advance(e.at)
		s.handle(e)
		s.lastU = s.sched.Usage()
		if s.err != nil {
			return s.res, fmt.Errorf("fleet: simulation at %v: %w", s.now, s.err)
		}
	}
	s.advance(end)
	names := slices.Sorted(maps.Keys(s.jobs))
	for _, n := range names {
		// A stall open at the end counts up to it, as in the goodput
		// report; an epoch under way is in neither (its steps and stall
		// are recorded when it ends).
		j := s.jobs[n]
		s.stallEnd(j, end)
		s.flushLedger(j)
	}
	rep, err := s.rec.Report(s.t(end))
	if err != nil {
		return s.res, err
	}
	s.res.Goodput = rep
	s.res.Stall.InputStall = ChipHours(rep.Fleet.ChipSeconds[goodput.InputStall])
	total := float64(cfg.Chips) * float64(end)
	s.res.TableII = TableII{Training: s.acc[0] / total, Queued: s.acc[1] / total, OnHold: s.acc[2] / total}
	if s.acc[0] > 0 {
		s.res.TableII.QueuedPerTraining = s.acc[1] / s.acc[0]
		s.res.TableII.OnHoldPerTraining = s.acc[2] / s.acc[0]
	}
	return s.res, nil
}

func (s *sim) push(e *event) {
	s.seq++
	e.seq = s.seq
	if e.job != nil && e.gen == 0 {
		e.gen = e.job.gen
	}
	heap.Push(&s.q, e)
}

// RecordScale divides simulated time before it goes into the goodput
// recorder: months of a large fleet in chip-nanoseconds would overflow
// goodput's exact int64 arithmetic, so the recorder sees one nanosecond per
// simulated microsecond. Ratios (SG, RG, PG, MPG) do not change; the
// report's chip-seconds are simulated chip-milliseconds (ChipHours converts).
const RecordScale = 1000

func (s *sim) t(d time.Duration) time.Time { return s.start.Add(d / RecordScale) }

// advance accumulates Table II's usage up to at.
func (s *sim) advance(at time.Duration) {
	dt := float64(at - s.lastAt)
	s.acc[0] += float64(s.lastU.Training) * dt
	s.acc[1] += float64(s.lastU.Queued) * dt
	s.acc[2] += float64(s.lastU.OnHold) * dt
	s.lastAt, s.now = at, at
}

func (s *sim) exp(mean Duration) time.Duration {
	return time.Duration(s.r.ExpFloat64() * float64(mean))
}

func (s *sim) check(err error) {
	if err != nil && s.err == nil {
		s.err = err
	}
}

func (s *sim) handle(e *event) {
	if e.kind == evArrive {
		s.arrive()
		return
	}
	j := e.job
	if e.gen != j.gen || j.done {
		return // the run this event belonged to was cut short
	}
	switch e.kind {
	case evRequeue:
		s.request(j)
	case evStage:
		s.nextStage(j)
	case evEpochEnd:
		j.pending = s.recordEpoch(j, s.now)
		j.saving = true
		s.begin(j, goodput.CheckpointSave)
		s.push(&event{at: s.now + time.Duration(s.cfg.Save), kind: evSaved, job: j})
	case evSaved:
		s.end(j, s.now)
		s.check(j.rec.CheckpointCommitted(s.t(s.now)))
		j.saving = false
		j.remaining -= j.pending
		s.epochStart(j)
	case evInterrupt:
		s.interrupt(j, e.intr)
	case evPreemptDone:
		s.preemptDone(j, e.commit, e.save)
	case evDataReady:
		s.end(j, s.now)
		s.runEpoch(j)
	case evStallHold:
		s.res.TransientHolds++
		s.hold(j, j.holdRest)
	}
}

func (s *sim) arrive() {
	s.res.Jobs++
	j := &simJob{name: fmt.Sprintf("job%03d", s.res.Jobs), index: s.res.Jobs, slice: s.cfg.Slices[s.r.IntN(len(s.cfg.Slices))],
		remaining: s.exp(s.cfg.InitialMean) + 10*time.Minute, gen: 1, sigWait: -1}
	j.client = s.cfg.Clients[s.cr.IntN(len(s.cfg.Clients))]
	j.led.chips = j.slice
	if s.r.Float64() < s.cfg.HighPriorityShare {
		j.priority = 1
	}
	if len(s.cfg.HighPriorityClients) > 0 {
		j.priority = 0
		if slices.Contains(s.cfg.HighPriorityClients, j.client) {
			j.priority = 1
		}
	}
	j.rec = s.rec.Job(j.name)
	s.jobs[j.name] = j
	s.request(j)
	s.push(&event{at: s.now + s.exp(s.cfg.ArrivalMean), kind: evArrive})
}

// request queues j for its slice; a high-priority job that does not fit
// preempts lower-priority ones (with a notice).
func (s *sim) request(j *simJob) {
	s.check(j.rec.Allocate(s.t(s.now), 0, j.slice))
	started, err := s.sched.Request(j.name, j.slice, j.priority)
	s.check(err)
	s.startAll(started)
	if s.sched.State(j.name) == Queued && j.priority > 0 {
		for _, v := range s.sched.Victims(j.slice, j.priority) {
			if vj := s.jobs[v]; vj != nil && !vj.preempted {
				s.preempt(vj)
			}
		}
	}
}

func (s *sim) startAll(names []string) {
	for _, n := range names {
		s.startJob(s.jobs[n])
	}
}

// startJob brings up a granted slice: initialization, compile, and a
// checkpoint restore when the job has trained before.
func (s *sim) startJob(j *simJob) {
	s.check(j.rec.Allocate(s.t(s.now), j.slice, j.slice))
	j.gen++
	j.stages = []stage{{goodput.Initialization, time.Duration(s.cfg.Initialization)}, {goodput.Compile, time.Duration(s.cfg.Compile)}}
	if j.restore {
		j.stages = append(j.stages, stage{goodput.CheckpointRestore, time.Duration(s.cfg.Restore)})
	}
	s.nextStage(j)
}

func (s *sim) begin(j *simJob, c goodput.Category) {
	s.check(j.rec.Begin(s.t(s.now), c))
	j.open = true
}

func (s *sim) end(j *simJob, at time.Duration) {
	s.stallEnd(j, at)
	if j.open {
		s.check(j.rec.End(s.t(at)))
		j.open = false
	}
}

func (s *sim) nextStage(j *simJob) {
	s.end(j, s.now)
	if len(j.stages) == 0 {
		s.epochStart(j)
		return
	}
	st := j.stages[0]
	j.stages = j.stages[1:]
	s.begin(j, st.cat)
	s.push(&event{at: s.now + st.d, kind: evStage, job: j})
}

// release gives j's slice back (Allocate 0/0 now).
func (s *sim) release(j *simJob) {
	s.check(j.rec.Allocate(s.t(s.now), 0, 0))
	s.startAll(s.sched.Release(j.name))
}

// epochStart begins the next epoch, or ends the phase.
func (s *sim) epochStart(j *simJob) {
	if j.remaining <= 0 {
		s.release(j)
		if j.caughtUp {
			j.done = true
			s.res.Finished++
			return
		}
		// Initial training is over: caught up, on a small slice (paper
		// III.A).
		s.check(j.rec.SetPhase(s.t(s.now), "caught-up"))
		j.caughtUp = true
		s.flushLedger(j)
		j.slice = s.cfg.CaughtUpSlices[s.r.IntN(len(s.cfg.CaughtUpSlices))]
		j.led.chips = j.slice
		j.remaining = s.exp(s.cfg.CaughtUpMean) + 10*time.Minute
		j.restore = true
		j.gen++
		s.request(j)
		return
	}
	if s.r.Float64() < s.cfg.TransientProb {
		// Paper VI.A: the next epoch's data is still pending in SIG: a
		// transient hold releases the chips until the data is there —
		// after hold_after stalled on the kept slice, if set.
		wait := s.exp(s.cfg.TransientMean)
		s.sigWait(j, wait)
		if ha := time.Duration(s.cfg.HoldAfter); ha > 0 {
			s.begin(j, goodput.InputStall)
			s.stallBegin(j)
			if wait <= ha {
				s.push(&event{at: s.now + wait, kind: evDataReady, job: j})
			} else {
				j.holdRest = wait - ha
				s.push(&event{at: s.now + ha, kind: evStallHold, job: j})
			}
			return
		}
		s.res.TransientHolds++
		s.hold(j, wait)
		return
	}
	s.runEpoch(j)
}

// runEpoch starts an epoch whose data is there.
func (s *sim) runEpoch(j *simJob) {
	need := time.Duration(float64(j.remaining) / (1 - s.cfg.InputStall))
	length := min(time.Duration(s.cfg.Epoch), need+1)
	j.epochAt, j.inEpoch = s.now, true
	next, kind := length, evEpochEnd
	var intr interruptKind
	for k, mtbf := range []Duration{s.cfg.FailureMTBF, s.cfg.PermanentMTBF, s.cfg.MaintenanceMTBF} {
		if d := s.exp(mtbf); d < next {
			next, kind, intr = d, evInterrupt, interruptKind(k)
		}
	}
	s.push(&event{at: s.now + next, kind: kind, job: j, intr: intr})
}

// hold puts j on a training hold for d: its chips go back to the fleet
// while it still demands them.
func (s *sim) hold(j *simJob, d time.Duration) {
	s.end(j, s.now)
	s.check(j.rec.Allocate(s.t(s.now), 0, 0))
	j.restore, j.inEpoch = true, false
	j.gen++
	s.startAll(s.sched.Hold(j.name, j.slice))
	s.push(&event{at: s.now + d, kind: evRequeue, job: j})
}

// recordEpoch records the epoch's steps and input stalls up to until and
// returns its productive time.
func (s *sim) recordEpoch(j *simJob, until time.Duration) time.Duration {
	j.inEpoch = false
	wall := until - j.epochAt
	steps := time.Duration(float64(wall) * (1 - s.cfg.InputStall))
	if steps > 0 {
		s.check(j.rec.Step(s.t(j.epochAt), s.t(j.epochAt+steps), time.Duration(float64(steps)*s.cfg.ProgramGoodput)/RecordScale))
	}
	if wall > steps {
		s.check(j.rec.Begin(s.t(j.epochAt+steps), goodput.InputStall))
		s.check(j.rec.End(s.t(until)))
		s.readerStall(j, j.epochAt+steps, until)
	}
	return steps
}

func (s *sim) interrupt(j *simJob, k interruptKind) {
	switch k {
	case intFailure:
		// A temporary error: restart from the last checkpoint, keeping the
		// chips (paper VI.A: no hold).
		s.recordEpoch(j, s.now)
		s.check(j.rec.Failure(s.t(s.now)))
		s.res.Failures++
		j.gen++
		j.stages = []stage{{goodput.CheckpointRestore, time.Duration(s.cfg.Restore)}}
		s.nextStage(j)
	case intPermanent:
		s.recordEpoch(j, s.now)
		s.check(j.rec.Failure(s.t(s.now)))
		s.res.PermanentHolds++
		s.hold(j, s.exp(s.cfg.HumanResponse))
	case intMaintenance:
		s.preempt(j)
	}
}

// preempt gives j a notice (paper VI.B): it finishes its outstanding work
// and checkpoints if the drain and the save fit in the notice, and loses
// the epoch otherwise; either way it then leaves its slice and queues again.
func (s *sim) preempt(j *simJob) {
	if s.sched.State(j.name) != Running || j.preempted {
		return
	}
	s.res.Preemptions++
	j.preempted = true
	notice := s.exp(s.cfg.NoticeMean)
	save := time.Duration(s.cfg.Save)
	var need time.Duration // drain and save
	if n := len(s.cfg.DrainSaveTimes); n > 0 {
		need = time.Duration(s.cfg.DrainSaveTimes[s.r.IntN(n)])
	} else {
		need = s.exp(s.cfg.DrainMean) + save
	}
	j.gen++
	switch {
	case j.inEpoch:
		s.res.PreemptedEpochs++
		if need <= notice {
			// A measured drain and save shorter than Save saved for all
			// of it.
			s.push(&event{at: s.now + need, kind: evPreemptDone, job: j, commit: true, save: min(save, need)})
		} else {
			s.push(&event{at: s.now + notice, kind: evPreemptDone, job: j})
		}
	case j.saving:
		// The checkpoint being written commits if it fits in the notice.
		s.push(&event{at: s.now + min(notice, save), kind: evPreemptDone, job: j, commit: save <= notice, save: save})
	default:
		s.push(&event{at: s.now, kind: evPreemptDone, job: j})
	}
}

func (s *sim) preemptDone(j *simJob, commit bool, save time.Duration) {
	switch {
	case j.inEpoch && commit:
		s.res.PreemptedCommitted++
		j.pending = s.recordEpoch(j, s.now-save)
		s.check(j.rec.Begin(s.t(s.now-save), goodput.CheckpointSave))
		j.open = true
		fallthrough
	case j.saving && commit:
		s.end(j, s.now)
		s.check(j.rec.CheckpointCommitted(s.t(s.now)))
		j.remaining -= j.pending
	case j.inEpoch:
		s.recordEpoch(j, s.now)
		s.check(j.rec.Preemption(s.t(s.now)))
	default:
		s.end(j, s.now)
		s.check(j.rec.Preemption(s.t(s.now)))
	}
	j.inEpoch, j.saving, j.preempted, j.open = false, false, false, false
	j.restore = true
	s.release(j)
	j.gen++
	s.request(j)
}
