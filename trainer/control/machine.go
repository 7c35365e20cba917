package control

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Config shapes the controller. Zero fields take defaults (EnsureDefaults).
type Config struct {
	// Hosts is the number of TPU host workers of the slice; an epoch
	// attempt starts only with all of them. Default 1.
	Hosts int
	// EpochUnits is the number of work units (blocks) per epoch in the
	// initial phase; CaughtUpEpochUnits in the caught-up phase. Defaults 4
	// and 1.
	EpochUnits, CaughtUpEpochUnits int
	// Chips is the slice size in the initial phase, CaughtUpChips in the
	// caught-up phase (paper III.A: 64-256 vs 1-4). Defaults 4 and 1.
	Chips, CaughtUpChips int
	// MaxAttempts is how many attempts of one epoch may fail in a row
	// before the epoch is put on a permanent hold. Default 5.
	MaxAttempts int
	// RetryDelay is the wait before retrying a failed setup, checkpoint
	// load, refresh, restore or compile that is not permanent. Default 1s.
	RetryDelay time.Duration
	// Follow keeps a caught-up job waiting for new blocks at the head of
	// the stream instead of finishing when its blocks are all committed.
	Follow bool
	// Retrain is what happens to blocks that changed after they were
	// trained (RetrainChanged by default; see RetrainPolicy).
	Retrain RetrainPolicy
	// HoldAfter is how long a job that holds its slice waits, chips held,
	// for the next epoch's pending memoized data before a transient hold
	// releases the chips (issue 30; doc.go, "Stalls on SIG"). The wait is
	// input stall. Zero: the hold at once (paper VI.A), the default.
	HoldAfter time.Duration
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Hosts <= 0 {
		c.Hosts = 1
	}
	if c.EpochUnits <= 0 {
		c.EpochUnits = 4
	}
	if c.CaughtUpEpochUnits <= 0 {
		c.CaughtUpEpochUnits = 1
	}
	if c.Chips <= 0 {
		c.Chips = 4
	}
	if c.CaughtUpChips <= 0 {
		c.CaughtUpChips = 1
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
}

type hostState struct {
	incarnation string
	final       bool
	queue       []queued
	// leaving: told to exit after a preemption notice; it does not count
	// toward the slice until it rejoins.
	leaving bool
}

type queued struct {
	seq      uint64
	examples int
	rows     map[blockref.Ref]int64
}

type unitState struct {
	ref     blockref.Ref
	host    string // "" until handed out
	read    bool
	rows    int64 // when read
	trained int64
}

type attemptState struct {
	id           uint64
	phase        Phase
	snapshot     int64
	skips        map[blockref.Ref][]RowRange
	retrain      map[blockref.Ref]bool
	units        []*unitState
	byRef        map[blockref.Ref]*unitState
	next         int
	participants []string
	steps        uint64
}

// preemption is the pending preemption notice (paper VI.B). The job's
// notice and hosts' notices are kept apart: the job's deadline ends the job
// (deadlinePassed), while a preempted host exits on its own at its deadline
// (its loss fails the attempt), so a host's notice never moves the job's
// deadline, and a job's notice is never absorbed by a host's.
type preemption struct {
	// job: a job-wide notice came; deadline is its (earliest) deadline.
	job      bool
	deadline time.Time
	// hosts were preempted by notices of their own, in notice order; they
	// are told to exit when the notice ends.
	hosts []string
	// inEpoch: the notice cut an epoch short (counted in Stats).
	inEpoch bool
}

// Machine is the controller's state machine. Not safe for concurrent use:
// the caller serializes events.
type Machine struct {
	cfg    Config
	now    time.Time
	status Status

	committed Progress
	// trained is the newest version of each block (by id) a committed
	// epoch trained.
	trained  map[string]int64
	pending  Progress // what the checkpoint in flight commits
	blocks   []Block
	snapshot int64 // the catalog snapshot blocks were resolved at
	planned  []blockref.Ref
	// plannedSkips are the rows of planned units not to train (a
	// compacted block's trained parts), plannedRetrain the units that
	// train newer versions of events the job trained.
	plannedSkips   map[blockref.Ref][]RowRange
	plannedRetrain map[blockref.Ref]bool
	// plannedSnapshot is the snapshot of planned's versions.
	plannedSnapshot int64
	// covered are the compacted blocks plans passed over, their parts all
	// trained (counted once: Stats.CompactedCovered).
	covered map[blockref.Ref]bool
	phase   Phase

	chipsHeld, chipsRequested int
	needRestore               bool
	compiled                  bool
	compiledChips             int
	compiledPhase             Phase

	hosts      map[string]*hostState
	attemptSeq uint64
	at         *attemptState
	stepping   bool
	stepRows   []map[blockref.Ref]int64

	failures int // consecutive failed attempts
	hold     *Hold
	holdSeq  uint64
	pre      *preemption

	retryAt     time.Time
	retryAction ActionKind

	// stalledOn is the block whose pending data the slice waits for
	// (StStalled), since stalledSince.
	stalledOn    blockref.Ref
	stalledSince time.Time

	stats Stats
	out   []Action
}

// New returns a machine; feed it EvStart first.
func New(cfg Config) *Machine {
	cfg.EnsureDefaults()
	return &Machine{cfg: cfg, trained: map[string]int64{}, hosts: map[string]*hostState{}, covered: map[blockref.Ref]bool{}}
}

// Status is the machine's state.
func (m *Machine) Status() Status { return m.status }

// Phase is the current training phase.
func (m *Machine) Phase() Phase { return m.phase }

// Committed is the progress of the last committed checkpoint.
func (m *Machine) Committed() Progress { return m.committed.Clone() }

// Attempt is the current epoch attempt (0 when none runs).
func (m *Machine) Attempt() uint64 {
	if m.at == nil {
		return 0
	}
	return m.at.id
}

// Hold returns the active training hold, if any.
func (m *Machine) Hold() (Hold, bool) {
	if m.hold == nil {
		return Hold{}, false
	}
	return *m.hold, true
}

// Stats returns the counters.
func (m *Machine) Stats() Stats { return m.stats }

// Chips is the number of chips the job holds.
func (m *Machine) Chips() int { return m.chipsHeld }

// Stepping reports whether a step is running.
func (m *Machine) Stepping() bool { return m.stepping }

// Activity classifies what the held chips are doing now, for goodput (see
// the package doc): ok is false when the job holds no chips or a step is
// running (the caller records steps itself).
func (m *Machine) Activity() (c goodput.Category, ok bool) {
	if m.chipsHeld == 0 || m.chipsHeld < m.chipsRequested {
		return 0, false
	}
	switch m.status {
	case StRestoring:
		return goodput.CheckpointRestore, true
	case StCompiling:
		return goodput.Compile, true
	case StWaitingHosts:
		return goodput.Initialization, true
	case StTraining:
		if m.stepping {
			return 0, false
		}
		return goodput.InputStall, true
	case StStalled:
		// The slice is held and waits for input SIG has not made yet.
		return goodput.InputStall, true
	case StCheckpointing:
		return goodput.CheckpointSave, true
	case StHeld:
		return goodput.Hold, true
	}
	return goodput.Idle, true
}

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

// Handle applies one event and returns the actions to execute, in order.
func (m *Machine) Handle(ev Event) []Action {
	m.out = nil
	if ev.At.After(m.now) {
		m.now = ev.At
	}
	if m.status == StExited {
		return nil
	}
	if m.status == StStalled {
		m.handle(ev)
		m.endStall()
		return m.out
	}
	m.handle(ev)
	return m.out
}

func (m *Machine) handle(ev Event) {
	// A job-wide preemption deadline that has passed is acted on before
	// anything else: a checkpoint that became durable after it does not
	// count (the job would have been stopped first).
	if m.deadlinePassed() {
		return
	}
	switch ev.Kind {
	case EvStart:
		if m.status == 0 {
			m.status = StSetup
			m.emit(Action{Kind: ActSetup})
		}
	case EvSetupDone:
		m.onSetupDone(ev)
	case EvRestored:
		m.onRestored(ev)
	case EvBlocks:
		m.onBlocks(ev)
	case EvChipsGranted:
		if m.status == StQueued && m.chipsRequested > 0 {
			m.chipsHeld = m.chipsRequested
			m.emit(Action{Kind: ActAllocate, Held: m.chipsHeld, Requested: m.chipsRequested})
			m.prepare()
		}
	case EvModelRestored:
		if m.status == StRestoring {
			if ev.Err != "" {
				if ev.Permanent {
					// The last checkpoint cannot be restored (corrupt, or
					// not this model's): retrying would loop forever.
					m.placeHold(Permanent, "restore: "+ev.Err)
					return
				}
				m.retry(ActRestoreModel)
				return
			}
			m.needRestore = false
			m.prepare()
		}
	case EvCompiled:
		m.onCompiled(ev)
	case EvHostJoined:
		m.onHostJoined(ev)
	case EvHostLost:
		m.onHostLost(ev)
	case EvUnitsRequested:
		m.onUnitsRequested(ev)
	case EvUnitRead:
		m.onUnitRead(ev)
	case EvUnitFailed:
		if u := m.hostUnit(ev); u != nil {
			reason := fmt.Sprintf("unit %s on %s: %s", ev.Unit, ev.Host, ev.Err)
			if ev.Pending {
				reason = fmt.Sprintf("unit %s on %s: memoized data pending", ev.Unit, ev.Host)
			}
			m.failAttempt(reason, false)
		}
	case EvBatch:
		m.onBatch(ev)
	case EvStepDone:
		m.onStepDone(ev)
	case EvCheckpointDone:
		m.onCheckpointDone(ev)
	case EvPreempt:
		m.onPreempt(ev)
	case EvHoldReleased:
		m.onHoldReleased(ev)
	case EvTick:
		m.onTick()
	}
}

func (m *Machine) retry(a ActionKind) {
	m.retryAt = m.now.Add(m.cfg.RetryDelay)
	m.retryAction = a
}

func (m *Machine) onSetupDone(ev Event) {
	if m.status != StSetup {
		return
	}
	if ev.Err != "" {
		if ev.Permanent {
			m.placeHold(Permanent, "setup: "+ev.Err)
			return
		}
		m.retry(ActSetup)
		return
	}
	m.status = StLoading
	m.emit(Action{Kind: ActLoadCheckpoint})
}

func (m *Machine) onRestored(ev Event) {
	if m.status != StLoading {
		return
	}
	if ev.Err != "" {
		m.retry(ActLoadCheckpoint)
		return
	}
	m.committed = ev.Progress.Clone()
	m.trained = map[string]int64{}
	m.noteTrained(m.committed.Units)
	if m.committed.Phase != m.phase {
		m.phase = m.committed.Phase
		m.emit(Action{Kind: ActSetPhase, Phase: m.phase})
	}
	m.needRestore = true
	m.refresh()
}

func (m *Machine) refresh() {
	m.status = StRefreshing
	m.emit(Action{Kind: ActRefreshBlocks})
}

// AcceptsBlocks says whether an EvBlocks now would be planned from (the
// machine refreshes, waits for data, or is held for data); one at any other
// time is ignored, and its caller must keep the solution the current epoch
// was planned from.
func (m *Machine) AcceptsBlocks() bool {
	return m.status == StRefreshing || m.status == StWaitingData || m.status == StStalled ||
		m.status == StHeld && m.hold != nil && m.hold.Kind == Transient
}

func (m *Machine) onBlocks(ev Event) {
	if !m.AcceptsBlocks() {
		return
	}
	if ev.Err != "" {
		if m.status == StRefreshing {
			m.retry(ActRefreshBlocks)
		}
		return
	}
	m.blocks = append(m.blocks[:0], ev.Blocks...)
	m.snapshot = ev.Snapshot
	m.plan()
}

func (m *Machine) epochUnits() int {
	if m.phase == CaughtUp {
		return m.cfg.CaughtUpEpochUnits
	}
	return m.cfg.EpochUnits
}

func (m *Machine) phaseChips() int {
	if m.phase == CaughtUp {
		return m.cfg.CaughtUpChips
	}
	return m.cfg.Chips
}

// noteTrained records committed units in trained.
func (m *Machine) noteTrained(units []blockref.Ref) {
	for _, u := range units {
		m.trained[u.ID()] = max(m.trained[u.ID()], u.Version())
	}
}

// plan picks the next epoch's units and gets the slice ready for them.
//
// Every unit of the epoch is a block at its version in one catalog
// snapshot (the one the blocks were resolved at), so a checkpoint states
// exactly which version of which block the model trained on, and a failed
// attempt retrains the same versions. Blocks never trained come first, in
// event order; then, under RetrainChanged, blocks a committed epoch trained
// at an older version (issue 21, "previous events with new labels").
func (m *Machine) plan() {
	var fresh, changed []Block
	skips := map[blockref.Ref][]RowRange{}
	retrain := map[blockref.Ref]bool{}
	for _, b := range m.blocks {
		v, ok := m.trained[b.Ref.ID()]
		if !ok && len(b.Parts) > 0 {
			switch k, skip := m.lineage(b); k {
			case lineageCovered:
				if !m.covered[b.Ref] {
					m.covered[b.Ref] = true
					m.stats.CompactedCovered++
				}
			case lineageFresh:
				fresh = append(fresh, b)
				if len(skip) > 0 {
					skips[b.Ref] = skip
				}
			case lineageChanged:
				changed = append(changed, b)
				retrain[b.Ref] = true
				if len(skip) > 0 {
					skips[b.Ref] = skip
				}
			}
			continue
		}
		switch {
		case !ok:
			fresh = append(fresh, b)
		case v < b.Ref.Version() && m.cfg.Retrain == RetrainChanged:
			changed = append(changed, b)
		}
	}
	if len(fresh) == 0 && len(changed) == 0 {
		if m.cfg.Follow && len(m.blocks) > 0 {
			m.liftTransientHold()
			m.status = StWaitingData
			m.emit(Action{Kind: ActWatchData})
			return
		}
		m.releaseChips()
		m.status = StExited
		m.emit(Action{Kind: ActExit, Reason: "done"})
		return
	}
	// Paper III.A: the job is caught up once the epoch it trains next
	// reaches the newest block the catalog knows. Changed blocks are not
	// the stream's head and do not count.
	if m.phase == Initial && len(fresh) <= m.cfg.EpochUnits {
		m.phase = CaughtUp
		m.emit(Action{Kind: ActSetPhase, Phase: m.phase})
	}
	var units []blockref.Ref
	var waiting blockref.Ref // the first block whose memoized data is pending
	for _, b := range fresh {
		if len(units) == m.epochUnits() {
			break
		}
		if m.phase == Initial && !b.Ready {
			waiting = b.Ref
			break
		}
		units = append(units, b.Ref)
	}
	// A changed block waits for room after the fresh blocks, and in the
	// initial phase for its memoized data; it never holds the job.
	if waiting.IsZero() {
		for _, b := range changed {
			if len(units) == m.epochUnits() {
				break
			}
			if m.phase == Initial && !b.Ready {
				continue
			}
			units = append(units, b.Ref)
		}
	}
	if len(units) == 0 {
		if waiting.IsZero() {
			waiting = changed[0].Ref
		}
		if m.hold == nil && !m.stall(waiting) {
			m.placeHold(Transient, fmt.Sprintf("memoized data of block %s is pending in SIG", waiting.ID()))
		}
		return
	}
	m.liftTransientHold()
	m.planned, m.plannedSnapshot = units, m.snapshot
	m.plannedSkips, m.plannedRetrain = map[blockref.Ref][]RowRange{}, map[blockref.Ref]bool{}
	for _, u := range units {
		if sk, ok := skips[u]; ok {
			m.plannedSkips[u] = sk
		}
		if retrain[u] {
			m.plannedRetrain[u] = true
		}
	}
	want := m.phaseChips()
	if m.chipsHeld != want || m.chipsRequested != want {
		m.releaseChips()
		m.chipsRequested = want
		m.status = StQueued
		m.emit(Action{Kind: ActAcquireChips, Chips: want, Phase: m.phase})
		m.emit(Action{Kind: ActAllocate, Held: 0, Requested: want})
		return
	}
	m.prepare()
}

// stall keeps the slice waiting for block's pending data, chips held, if
// HoldAfter allows (doc.go, "Stalls on SIG"): false when the job holds no
// whole slice to keep, or has waited HoldAfter already (a transient hold
// then releases the chips).
func (m *Machine) stall(block blockref.Ref) bool {
	if m.cfg.HoldAfter <= 0 || m.chipsHeld == 0 || m.chipsHeld < m.chipsRequested {
		return false
	}
	if m.status != StStalled {
		m.stalledSince = m.now
	}
	if !m.now.Before(m.stalledSince.Add(m.cfg.HoldAfter)) {
		return false
	}
	if m.status != StStalled || m.stalledOn != block {
		m.stalledOn = block
		m.emit(Action{Kind: ActStall, Units: []blockref.Ref{block}})
	}
	if m.status != StStalled {
		m.status = StStalled
		m.emit(Action{Kind: ActWatchData})
	}
	return true
}

// endStall says the stall is over when an event moved the machine out of
// StStalled (data ready, a hold, a preemption).
func (m *Machine) endStall() {
	if m.status != StStalled {
		m.emit(Action{Kind: ActStallEnd, Units: []blockref.Ref{m.stalledOn}, Reason: m.status.String()})
		m.stalledOn = blockref.Ref{}
	}
}

func (m *Machine) liftTransientHold() {
	if m.hold != nil && m.hold.Kind == Transient {
		m.emit(Action{Kind: ActLiftHold, Hold: *m.hold, Reason: "data ready"})
		m.hold = nil
	}
}

func (m *Machine) releaseChips() {
	if m.chipsHeld == 0 && m.chipsRequested == 0 {
		return
	}
	m.chipsHeld, m.chipsRequested = 0, 0
	m.compiled = false
	// The device state goes with the chips: the next slice restores the
	// model from the last checkpoint.
	m.needRestore = true
	m.emit(Action{Kind: ActReleaseChips})
	m.emit(Action{Kind: ActAllocate, Held: 0, Requested: 0})
}

// prepare restores and compiles the slice as needed, then starts an attempt.
func (m *Machine) prepare() {
	if m.needRestore {
		m.status = StRestoring
		m.emit(Action{Kind: ActRestoreModel})
		return
	}
	if !m.compiled || m.compiledChips != m.chipsHeld || m.compiledPhase != m.phase {
		m.status = StCompiling
		m.emit(Action{Kind: ActCompile, Chips: m.chipsHeld, Phase: m.phase})
		return
	}
	m.startAttempt()
}

func (m *Machine) onCompiled(ev Event) {
	if m.status != StCompiling {
		return
	}
	if ev.Err != "" {
		if ev.Permanent {
			m.placeHold(Permanent, "compile: "+ev.Err)
			return
		}
		m.retry(ActCompile)
		return
	}
	m.compiled, m.compiledChips, m.compiledPhase = true, m.chipsHeld, m.phase
	m.prepare()
}

// members are the hosts that count toward the slice.
func (m *Machine) members() []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(m.hosts)) {
		if !m.hosts[id].leaving {
			out = append(out, id)
		}
	}
	return out
}

