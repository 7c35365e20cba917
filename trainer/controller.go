package trainer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/model"
)

// Controller is a training job's controller (paper III.C): it runs the
// control.Machine, executes its actions — host sessions, steps on the
// emulated slice, checkpoints, chips, holds, preemption — and accounts for
// goodput. One goroutine (run) owns the machine and all state it decides
// on; slow work runs in goroutines that report back to it as messages.
type Controller struct {
	cfg    ControllerConfig
	log    *slog.Logger
	m      *control.Machine
	sig    sigv1.SIGClient
	fstats sigv1.FeatureStatsClient // nil: no statistics store
	cks    *checkpoint.Store

	inbox       chan msg
	stopped     chan struct{} // closed when Run returns
	ctx         context.Context
	incarnation string
	started     time.Time

	// Owned by the run goroutine.
	sessions map[string]*session
	payloads map[hostSeq]*pendingBatch
	sol      *solution
	feats    model.Features
	featsOK  bool
	manifest *checkpoint.Manifest
	// The ledgers of the last committed checkpoint and of the running
	// attempt's steps (nil when none runs).
	committedLedger *checkpoint.Ledger
	attemptLedger   *checkpoint.Ledger
	open            *goodput.Category
	acquireCancel   context.CancelFunc
	watchCancel     context.CancelFunc
	// stepsStarted counts the steps this process handed to the device:
	// fault injection and FDP sampling count by it.
	stepsStarted uint64
	nanDone      bool
	exit         *exitInfo
	// preemptDeadline bounds checkpoint writes after a job-wide notice: a
	// manifest must not become durable after the job would be stopped.
	preemptDeadline time.Time
	holdLog         []HoldRecord
	stats           runStats
	// Goodput across restarts (history.go): whether the earlier
	// incarnations' history was restored (or found absent), the journal
	// write running (nil: none), whether another must follow it, and when
	// the last one was taken.
	gpRestored   bool
	journalDone  chan struct{}
	journalAgain bool
	lastJournal  time.Time
	// Feedback-directed partitioning (paper V.C): the features' keys in
	// the statistics store (component keys, per sparse input), the
	// statistics read at setup, the plans compiled, what was published.
	featKeys  []string
	featStats map[string]fdp.Statistics
	plans     []PlanReport
	fdpRep    FDPReport

	// The model is the emulated slice's state; device operations (restore,
	// compile, step, checkpoint) take deviceMu, so an operation still
	// running for an aborted attempt finishes before the next one starts.
	// deviceGen counts restores: a step decided before one must not run
	// after it, on the restored model (its attempt was aborted, and the
	// retry trains its batch again); it waits for deviceMu like the
	// restore, so the mutex alone does not order them.
	deviceMu  sync.Mutex
	deviceGen atomic.Uint64
	model     *model.Model
	prof      *fdp.Profiler // profiles sampled batches; under deviceMu

	rec *goodput.Recorder
	jr  *goodput.JobRecorder

	// snapshot is the state the RPCs read, refreshed after every event.
	snapMu sync.Mutex
	snap   snapshot
}

// hostSeq names a batch: host, attempt and the host's sequence number in
// the attempt (which starts at 0 in every attempt, so a late batch of an
// earlier attempt must not take the place of the running one's).
type hostSeq struct {
	host    string
	attempt uint64
	seq     uint64
}

type pendingBatch struct {
	ex   *model.Examples
	segs []buffer.Segment
}

type exitInfo struct {
	reason    string
	committed bool
}

// msg is what the run goroutine receives.
type msg struct {
	ev       control.Event
	sess     *session                  // with EvHostJoined
	batch    *pendingBatch             // with EvBatch
	step     *stepResult               // with EvStepDone
	sol      *solution                 // with EvBlocks, EvSetupDone
	model    *model.Model              // with EvSetupDone
	manifest *checkpoint.Manifest      // with EvRestored, EvCheckpointDone
	ledger   *checkpoint.Ledger        // with EvModelRestored, EvCheckpointDone
	stats    map[string]fdp.Statistics // with EvSetupDone: by feature key
	keys     []string                  // with EvSetupDone: feature key per sparse input
	plan     *PlanReport               // with EvCompiled
	history  *restoredHistory          // with EvRestored: goodput to restore
	fn       func()                    // run on the loop
}

