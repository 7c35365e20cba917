package trainer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/randid"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/jobgoodput"
	"github.com/sigdata/sig/trainer/accounting/runstats"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/embedding/placement"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
)

// Controller is a training job's controller (paper III.C): the I/O shell
// around trainer/control's Machine. It feeds the machine every event and
// executes its actions — host sessions, steps on the emulated slice,
// checkpoints, chips, holds, preemption — and accounts for goodput. One
// goroutine (Run's loop, handle) owns the machine and all state it decides
// on; slow work runs in goroutines that report back to it as messages. Its
// state and methods are grouped by concern, one file each (doc.go lists
// them).
type Controller struct {
	// Set by NewController.
	cfg         ControllerConfig
	log         *slog.Logger
	m           *control.Machine
	sig         sigv1.SIGClient
	fstats      sigv1.FeatureStatsClient // nil: no statistics store
	cks         *checkpoint.Store
	inbox       chan msg
	stopped     chan struct{} // closed when Run returns
	ctx         context.Context
	incarnation string
	started     time.Time

	// Owned by the run goroutine from here on, unless a field says
	// otherwise.

	// The hosts' sessions (sessions.go) and the batches they sent, until a
	// step takes them (steps.go).
	sessions map[string]*session
	payloads map[hostSeq]*pendingBatch
	// The read solution (setup.go, blocks.go) and the model inputs; featsOK
	// once setup is done.
	sol     *solution
	feats   model.Features
	featsOK bool
	// Checkpoints (checkpoints.go): the last committed manifest, the
	// ledgers of the last committed checkpoint and of the running
	// attempt's steps (nil when none runs), and the bound on checkpoint
	// writes after a job-wide preemption notice (a manifest must not
	// become durable after the job would be stopped).
	manifest        *checkpoint.Manifest
	committedLedger *checkpoint.Ledger
	attemptLedger   *checkpoint.Ledger
	preemptDeadline time.Time
	// The goroutines waiting for chips (chips.go) and for data (blocks.go).
	acquireCancel context.CancelFunc
	watchCancel   context.CancelFunc
	// Steps (steps.go): stepsStarted counts the steps this process handed
	// to the device (fault injection and FDP sampling count by it);
	// nanDone: the injected NaN was; stats: what the steps did
	// (trainer/accounting/runstats); failures: why attempts failed.
	stepsStarted uint64
	nanDone      bool
	stats        runstats.Stats
	failures     []string
	// Holds placed and lifted (holds.go), and why the controller exits.
	holdLog []HoldRecord
	exit    *exitInfo
	// Goodput (accounting.go): the job's account (its part of the
	// recorder, and its open interval). Across restarts: whether the
	// earlier incarnations' history was restored (or found absent), the
	// journal write running (nil: none), whether another must follow it,
	// and when the last one was taken.
	acct       *jobgoodput.Account
	gpRestored bool
	// The stall ledger's records (stalls.go; its own lock).
	stalls       stallRecorder
	journalDone  chan struct{}
	journalAgain bool
	lastJournal  time.Time
	// Feedback-directed partitioning (embedding.go, paper V.C): the
	// features' keys in the statistics store and the statistics read at
	// setup (also read by compile, under the device's mutex), the plans
	// compiled, what was published.
	fdpFeatures placement.Features
	plans       []placement.PlanReport
	fdpRep      placement.FDPReport

	// The emulated slice (device.go): its own mutex, not the run
	// goroutine's.
	dev device
	// psPlaced is a test hook: called (under the device's mutex) each time
	// the tables were placed on the parameter servers.
	psPlaced func(ctx context.Context, client *ps.Client, m *model.Model)
	// psBeforeApply is a test hook: called before each step's Apply on
	// the parameter servers, with the step (under the device's mutex).
	psBeforeApply func(step int64)

	// snapshot is the state the RPCs read, refreshed after every event
	// (status.go).
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
	sess     *session              // with EvHostJoined
	batch    *pendingBatch         // with EvBatch
	step     *stepResult           // with EvStepDone
	sol      *solution             // with EvBlocks, EvSetupDone
	model    *model.Model          // with EvSetupDone
	manifest *checkpoint.Manifest  // with EvRestored, EvCheckpointDone
	ledger   *checkpoint.Ledger    // with EvModelRestored, EvCheckpointDone
	fdp      placement.Features    // with EvSetupDone: the features' keys and statistics
	plan     *placement.PlanReport // with EvCompiled
	history  *jobgoodput.Restored  // with EvRestored: goodput to restore
	fn       func()                // run on the loop
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
	rec := cfg.Recorder
	if rec == nil {
		rec = goodput.NewRecorder(cfg.FleetChips, c.started)
	}
	c.acct = jobgoodput.New(rec, cfg.Job)
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
func newIncarnation() string { return randid.Hex(8) }

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

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Run runs the controller until the job exits (done, or preempted) or ctx
// ends, and returns its report.
func (c *Controller) Run(ctx context.Context) (Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer close(c.stopped)
	c.ctx = ctx
	var wg sync.WaitGroup
	wg.Go(func() {
		every(ctx, c.cfg.Tick, func() {
			select {
			case c.inbox <- msg{ev: control.Event{Kind: control.EvTick}}:
			default:
			}
		})
	})
	if c.cfg.StatusInterval > 0 {
		wg.Go(func() { every(ctx, c.cfg.StatusInterval, func() { c.reportStatus(ctx) }) })
	}
	if c.cfg.ParameterServers.Enabled() {
		// Started with the job, stopped after the device's last operation
		// (the deferred close runs after the barrier below).
		st, err := paramservers.Start(ctx, c.cfg.ParameterServers, c.now, c.log)
		if err != nil {
			cancel()
			wg.Wait()
			return c.report(c.now()), fmt.Errorf("trainer: %w", err)
		}
		defer st.Close()
		c.dev.mu.Lock()
		st.Placed, st.BeforeApply = c.psPlaced, c.psBeforeApply
		c.dev.ps = st
		c.dev.mu.Unlock()
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
	_ = c.acct.End(end)
	if c.acquireCancel != nil {
		c.acquireCancel()
	}
	if c.watchCancel != nil {
		c.watchCancel()
	}
	if c.m.Chips() > 0 {
		c.cfg.Allocator.Release(c.cfg.Job)
		_ = c.acct.Allocate(end, 0, 0)
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
	c.dev.mu.Lock()
	c.dev.mu.Unlock() //nolint:staticcheck // a barrier
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
			c.dev.mu.Lock() // a step of an aborted attempt may still run
			c.sol, c.dev.model = m.sol, m.model
			c.fdpFeatures = m.fdp
			c.dev.prof = c.newProfiler()
			c.dev.mu.Unlock()
			c.fdpRep.StatisticsRead = len(m.fdp.Stats)
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
		// Only a solution the machine plans from replaces the one units
		// are built from: a watcher's refresh arriving during an epoch is
		// of another snapshot, and the epoch's units are of its own.
		if m.sol != nil && c.m.AcceptsBlocks() {
			c.sol = m.sol
			m.ev.Blocks = m.sol.blocks
		} else if m.sol != nil && c.sol != nil && c.sol.snapshot != 0 && m.sol.snapshot != c.sol.snapshot {
			// Its refresh moved the job's pin to its snapshot; the epoch
			// in flight reads c.sol's, which the pin must keep.
			c.pin(ctx, c.sol.snapshot)
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

// execute carries out one action of the machine: slow work in goroutines
// that post their result back as an event; what the hosts must hear
// through their sessions (sessions.go); holds and goodput into the run's
// records (holds.go, accounting.go).
func (c *Controller) execute(ctx context.Context, now time.Time, a control.Action) {
	switch a.Kind {
	case control.ActSetup:
		go c.setup(ctx)
	case control.ActLoadCheckpoint:
		go c.loadCheckpoint(ctx)
	case control.ActRefreshBlocks:
		go c.refreshBlocks(ctx)
	case control.ActAcquireChips:
		c.acquireChips(ctx, a.Chips)
	case control.ActReleaseChips:
		c.releaseChips()
	case control.ActRestoreModel:
		go c.restoreModel(ctx, c.manifest, c.m.Phase())
	case control.ActCompile:
		go c.compile(ctx, a.Chips, a.Phase)
	case control.ActStartAttempt:
		c.payloads = map[hostSeq]*pendingBatch{}
		c.attemptLedger = &checkpoint.Ledger{}
		c.log.Info("epoch attempt", "attempt", a.Attempt, "units", len(a.Units), "phase", a.Phase)
		c.tellHosts(a)
	case control.ActAbort:
		c.payloads = map[hostSeq]*pendingBatch{}
		c.attemptLedger = nil
		c.failures = append(c.failures, a.Reason)
		c.log.Warn("epoch attempt failed: retrain from the last checkpoint", "attempt", a.Attempt, "reason", a.Reason)
		c.tellHosts(a)
	case control.ActAssign, control.ActDrain, control.ActExitHost, control.ActRejectHost:
		c.tellHosts(a)
	case control.ActBroadcastPreempt:
		c.log.Warn("preemption notice", "deadline", a.Deadline, "scope", a.Scope)
		if a.Scope == control.ScopeJob {
			c.preemptDeadline = a.Deadline
		}
		c.tellHosts(a)
	case control.ActRunStep:
		c.runStep(ctx, a)
	case control.ActWriteCheckpoint:
		c.writeCheckpoint(ctx, now, a)
	case control.ActPlaceHold, control.ActLiftHold:
		c.recordHold(now, a)
	case control.ActWatchData:
		// syncWatcher starts it.
	case control.ActStall:
		c.beginStall(ctx, now, a.Units[0])
	case control.ActStallEnd:
		c.endStall(now)
	case control.ActExit:
		c.exit = &exitInfo{reason: a.Reason, committed: a.Committed}
		c.log.Info("controller exits", "reason", a.Reason, "committed", a.Committed)
		if a.Reason == "done" {
			c.unpin(ctx)
		}
	case control.ActAllocate, control.ActGoodput, control.ActSetPhase:
		c.recordGoodput(now, a)
	}
}