func (m *Machine) startAttempt() {
	members := m.members()
	if len(members) < m.cfg.Hosts {
		m.status = StWaitingHosts
		return
	}
	m.attemptSeq++
	at := &attemptState{id: m.attemptSeq, phase: m.phase, snapshot: m.plannedSnapshot, byRef: map[blockref.Ref]*unitState{}, participants: members,
		skips: m.plannedSkips, retrain: m.plannedRetrain}
	for _, ref := range m.planned {
		u := &unitState{ref: ref}
		at.units = append(at.units, u)
		at.byRef[ref] = u
	}
	for _, h := range m.hosts {
		h.final, h.queue = false, nil
	}
	m.at = at
	m.stepping = false
	m.status = StTraining
	m.stats.Attempts++
	m.emit(Action{Kind: ActStartAttempt, Attempt: at.id, Units: append([]blockref.Ref(nil), m.planned...), Phase: m.phase, Snapshot: at.snapshot,
		Skips: skipsOf(at.skips, m.planned)})
}

func (m *Machine) onHostJoined(ev Event) {
	if h, ok := m.hosts[ev.Host]; ok {
		if h.incarnation == ev.Incarnation {
			return
		}
		m.onHostLost(Event{Kind: EvHostLost, Host: ev.Host, Incarnation: h.incarnation})
	}
	if len(m.hosts) >= m.cfg.Hosts {
		m.emit(Action{Kind: ActRejectHost, Host: ev.Host, Reason: fmt.Sprintf("the slice has %d hosts", m.cfg.Hosts)})
		return
	}
	m.hosts[ev.Host] = &hostState{incarnation: ev.Incarnation}
	if m.status == StWaitingHosts {
		m.startAttempt()
	}
}