// NewController checks cfg and returns a controller; Run starts it.
func NewController(cfg ControllerConfig) (*Controller, error) {
	cfg.EnsureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	c := &Controller{cfg: cfg, log: cfg.Logger.With("job", cfg.Job), inbox: make(chan msg, 4096),
		stopped: make(chan struct{}), ctx: context.Background(), sessions: map[string]*session{}, payloads: map[hostSeq]*pendingBatch{}, committedLedger: &checkpoint.Ledger{}}
	c.incarnation = newIncarnation()
	c.m = control.New(cfg.machineConfig())
	var err error
	if c.cks, err = checkpoint.NewStore(cfg.Store, cfg.Pipeline); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	c.sig, c.fstats = cfg.SIG, cfg.FeatureStats
	if c.sig == nil {
		cc, err := cli.Dial(cfg.SigdAddr, cfg.Token, cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("trainer: sigd: %w", err)
		}
		c.sig = sigv1.NewSIGClient(cc)
		if c.fstats == nil {
			c.fstats = sigv1.NewFeatureStatsClient(cc)
		}
	}
	c.started = cfg.Clock.Now()
	c.rec = cfg.Recorder
	if c.rec == nil {
		c.rec = goodput.NewRecorder(cfg.FleetChips, c.started)
	}
	c.jr = c.rec.Job(cfg.Job)
	if cfg.Registry != nil {
		if err := c.registerMetrics(cfg.Registry); err != nil {
			return nil, fmt.Errorf("trainer: metrics: %w", err)
		}
	}
	c.refreshSnapshot()
	return c, nil
}

func (c *Controller) now() time.Time { return c.cfg.Clock.Now() }

// newIncarnation names one run of a controller or one session of a host,
// so that messages of an earlier run are told apart.
func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// post sends a message to the run goroutine (from any goroutine); after
// Run returned it drops it.
func (c *Controller) post(m msg) {
	select {
	case c.inbox <- m:
	case <-c.stopped:
	}
}

// Preempt delivers a preemption notice (paper VI.B): the job (scope
// control.ScopeJob or "") or one host will be stopped after notice. It
// returns the deadline.
func (c *Controller) Preempt(notice time.Duration, scope string) time.Time {
	d := c.now().Add(notice)
	c.post(msg{ev: control.Event{Kind: control.EvPreempt, Deadline: d, Scope: scope}})
	return d
}

// Run runs the controller until the job exits (done, or preempted) or ctx
// ends, and returns its report.
func (c *Controller) Run(ctx context.Context) (Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer close(c.stopped)
	c.ctx = ctx
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cfg.Tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				select {
				case c.inbox <- msg{ev: control.Event{Kind: control.EvTick}}:
				default:
				}
			}
		}
	}()
	if c.cfg.StatusInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.reportStatusLoop(ctx)
		}()
	}
	c.handle(msg{ev: control.Event{Kind: control.EvStart}})
	var err error
loop:
	for c.exit == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case m := <-c.inbox:
			c.handle(m)
		}
	}
	end := c.now()
	if c.open != nil {
		_ = c.jr.End(end)
		c.open = nil
	}
	if c.acquireCancel != nil {
		c.acquireCancel()
	}
	if c.watchCancel != nil {
		c.watchCancel()
	}
	if c.m.Chips() > 0 {
		c.cfg.Allocator.Release(c.cfg.Job)
		_ = c.jr.Allocate(end, 0, 0)
	}
	for _, s := range c.sessions {
		reason := "controller stopped"
		if c.exit != nil {
			reason = c.exit.reason
		}
		s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Exit{Exit: &trainerv1.Exit{Reason: reason}}})
		s.closeAfterFlush()
	}
	cancel()
	wg.Wait()
	// Let the device finish (a checkpoint write cut off by the exit).
	c.deviceMu.Lock()
	c.deviceMu.Unlock() //nolint:staticcheck // a barrier
	c.finalJournal(end)
	rep := c.report(end)
	c.refreshSnapshot()
	if c.cfg.StatusInterval > 0 {
		c.reportStatus(context.Background())
	}
	return rep, err
}

