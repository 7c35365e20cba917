package control

import (
	"fmt"
	"strings"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Phase is the training phase (paper III.A).
type Phase int

const (
	// Initial training on historical data: many chips, memoized inputs.
	Initial Phase = iota
	// CaughtUp training on new data: few chips, locally generated inputs.
	CaughtUp
)

func (p Phase) String() string {
	if p == CaughtUp {
		return "caught-up"
	}
	return "initial"
}

// ParsePhase reads "initial" or "caught-up".
func ParsePhase(s string) (Phase, error) {
	switch s {
	case "initial", "":
		return Initial, nil
	case "caught-up":
		return CaughtUp, nil
	}
	return 0, fmt.Errorf("control: unknown phase %q", s)
}

// Block is one raw block of the pipeline's range, in event order.
type Block struct {
	// Ref is the block at its version in the snapshot the blocks were
	// resolved at; the unit of the block is this Ref. A block trained at
	// an older version is offered again per Config.Retrain.
	Ref blockref.Ref
	// Ready: no memoized input of the block is pending, so it can be read in
	// the initial phase (caught-up reads compute inputs locally and need
	// nothing).
	Ready bool
	// Parts is a compacted block's lineage (issue 28, warehouse/compact):
	// the blocks whose rows its version 1 holds, in row order, each at the
	// version compacted. Empty for every other block. A job that trained
	// some of them trains the compacted block without their rows
	// (doc.go, "Compaction").
	Parts []Part
}

// Part is one block of a compacted block's lineage: the block at the
// version that was compacted, and its rows.
type Part struct {
	Ref  blockref.Ref
	Rows int64
}

// RowRange is the rows [Start, End) of a unit.
type RowRange struct{ Start, End int64 }

// Progress is what a checkpoint commits besides the model.
type Progress struct {
	// Epochs is the number of committed epochs.
	Epochs int
	// Units are the committed work units, in commit order: each a block
	// at the version it was trained at. A block that changed after it was
	// trained appears again with its new version (RetrainChanged).
	Units []blockref.Ref
	// Retrained counts the Units that trained a newer version of a block
	// an earlier epoch had trained.
	Retrained int
	// Snapshot is the catalog snapshot the last committed epoch was
	// planned at: every one of its units read its block at that snapshot.
	Snapshot int64
	// Phase is the phase of the last committed epoch.
	Phase Phase
	// Steps is the number of committed training steps.
	Steps uint64
}

// Clone returns a deep copy.
func (p Progress) Clone() Progress {
	p.Units = append([]blockref.Ref(nil), p.Units...)
	return p
}

// HoldKind is permanent or transient (paper VI.A).
type HoldKind int

const (
	// Permanent holds wait for a person.
	Permanent HoldKind = iota + 1
	// Transient holds are lifted when the data arrives.
	Transient
)

func (k HoldKind) String() string {
	switch k {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	}
	return "none"
}

// Hold is a training hold.
type Hold struct {
	ID     uint64
	Kind   HoldKind
	Reason string
	Since  time.Time
}

// ScopeJob is the scope of a preemption notice for the whole job; any other
// scope is the id of the one host it preempts.
const ScopeJob = "job"

// EventKind says what happened.
type EventKind int

// Events.
const (
	// EvStart: the controller process started.
	EvStart EventKind = iota + 1
	// EvSetupDone: setup (graph submitted, model built) finished; Err set
	// on failure, Permanent when a person must act.
	EvSetupDone
	// EvRestored: the last checkpoint's progress was loaded (zero Progress
	// when there is none); Err on failure (retried).
	EvRestored
	// EvBlocks: the read solution was refreshed: Blocks in event order;
	// Err on failure (retried).
	EvBlocks
	// EvChipsGranted: the fleet granted the chips requested.
	EvChipsGranted
	// EvModelRestored: the model was restored from the last checkpoint onto
	// the slice (Err on failure, retried; with Permanent, when the
	// checkpoint cannot be restored, a permanent hold).
	EvModelRestored
	// EvCompiled: the slice is compiled (partition plan, program); Err
	// with Permanent for out of memory.
	EvCompiled
	EvHostJoined
	EvHostLost
	// EvUnitsRequested: Host asks for up to Max more units.
	EvUnitsRequested
	// EvUnitRead: Host read Unit whole: Rows rows.
	EvUnitRead
	// EvUnitFailed: Host could not read Unit; Pending when the memoized
	// data was not there.
	EvUnitFailed
	// EvBatch: Host's batch Seq of Examples examples, carrying Rows[unit]
	// rows of each unit; Final when it is the host's last of the attempt.
	EvBatch
	// EvStepDone: the step finished; NonFinite when its loss was NaN; Err
	// when it could not run (the attempt fails and is retrained), with
	// Permanent when the model refused it (the attempt fails and a person
	// must look, as for a NaN loss).
	EvStepDone
	// EvCheckpointDone: the checkpoint is durable (or Err). At is when it
	// became durable, not when the caller got to handling it: a checkpoint
	// durable before a job-wide preemption deadline committed the epoch.
	EvCheckpointDone
	// EvPreempt: a preemption notice with Deadline for Scope (ScopeJob, or
	// empty, for the whole job; otherwise the id of the host it preempts).
	EvPreempt
	// EvHoldReleased: a person released hold HoldID.
	EvHoldReleased
	// EvTick: time passed.
	EvTick
)

var eventNames = map[EventKind]string{
	EvStart: "start", EvSetupDone: "setup-done", EvRestored: "restored", EvBlocks: "blocks",
	EvChipsGranted: "chips-granted", EvModelRestored: "model-restored", EvCompiled: "compiled",
	EvHostJoined: "host-joined", EvHostLost: "host-lost", EvUnitsRequested: "request",
	EvUnitRead: "unit-read", EvUnitFailed: "unit-failed", EvBatch: "batch", EvStepDone: "step-done",
	EvCheckpointDone: "checkpoint-done", EvPreempt: "preempt", EvHoldReleased: "release", EvTick: "tick",
}

func (k EventKind) String() string {
	if s, ok := eventNames[k]; ok {
		return s
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one input of the machine. Fields not used by its Kind are zero.
type Event struct {
	Kind EventKind
	At   time.Time

	Host        string
	Incarnation string
	Attempt     uint64
	Unit        blockref.Ref
	Max         int
	Rows        int64
	Seq         uint64
	Examples    int
	// UnitRows: rows of each unit in a batch.
	UnitRows  map[blockref.Ref]int64
	Final     bool
	NonFinite bool
	Pending   bool
	Permanent bool
	Err       string
	Progress  Progress
	Blocks    []Block
	// Snapshot is the catalog snapshot Blocks were resolved at (EvBlocks).
	Snapshot int64
	Deadline time.Time
	Scope    string
	HoldID   uint64
}

// ActionKind says what the caller must do.
type ActionKind int

// Actions.
const (
	// ActSetup: submit the graph, build the model; answer EvSetupDone.
	ActSetup ActionKind = iota + 1
	// ActLoadCheckpoint: read the last checkpoint's progress; answer
	// EvRestored.
	ActLoadCheckpoint
	// ActRefreshBlocks: read the solution; answer EvBlocks.
	ActRefreshBlocks
	// ActAcquireChips: ask the fleet for Chips chips in Phase; answer
	// EvChipsGranted.
	ActAcquireChips
	// ActReleaseChips: give the chips back to the fleet.
	ActReleaseChips
	// ActRestoreModel: load the model from the last checkpoint (or
	// initialize it when there is none); answer EvModelRestored.
	ActRestoreModel
	// ActCompile: compile the slice of Chips chips for Phase; answer
	// EvCompiled.
	ActCompile
	// ActStartAttempt: broadcast to every host: epoch attempt Attempt
	// begins with Units (drop anything older).
	ActStartAttempt
	// ActAbort: broadcast: attempt Attempt failed; drop buffers and units.
	ActAbort
	// ActAssign: send Units to Host (read them in Phase).
	ActAssign
	// ActDrain: tell Host no more units come in this attempt.
	ActDrain
	// ActRunStep: run one step on the batches of Hosts (Seqs), in order.
	ActRunStep
	// ActWriteCheckpoint: write the model, the ledger of Attempt and
	// Progress; answer EvCheckpointDone. Rows are the rows of each unit
	// the attempt trained: the attempt's ledger must hold exactly these.
	ActWriteCheckpoint
	// ActPlaceHold and ActLiftHold: a training hold begins or ends.
	ActPlaceHold
	ActLiftHold
	// ActWatchData: watch for completion events and send EvBlocks when the
	// solution changes (transient hold).
	ActWatchData
	// ActBroadcastPreempt: tell every host a preemption notice for Scope
	// came, with Deadline.
	ActBroadcastPreempt
	// ActExitHost: tell Host to exit (Reason: it was preempted).
	ActExitHost
	// ActRejectHost: refuse Host (Reason: the slice is full).
	ActRejectHost
	// ActExit: the controller exits (Reason "done" or "preempted";
	// Committed for a preemption).
	ActExit
	// Goodput records: ActAllocate (Held of Requested chips), ActGoodput
	// (Event: checkpoint, failure, preemption), ActSetPhase.
	ActAllocate
	ActGoodput
	ActSetPhase
	// ActStall: the slice waits, chips held, for the pending memoized
	// data of Units[0] (input stall; record what it waits on). ActStallEnd:
	// the wait on Units[0] is over (Reason: the status it ended in).
	ActStall
	ActStallEnd
)

var actionNames = map[ActionKind]string{
	ActSetup: "setup", ActLoadCheckpoint: "load-checkpoint", ActRefreshBlocks: "refresh-blocks",
	ActAcquireChips: "acquire-chips", ActReleaseChips: "release-chips", ActRestoreModel: "restore-model",
	ActCompile: "compile", ActStartAttempt: "start-attempt", ActAbort: "abort", ActAssign: "assign",
	ActDrain: "drain", ActRunStep: "run-step", ActWriteCheckpoint: "write-checkpoint",
	ActPlaceHold: "place-hold", ActLiftHold: "lift-hold", ActWatchData: "watch-data",
	ActBroadcastPreempt: "broadcast-preempt", ActExitHost: "exit-host", ActRejectHost: "reject-host",
	ActExit: "exit", ActAllocate: "goodput-allocate", ActGoodput: "goodput", ActSetPhase: "goodput-phase",
	ActStall: "stall", ActStallEnd: "stall-end",
}

func (k ActionKind) String() string {
	if s, ok := actionNames[k]; ok {
		return s
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one output of the machine. Fields not used by its Kind are
// zero; each field means one thing whatever the Kind.
type Action struct {
	Kind ActionKind
	// Host is the host the action is for.
	Host string
	// Attempt is the epoch attempt the action belongs to.
	Attempt uint64
	// Units are work units (a block at a version each): the attempt's, or
	// those handed to Host.
	Units []blockref.Ref
	// Skips are, per unit of Units, the rows a host reads but does not
	// train (sorted, disjoint): of a compacted block, the rows of the
	// parts the job trained before the compaction. Units absent train
	// every row.
	Skips map[blockref.Ref][]RowRange
	// Hosts and Seqs name a step's batches: Seqs[i] of Hosts[i].
	Hosts []string
	Seqs  []uint64
	// Chips is a slice size (to acquire, to compile for).
	Chips int
	// Phase is the training phase the action is in.
	Phase Phase
	// Progress is what a checkpoint commits.
	Progress Progress
	// Rows are the rows of each unit an attempt trained.
	Rows map[blockref.Ref]int64
	// Hold is the training hold placed or lifted.
	Hold Hold
	// Deadline is a preemption notice's, and Scope what it covers:
	// ScopeJob, or the id of the one host it preempts.
	Deadline time.Time
	Scope    string
	// Held of Requested chips, for goodput.
	Held      int
	Requested int
	// Goodput is the goodput event to record.
	Goodput goodput.EventKind
	// Reason says, for people and logs, why: an attempt aborts, a host is
	// drained, told to exit or refused, the controller exits, a hold is
	// lifted ("released" by a person, "data ready").
	Reason string
	// Committed: the epoch a preemption notice cut short committed.
	Committed bool
	// Snapshot is the catalog snapshot the attempt's units were planned
	// at (ActStartAttempt); each unit is its block at the version it has
	// in it, which is what hosts read.
	Snapshot int64
}

// String renders an action on one line (the data-driven tests' output).
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(a.Kind.String())
	switch a.Kind {
	case ActAcquireChips, ActCompile:
		fmt.Fprintf(&b, " chips=%d phase=%s", a.Chips, a.Phase)
	case ActStartAttempt:
		fmt.Fprintf(&b, " a=%d units=%s phase=%s", a.Attempt, joinRefs(a.Units), a.Phase)
		if a.Snapshot != 0 {
			fmt.Fprintf(&b, " snap=%d", a.Snapshot)
		}
		b.WriteString(joinSkips(a.Units, a.Skips))
	case ActAbort:
		fmt.Fprintf(&b, " a=%d (%s)", a.Attempt, a.Reason)
	case ActAssign:
		fmt.Fprintf(&b, " %s a=%d %s", a.Host, a.Attempt, joinRefs(a.Units))
		b.WriteString(joinSkips(a.Units, a.Skips))
	case ActDrain, ActExitHost, ActRejectHost:
		fmt.Fprintf(&b, " %s", a.Host)
		if a.Reason != "" {
			fmt.Fprintf(&b, " (%s)", a.Reason)
		}
	case ActRunStep:
		fmt.Fprintf(&b, " a=%d", a.Attempt)
		for i, h := range a.Hosts {
			fmt.Fprintf(&b, " %s#%d", h, a.Seqs[i])
		}
	case ActWriteCheckpoint:
		fmt.Fprintf(&b, " a=%d epochs=%d units=%s steps=%d phase=%s", a.Attempt, a.Progress.Epochs,
			joinRefs(a.Progress.Units), a.Progress.Steps, a.Progress.Phase)
		if a.Progress.Snapshot != 0 || a.Progress.Retrained != 0 {
			fmt.Fprintf(&b, " snap=%d retrained=%d", a.Progress.Snapshot, a.Progress.Retrained)
		}
	case ActPlaceHold, ActLiftHold:
		fmt.Fprintf(&b, " #%d %s: %s", a.Hold.ID, a.Hold.Kind, a.Hold.Reason)
	case ActStall:
		fmt.Fprintf(&b, " on %s", joinRefs(a.Units))
	case ActStallEnd:
		fmt.Fprintf(&b, " on %s (%s)", joinRefs(a.Units), a.Reason)
	case ActBroadcastPreempt:
		// A host's notice names the host; the job's is the one without.
		fmt.Fprintf(&b, " deadline=%s", a.Deadline.Format("15:04:05.000"))
		if a.Scope != ScopeJob {
			fmt.Fprintf(&b, " scope=%s", a.Scope)
		}
	case ActExit:
		fmt.Fprintf(&b, " reason=%s", a.Reason)
		if a.Reason == "preempted" {
			fmt.Fprintf(&b, " committed=%v", a.Committed)
		}
	case ActAllocate:
		fmt.Fprintf(&b, " %d/%d", a.Held, a.Requested)
	case ActGoodput:
		fmt.Fprintf(&b, " %s", a.Goodput)
	case ActSetPhase:
		fmt.Fprintf(&b, " %s", a.Phase)
	}
	return b.String()
}

// joinRefs lists units as the warehouse names them, comma-separated.
// joinSkips writes the rows of units skipped: " skip=c:0-10+20-30,...".
func joinSkips(units []blockref.Ref, skips map[blockref.Ref][]RowRange) string {
	var b strings.Builder
	for _, u := range units {
		rs, ok := skips[u]
		if !ok {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(" skip=")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(u.String() + ":")
		for i, r := range rs {
			if i > 0 {
				b.WriteByte('+')
			}
			fmt.Fprintf(&b, "%d-%d", r.Start, r.End)
		}
	}
	return b.String()
}

func joinRefs(units []blockref.Ref) string {
	var b strings.Builder
	for i, u := range units {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(u.String())
	}
	return b.String()
}

// Status is the machine's top-level state.
type Status int

// Statuses.
const (
	StSetup Status = iota + 1
	StLoading
	StRefreshing
	StQueued
	StRestoring
	StCompiling
	StWaitingHosts
	StTraining
	StCheckpointing
	StHeld
	StWaitingData
	StExited
	// StStalled: the next epoch's first block is pending in SIG and the
	// job keeps its slice, waiting (input stall) up to Config.HoldAfter.
	StStalled
)

var statusNames = map[Status]string{
	StSetup: "setup", StLoading: "loading", StRefreshing: "refreshing", StQueued: "queued",
	StRestoring: "restoring", StCompiling: "compiling", StWaitingHosts: "waiting-hosts",
	StTraining: "training", StCheckpointing: "checkpointing", StHeld: "held",
	StWaitingData: "waiting-data", StExited: "exited", StStalled: "stalled",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Stats counts what the machine did.
type Stats struct {
	Attempts        int
	FailedAttempts  int
	CommittedEpochs int
	Steps           uint64
	// PreemptedEpochs counts epochs a preemption notice cut short;
	// PreemptedCommitted those whose checkpoint was durable before the
	// deadline (paper VII.G: 61%).
	PreemptedEpochs    int
	PreemptedCommitted int
	PermanentHolds     int
	TransientHolds     int
	// RetrainedUnits counts committed units that trained a newer version
	// of a block already trained (Progress.Retrained, this process only).
	RetrainedUnits int
	// CompactedCovered counts the compacted blocks plans passed over
	// because the job had trained all of their parts, CompactedSkipped
	// the units handed out without the rows of the parts the job had
	// trained (issue 28).
	CompactedCovered, CompactedSkipped int
}