func (m *Machine) participant(host string) bool {
	if m.at == nil {
		return false
	}
	i := sort.SearchStrings(m.at.participants, host)
	return i < len(m.at.participants) && m.at.participants[i] == host
}

func (m *Machine) onHostLost(ev Event) {
	h, ok := m.hosts[ev.Host]
	if !ok || (ev.Incarnation != "" && h.incarnation != ev.Incarnation) {
		return
	}
	delete(m.hosts, ev.Host)
	if m.status == StTraining && m.participant(ev.Host) {
		if h.leaving {
			m.failAttemptAs(fmt.Sprintf("host %s left before the checkpoint", ev.Host), false, goodput.Preemption)
			return
		}
		m.failAttempt(fmt.Sprintf("host %s lost", ev.Host), false)
	}
	// During StCheckpointing every host has drained and the checkpoint is
	// already consistent: losing a host now costs nothing.
}

// current validates that ev belongs to the running attempt from a
// participating host.
func (m *Machine) current(ev Event) bool {
	return m.status == StTraining && m.at != nil && ev.Attempt == m.at.id && m.participant(ev.Host)
}

func (m *Machine) onUnitsRequested(ev Event) {
	if !m.current(ev) || m.hosts[ev.Host] == nil || m.hosts[ev.Host].final {
		return
	}
	at := m.at
	left := len(at.units) - at.next
	if m.pre != nil || left == 0 {
		m.emit(Action{Kind: ActDrain, Host: ev.Host})
		return
	}
	// A fair share, so that one eager host does not take the whole epoch
	// and leave the others with nothing to feed the slice.
	fair := (left + len(at.participants) - 1) / len(at.participants)
	n := min(max(ev.Max, 1), fair, left)
	var refs []blockref.Ref
	for _, u := range at.units[at.next : at.next+n] {
		u.host = ev.Host
		refs = append(refs, u.ref)
	}
	at.next += n
	m.emit(Action{Kind: ActAssign, Host: ev.Host, Attempt: at.id, Units: refs, Phase: at.phase, Skips: skipsOf(at.skips, refs)})
}