// handle feeds one message to the machine and executes the actions.
func (c *Controller) handle(m msg) {
	ctx := c.ctx
	if m.fn != nil {
		m.fn()
		return
	}
	now := c.now()
	if m.ev.At.IsZero() {
		// A message that says when it happened keeps that time: a
		// checkpoint durable before a preemption deadline committed the
		// epoch even if the loop gets to it after the deadline.
		m.ev.At = now
	}
	journal := false // write the goodput journal
	switch m.ev.Kind {
	case control.EvHostJoined:
		if old := c.sessions[m.sess.id]; old != nil && old != m.sess {
			old.kill()
		}
		c.sessions[m.sess.id] = m.sess
		if c.featsOK {
			c.welcome(m.sess)
		}
	case control.EvHostLost:
		if s := c.sessions[m.ev.Host]; s != nil && s.incarnation == m.ev.Incarnation {
			delete(c.sessions, m.ev.Host)
		}
	case control.EvSetupDone:
		if m.ev.Err == "" {
			c.deviceMu.Lock() // a step of an aborted attempt may still run
			c.sol, c.model = m.sol, m.model
			c.featKeys, c.featStats = m.keys, m.stats
			c.prof = c.newProfiler()
			c.deviceMu.Unlock()
			c.fdpRep.StatisticsRead = len(m.stats)
			c.feats, c.featsOK = m.model.Config().Features, true
			for _, s := range c.sessions {
				c.welcome(s)
			}
		}
	case control.EvRestored:
		c.manifest = m.manifest
		if m.ev.Err == "" && c.m.Status() == control.StLoading && !c.gpRestored {
			c.restoreGoodput(m.history)
		}
	case control.EvBlocks:
		if m.sol != nil {
			c.sol = m.sol
			m.ev.Blocks = m.sol.blocks
		}
	case control.EvModelRestored:
		if m.ev.Err == "" {
			c.committedLedger = m.ledger
		}
	case control.EvCompiled:
		if m.plan != nil {
			c.plans = append(c.plans, *m.plan)
		}
	case control.EvBatch:
		c.payloads[hostSeq{m.ev.Host, m.ev.Attempt, m.ev.Seq}] = m.batch
	case control.EvStepDone:
		c.stepDone(now, m.step, &m.ev)
	case control.EvCheckpointDone:
		if m.ev.Err == "" && m.ev.Attempt == c.m.Attempt() && c.m.Status() == control.StCheckpointing {
			c.manifest, c.committedLedger = m.manifest, m.ledger
			c.stats.checkpoints++
			journal = true
		}
	case control.EvTick:
		journal = c.cfg.GoodputJournalInterval > 0 && now.Sub(c.lastJournal) >= c.cfg.GoodputJournalInterval
	}
	for _, a := range c.m.Handle(m.ev) {
		c.execute(ctx, now, a)
	}
	if journal {
		// After the machine's actions: a commit is in the timeline.
		c.writeJournal(ctx, now)
	}
	c.syncActivity(c.now())
	c.syncWatcher(ctx)
	c.refreshSnapshot()
}

// syncActivity keeps the goodput recorder's open interval equal to the
// machine's activity (control.Machine.Activity).
func (c *Controller) syncActivity(now time.Time) {
	cat, ok := c.m.Activity()
	if c.open != nil && (!ok || *c.open != cat) {
		if err := c.jr.End(now); err != nil {
			c.log.Debug("goodput end", "err", err)
		}
		c.open = nil
	}
	if ok && c.open == nil {
		if err := c.jr.Begin(now, cat); err != nil {
			c.log.Debug("goodput begin", "err", err)
			return
		}
		c.open = &cat
	}
}