// hostUnit returns ev's unit if it belongs to ev's host in the running
// attempt.
func (m *Machine) hostUnit(ev Event) *unitState {
	if !m.current(ev) {
		return nil
	}
	u := m.at.byRef[ev.Unit]
	if u == nil || u.host != ev.Host {
		return nil
	}
	return u
}

func (m *Machine) onUnitRead(ev Event) {
	u := m.hostUnit(ev)
	if u == nil || u.read {
		return
	}
	if ev.Rows < u.trained {
		m.failAttempt(fmt.Sprintf("unit %s: %d rows trained, %d read", u.ref, u.trained, ev.Rows), false)
		return
	}
	u.read, u.rows = true, ev.Rows
}

func (m *Machine) onBatch(ev Event) {
	if !m.current(ev) {
		return
	}
	h := m.hosts[ev.Host]
	if h == nil || h.final {
		return
	}
	for ref := range ev.UnitRows {
		if u := m.at.byRef[ref]; u == nil || u.host != ev.Host {
			m.failAttempt(fmt.Sprintf("host %s sent rows of unit %s it was not given", ev.Host, ref), false)
			return
		}
	}
	h.queue = append(h.queue, queued{seq: ev.Seq, examples: ev.Examples, rows: ev.UnitRows})
	if ev.Final {
		h.final = true
	}
	m.tryStep()
}

// tryStep runs the next step when every unfinished host has a batch
// queued (synchronous data parallelism: a slow host stalls the step), and
// ends the epoch when every host is finished.
func (m *Machine) tryStep() {
	for m.status == StTraining && !m.stepping {
		at := m.at
		for _, id := range at.participants {
			h := m.hosts[id]
			if h == nil {
				return
			}
			if len(h.queue) == 0 && !h.final {
				return // input stall
			}
		}
		var hosts []string
		var seqs []uint64
		var rows []map[blockref.Ref]int64
		examples := 0
		for _, id := range at.participants {
			h := m.hosts[id]
			if len(h.queue) == 0 {
				continue
			}
			q := h.queue[0]
			h.queue = h.queue[1:]
			hosts, seqs, rows = append(hosts, id), append(seqs, q.seq), append(rows, q.rows)
			examples += q.examples
		}
		if len(hosts) == 0 {
			m.endEpoch()
			return
		}
		if examples == 0 {
			continue // only empty final batches: nothing to run
		}
		m.emit(Action{Kind: ActRunStep, Attempt: at.id, Hosts: hosts, Seqs: seqs})
		m.stepping = true
		m.stepRows = rows
	}
}

func (m *Machine) onStepDone(ev Event) {
	if m.status != StTraining || m.at == nil || ev.Attempt != m.at.id || !m.stepping {
		return
	}
	m.stepping = false
	if ev.NonFinite {
		m.failAttempt(fmt.Sprintf("loss is not finite at step %d", m.committed.Steps+m.at.steps+1), true)
		return
	}
	if ev.Err != "" {
		// The step did not run as scheduled: its rows are not in the model.
		// Permanent: the model refused it, and would again.
		m.failAttempt(fmt.Sprintf("step %d: %s", m.committed.Steps+m.at.steps+1, ev.Err), ev.Permanent)
		return
	}
	m.at.steps++
	m.stats.Steps++
	for _, rs := range m.stepRows {
		for ref, r := range rs {
			u := m.at.byRef[ref]
			u.trained += r
			if u.read && u.trained > u.rows {
				m.failAttempt(fmt.Sprintf("unit %s: %d rows trained, only %d read", ref, u.trained, u.rows), false)
				return
			}
		}
	}
	m.stepRows = nil
	m.tryStep()
}