func (c *Controller) broadcast(m *trainerv1.ControllerMessage) {
	for _, s := range c.sessions {
		s.send(m)
	}
}

func (c *Controller) welcome(s *session) {
	w := &trainerv1.Welcome{Job: c.cfg.Job, ControllerIncarnation: c.incarnation, ReaderAddresses: c.cfg.Readers,
		BatchSize: uint32(c.cfg.BatchSize), BufferExamples: uint32(c.cfg.BufferExamples),
		MinInFlight: uint32(c.cfg.InFlight.Min), MaxInFlight: uint32(c.cfg.InFlight.Max),
		Credits: uint32(c.cfg.Credits), Inputs: inputsToProto(c.feats), LabelColumn: c.cfg.LabelColumn}
	s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Welcome{Welcome: w}})
}

// execute carries out one action of the machine.
func (c *Controller) execute(ctx context.Context, now time.Time, a control.Action) {
	switch a.Kind {
	case control.ActSetup:
		go c.setup(ctx)
	case control.ActLoadCheckpoint:
		go c.loadCheckpoint(ctx)
	case control.ActRefreshBlocks:
		go c.refreshBlocks(ctx)
	case control.ActAcquireChips:
		if c.acquireCancel != nil {
			c.acquireCancel()
		}
		actx, cancel := context.WithCancel(ctx)
		c.acquireCancel = cancel
		chips := a.Chips
		go func() {
			if err := c.cfg.Allocator.Acquire(actx, c.cfg.Job, chips); err == nil {
				c.post(msg{ev: control.Event{Kind: control.EvChipsGranted}})
			}
		}()
	case control.ActReleaseChips:
		if c.acquireCancel != nil {
			c.acquireCancel()
			c.acquireCancel = nil
		}
		c.cfg.Allocator.Release(c.cfg.Job)
	case control.ActRestoreModel:
		go c.restoreModel(ctx, c.manifest)
	case control.ActCompile:
		go c.compile(ctx, a.Chips, a.Phase)
	case control.ActStartAttempt:
		c.payloads = map[hostSeq]*pendingBatch{}
		c.attemptLedger = &checkpoint.Ledger{}
		c.log.Info("epoch attempt", "attempt", a.Attempt, "units", len(a.Units), "phase", a.Phase)
		c.broadcast(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Start{Start: &trainerv1.StartAttempt{Attempt: a.Attempt, Phase: a.Phase.String()}}})
	case control.ActAbort:
		c.payloads = map[hostSeq]*pendingBatch{}
		c.attemptLedger = nil
		c.stats.failures = append(c.stats.failures, a.Reason)
		c.log.Warn("epoch attempt failed: retrain from the last checkpoint", "attempt", a.Attempt, "reason", a.Reason)
		c.broadcast(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Abort{Abort: &trainerv1.Abort{Attempt: a.Attempt, Reason: a.Reason}}})
	case control.ActAssign:
		s := c.sessions[a.Host]
		if s == nil {
			return
		}
		as := &trainerv1.Assign{Attempt: a.Attempt}
		for _, id := range a.Units {
			u, err := c.sol.unit(&c.cfg, id, a.Phase)
			if err != nil {
				c.log.Error("build work unit", "unit", id, "err", err)
				s.kill()
				return
			}
			as.Units = append(as.Units, u)
		}
		s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Assign{Assign: as}})
	case control.ActDrain:
		if s := c.sessions[a.Host]; s != nil {
			s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Drain{Drain: &trainerv1.Drain{Attempt: c.m.Attempt(), Reason: a.Reason}}})
		}
	case control.ActRunStep:
		c.runStep(ctx, a)
	case control.ActWriteCheckpoint:
		c.writeCheckpoint(ctx, now, a)
	case control.ActPlaceHold:
		c.log.Warn("training hold placed", "id", a.Hold.ID, "kind", a.Hold.Kind, "reason", a.Hold.Reason)
		c.holdLog = append(c.holdLog, HoldRecord{ID: a.Hold.ID, Kind: a.Hold.Kind.String(), Reason: a.Hold.Reason, Placed: now})
	case control.ActLiftHold:
		c.log.Info("training hold lifted", "id", a.Hold.ID, "kind", a.Hold.Kind, "by", a.Reason)
		for i := range c.holdLog {
			if c.holdLog[i].ID == a.Hold.ID && c.holdLog[i].Lifted.IsZero() {
				c.holdLog[i].Lifted, c.holdLog[i].LiftedBy = now, a.Reason
			}
		}
	case control.ActWatchData:
		// syncWatcher starts it.
	case control.ActBroadcastPreempt:
		c.log.Warn("preemption notice", "deadline", a.Deadline, "scope", a.Scope)
		if a.Scope == control.ScopeJob {
			c.preemptDeadline = a.Deadline
		}
		c.broadcast(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Preempt{Preempt: &trainerv1.PreemptNotice{Deadline: timestamppb.New(a.Deadline), Scope: a.Scope}}})
	case control.ActExitHost, control.ActRejectHost:
		if s := c.sessions[a.Host]; s != nil {
			s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Exit{Exit: &trainerv1.Exit{Reason: a.Reason}}})
			s.closeAfterFlush()
		}
	case control.ActExit:
		c.exit = &exitInfo{reason: a.Reason, committed: a.Committed}
		c.log.Info("controller exits", "reason", a.Reason, "committed", a.Committed)
	case control.ActAllocate:
		if err := c.jr.Allocate(now, a.Held, a.Requested); err != nil {
			c.log.Debug("goodput allocate", "err", err)
		}
	case control.ActGoodput:
		var err error
		switch a.Goodput {
		case goodput.Checkpoint:
			err = c.jr.CheckpointCommitted(now)
		case goodput.Failure:
			c.open = nil // the event closes the open interval
			err = c.jr.Failure(now)
		case goodput.Preemption:
			c.open = nil
			err = c.jr.Preemption(now)
		}
		if err != nil {
			c.log.Debug("goodput event", "err", err)
		}
	case control.ActSetPhase:
		c.log.Info("phase", "phase", a.Phase)
		if err := c.jr.SetPhase(now, a.Phase.String()); err != nil {
			c.log.Debug("goodput phase", "err", err)
		}
	}
}