// endEpoch checks that every unit handed out was trained whole, then asks
// for the checkpoint (paper III.C: drain, quiesce, checkpoint).
func (m *Machine) endEpoch() {
	at := m.at
	var done []blockref.Ref
	rows := map[blockref.Ref]int64{}
	for _, u := range at.units[:at.next] {
		if !u.read || u.trained != u.rows {
			m.failAttempt(fmt.Sprintf("unit %s: %d of %d rows trained at the epoch end (read %v)", u.ref, u.trained, u.rows, u.read), false)
			return
		}
		done = append(done, u.ref)
		rows[u.ref] = u.rows
	}
	if len(done) == 0 {
		// Only a preemption ends an epoch before any unit is handed out:
		// there is nothing to save and nothing is lost.
		m.at = nil
		m.finishPreemption(true)
		return
	}
	p := m.committed.Clone()
	p.Epochs++
	for _, u := range done {
		if m.trained[u.ID()] > 0 || at.retrain[u] {
			p.Retrained++
		}
		if len(at.skips[u]) > 0 {
			m.stats.CompactedSkipped++
		}
	}
	p.Units = append(p.Units, done...)
	p.Phase = at.phase
	p.Steps += at.steps
	p.Snapshot = at.snapshot
	m.pending = p
	m.status = StCheckpointing
	m.emit(Action{Kind: ActWriteCheckpoint, Attempt: at.id, Progress: p.Clone(), Rows: rows})
}