// runStep hands the batches of a step to the device.
func (c *Controller) runStep(ctx context.Context, a control.Action) {
	var parts []*pendingBatch
	var missing []string
	for i, h := range a.Hosts {
		k := hostSeq{h, a.Attempt, a.Seqs[i]}
		if p := c.payloads[k]; p != nil {
			parts = append(parts, p)
		} else {
			missing = append(missing, fmt.Sprintf("%s#%d", h, a.Seqs[i]))
		}
		delete(c.payloads, k)
		if s := c.sessions[h]; s != nil {
			s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Ack{Ack: &trainerv1.Ack{Attempt: a.Attempt, Seq: a.Seqs[i]}}})
		}
	}
	if len(missing) > 0 {
		// The machine counts the batch's rows as trained: a step without
		// it would leave them out of the model, so the attempt fails.
		err := fmt.Sprintf("batch %s missing", strings.Join(missing, ", "))
		c.log.Error("step", "attempt", a.Attempt, "err", err)
		go c.post(msg{ev: control.Event{Kind: control.EvStepDone}, step: &stepResult{attempt: a.Attempt, failed: err}})
		return
	}
	global := model.NewExamples(c.feats)
	var segs []buffer.Segment
	for _, p := range parts {
		global.Append(p.ex)
		segs = append(segs, p.segs...)
	}
	c.stepsStarted++
	poison := c.cfg.Faults.NaNAtStep != 0 && !c.nanDone && c.stepsStarted >= c.cfg.Faults.NaNAtStep
	if poison {
		c.nanDone = true
	}
	c.syncActivity(c.now()) // end the input stall before the step starts
	start := c.now()
	profile := c.fstats != nil && fdp.Sampled(c.cfg.Seed, c.stepsStarted, c.cfg.ProfileRate)
	go c.step(ctx, a.Attempt, c.deviceGen.Load(), global, segs, start, poison, profile)
}