func (m *Machine) onCheckpointDone(ev Event) {
	if m.status != StCheckpointing || m.at == nil || ev.Attempt != m.at.id {
		return
	}
	if ev.Err != "" {
		m.failAttempt("checkpoint: "+ev.Err, false)
		return
	}
	m.stats.RetrainedUnits += m.pending.Retrained - m.committed.Retrained
	m.committed = m.pending.Clone()
	m.noteTrained(m.committed.Units)
	m.at = nil
	m.failures = 0
	m.stats.CommittedEpochs++
	m.emit(Action{Kind: ActGoodput, Goodput: goodput.Checkpoint})
	if m.pre != nil {
		m.finishPreemption(true)
		return
	}
	m.refresh()
}

func (m *Machine) failAttempt(reason string, permanent bool) {
	m.failAttemptAs(reason, permanent, goodput.Failure)
}

// failAttemptAs abandons the running attempt: no checkpoint; the next
// attempt restores the last one and retrains the epoch (paper III.C).
func (m *Machine) failAttemptAs(reason string, permanent bool, kind goodput.EventKind) {
	if m.at != nil {
		m.emit(Action{Kind: ActAbort, Attempt: m.at.id, Reason: reason})
		m.emit(Action{Kind: ActGoodput, Goodput: kind})
		m.stats.FailedAttempts++
		m.failures++
	}
	m.at = nil
	m.stepping = false
	m.stepRows = nil
	m.needRestore = true
	for _, h := range m.hosts {
		h.final, h.queue = false, nil
	}
	if p := m.pre; p != nil && !p.job {
		// Hosts' notices end with the attempt: nothing of theirs will be
		// checkpointed, so their hosts are told to exit now (the next epoch
		// waits until they rejoin). Kept, the notice would outlive a hold
		// and drain the next attempt at once.
		m.pre = nil
		m.exitHosts(p)
	}
	switch {
	case m.pre != nil:
		// The job is preempted and has nothing left to save: it exits now,
		// as it would if the notice came during the hold a permanent error
		// places (a restarted job meets the error again and is held then).
		m.finishPreemption(false)
	case permanent:
		m.placeHold(Permanent, reason)
	case m.failures >= m.cfg.MaxAttempts:
		m.placeHold(Permanent, fmt.Sprintf("epoch failed %d times in a row; last: %s", m.failures, reason))
	default:
		m.refresh()
	}
}

func (m *Machine) placeHold(kind HoldKind, reason string) {
	m.releaseChips()
	m.holdSeq++
	m.hold = &Hold{ID: m.holdSeq, Kind: kind, Reason: reason, Since: m.now}
	m.status = StHeld
	m.emit(Action{Kind: ActPlaceHold, Hold: *m.hold})
	if kind == Permanent {
		m.stats.PermanentHolds++
	} else {
		m.stats.TransientHolds++
		// Paper VI.A: the controller stays up and lifts the hold once the
		// data has become available.
		m.emit(Action{Kind: ActWatchData})
	}
}

func (m *Machine) onHoldReleased(ev Event) {
	if m.status != StHeld || m.hold == nil || (ev.HoldID != 0 && ev.HoldID != m.hold.ID) {
		return
	}
	m.emit(Action{Kind: ActLiftHold, Hold: *m.hold, Reason: "released"})
	m.hold = nil
	m.failures = 0
	m.status = StSetup
	m.emit(Action{Kind: ActSetup})
}