// stepDone records a finished step: its event ids go into the attempt's
// ledger and its device time into goodput, if it belongs to the running
// attempt (a step of an aborted attempt is neither trained nor counted).
func (c *Controller) stepDone(now time.Time, r *stepResult, ev *control.Event) {
	ev.Attempt, ev.Err = r.attempt, r.failed
	switch {
	case errors.Is(r.err, model.ErrNonFinite):
		ev.NonFinite = true
	case r.err != nil:
		ev.Err, ev.Permanent = r.err.Error(), true
	}
	if r.attempt != c.m.Attempt() || !c.m.Stepping() || c.attemptLedger == nil {
		return
	}
	if r.err != nil {
		c.log.Error("the model refused the step", "step", c.stepsStarted, "err", r.err)
		return
	}
	if r.failed != "" {
		return
	}
	i := 0
	for _, s := range r.segs {
		c.attemptLedger.Unit(s.Unit).Add(r.ids[i : i+s.Rows])
		i += s.Rows
	}
	if r.profiled {
		c.fdpRep.ProfiledBatches++
	}
	if err := c.jr.Step(r.start, r.end, r.ideal); err != nil {
		c.log.Debug("goodput step", "err", err)
	}
	c.stats.observe(c.m.Phase(), r)
}

// HoldRecord is one training hold of the run.
type HoldRecord struct {
	ID       uint64    `json:"id"`
	Kind     string    `json:"kind"`
	Reason   string    `json:"reason"`
	Placed   time.Time `json:"placed"`
	Lifted   time.Time `json:"lifted,omitzero"`
	LiftedBy string    `json:"lifted_by,omitempty"`
}

// snapshot is what Status and ListHolds answer.
type snapshot struct {
	status   control.Status
	phase    control.Phase
	attempt  uint64
	chips    int
	hosts    []string
	progress control.Progress
	hold     *control.Hold
	stats    control.Stats
	loss     float64
	steps    uint64
	// tc, sc, dev, chipSteps: the chip-weighted modelled step times
	// (runStats).
	tc, sc, dev time.Duration
	chipSteps   int64
}

func (c *Controller) refreshSnapshot() {
	s := snapshot{status: c.m.Status(), phase: c.m.Phase(), attempt: c.m.Attempt(), chips: c.m.Chips(),
		progress: c.m.Committed(), stats: c.m.Stats(), loss: c.stats.lastLoss, steps: c.stats.steps,
		tc: c.stats.tc, sc: c.stats.sc, dev: c.stats.dev, chipSteps: c.stats.chipSteps}
	if h, ok := c.m.Hold(); ok {
		s.hold = &h
	}
	for id := range c.sessions {
		s.hosts = append(s.hosts, id)
	}
	sort.Strings(s.hosts)
	c.snapMu.Lock()
	c.snap = s
	c.snapMu.Unlock()
}

func (c *Controller) snapshot() snapshot {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	return c.snap
}

// ReleaseHold lifts the job's permanent hold (a person acted).
func (c *Controller) ReleaseHold(id uint64) (control.Hold, error) {
	h := c.snapshot().hold
	if h == nil {
		return control.Hold{}, errNoHold
	}
	if id != 0 && h.ID != id {
		return control.Hold{}, fmt.Errorf("%w: the job's hold is #%d", errNoHold, h.ID)
	}
	c.post(msg{ev: control.Event{Kind: control.EvHoldReleased, HoldID: h.ID}})
	return *h, nil
}

var errNoHold = errors.New("no such training hold")