func (m *Machine) onPreempt(ev Event) {
	job := ev.Scope == "" || ev.Scope == ScopeJob
	p := m.pre
	switch {
	case p == nil:
		p = &preemption{inEpoch: m.status == StTraining || m.status == StCheckpointing}
	case job && p.job && !ev.Deadline.Before(p.deadline):
		return // the job's earlier deadline holds
	case !job && slices.Contains(p.hosts, ev.Scope):
		if h := m.hosts[ev.Scope]; h == nil || h.leaving {
			return // told already
		}
		// The host left on its first notice and has rejoined since: this
		// notice is its new incarnation's.
	}
	a := Action{Kind: ActBroadcastPreempt, Deadline: ev.Deadline, Scope: ScopeJob}
	if job {
		// Also when a host's notice is pending, or the job's moves earlier:
		// the broadcast tells the hosts the job goes, and the caller bounds
		// the checkpoint write by the job's deadline.
		p.job, p.deadline = true, ev.Deadline
	} else {
		a.Scope = ev.Scope
		if !slices.Contains(p.hosts, ev.Scope) {
			p.hosts = append(p.hosts, ev.Scope)
		}
		if h := m.hosts[ev.Scope]; h != nil {
			h.leaving = true
		}
	}
	m.emit(a)
	if m.pre != nil {
		return // the epoch is already draining
	}
	m.pre = p
	if !p.inEpoch {
		m.finishPreemption(true)
		return
	}
	m.stats.PreemptedEpochs++
	if m.status == StTraining {
		// Paper VI.B: every job finishes its outstanding work; no new
		// units are handed out, so the epoch ends early.
		for _, id := range m.at.participants {
			if h := m.hosts[id]; h != nil && !h.final {
				m.emit(Action{Kind: ActDrain, Host: id, Reason: "preemption notice"})
			}
		}
		m.tryStep()
	}
}

// finishPreemption ends a preemption notice: the job exits, or the
// preempted host is told to exit and the next epoch waits for it.
func (m *Machine) finishPreemption(committed bool) {
	p := m.pre
	m.pre = nil
	if p == nil {
		return
	}
	if p.inEpoch && committed {
		m.stats.PreemptedCommitted++
	}
	if p.job {
		m.releaseChips()
		m.status = StExited
		m.emit(Action{Kind: ActExit, Reason: "preempted", Committed: committed})
		return
	}
	m.exitHosts(p)
	if m.status == StTraining || m.status == StCheckpointing {
		m.refresh()
	}
}

// exitHosts tells the hosts preempted by p's notices to exit: those still
// connected in the incarnation the notice was for (a host that rejoined
// since is not leaving).
func (m *Machine) exitHosts(p *preemption) {
	for _, id := range p.hosts {
		if h := m.hosts[id]; h != nil && h.leaving {
			m.emit(Action{Kind: ActExitHost, Host: id, Reason: "preempted"})
		}
	}
}

// deadlinePassed ends the job when a job-wide preemption deadline has
// passed (a preempted host exits at its own deadline; its loss fails the
// attempt). It reports whether the machine exited.
func (m *Machine) deadlinePassed() bool {
	p := m.pre
	if p == nil || !p.job || m.now.Before(p.deadline) {
		return false
	}
	if m.at != nil {
		m.emit(Action{Kind: ActAbort, Attempt: m.at.id, Reason: "preemption deadline passed"})
		m.emit(Action{Kind: ActGoodput, Goodput: goodput.Preemption})
		m.at = nil
		m.stepping = false
	}
	m.finishPreemption(false)
	return true
}

func (m *Machine) onTick() {
	if m.status == StStalled && !m.now.Before(m.stalledSince.Add(m.cfg.HoldAfter)) {
		// A stall that ends by a hold: the grace is over, the chips go.
		m.placeHold(Transient, fmt.Sprintf("memoized data of block %s is pending in SIG", m.stalledOn.ID()))
	}
	if m.retryAction != 0 && !m.now.Before(m.retryAt) {
		a := m.retryAction
		m.retryAction = 0
		m.emit(Action{Kind: a, Chips: m.chipsHeld, Phase: m.phase})
	}
}

// Describe renders the state on one line (the data-driven tests' output).
func (m *Machine) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s phase=%s chips=%d/%d", m.status, m.phase, m.chipsHeld, m.chipsRequested)
	if m.at != nil {
		fmt.Fprintf(&b, " a=%d handed=%d/%d", m.at.id, m.at.next, len(m.at.units))
	}
	if c, ok := m.Activity(); ok {
		fmt.Fprintf(&b, " activity=%s", c)
	} else if m.stepping {
		b.WriteString(" activity=step")
	}
	fmt.Fprintf(&b, " committed=%d:%s", m.committed.Epochs, joinRefs(m.committed.Units))
	if m.hold != nil {
		fmt.Fprintf(&b, " hold=#%d:%s", m.hold.ID, m.hold.Kind)
	}
	if m.pre != nil {
		scope := strings.Join(m.pre.hosts, ",")
		if m.pre.job {
			scope = ScopeJob
		}
		fmt.Fprintf(&b, " preempting=%s", scope)
	}
	return b.String()
}
