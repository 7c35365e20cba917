package workers

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Sentinel errors callers branch on.
var (
	// ErrInvalid: a name or argument is malformed (empty, too long, contains
	// a NUL byte, or is not UTF-8). Nothing was changed.
	ErrInvalid = errors.New("workers: invalid argument")
	// ErrLeaseLost: the lease is unknown, expired, or was already finished.
	// The task may have been leased to another worker; the holder must stop.
	ErrLeaseLost = errors.New("workers: lease lost")
	// ErrCancelled: the leased task was cancelled (evicted) while it ran; its
	// result is not wanted.
	ErrCancelled = errors.New("workers: task cancelled")
	// ErrClosed: the queue is closed.
	ErrClosed = errors.New("workers: queue closed")
	// ErrFormat: the store was written by an incompatible format version.
	ErrFormat = errors.New("workers: unsupported store format")
	// ErrCorrupt: the store's indexes disagree with its task records.
	ErrCorrupt = errors.New("workers: store corrupt")
	// ErrPanic wraps a panic recovered from a Runner.
	ErrPanic = errors.New("workers: runner panicked")
	// ErrQuota: admitting the work would take a client past
	// Options.MaxQueuedPerClient (see Queue.Admit and QuotaError).
	ErrQuota = errors.New("workers: queued task quota exceeded")
	// ErrBanned: the worker's build may not lease (Queue.BanBuild): sigd
	// confirmed that a memo object it computed holds wrong values. An
	// operator lifts the ban (Queue.LiftBan); see BannedError.
	ErrBanned = errors.New("workers: worker build banned")
)

// Ban is a worker build refused leases (issue 27; paper VIII.E's
// shared-fate risk): a build that computes wrong values computes them
// again when its output is recomputed, so sigd's catch, quarantine and
// recompute would loop for ever.
type Ban struct {
	Build  string
	Reason string
	Since  time.Time
}

// BannedError is a lease refused to a banned build: errors.Is(err,
// ErrBanned).
type BannedError struct{ Ban Ban }

func (e *BannedError) Error() string {
	return fmt.Sprintf("worker build %q is banned from leasing since %s: %s (an operator lifts the ban: sigctl builds lift, or the web UI)",
		e.Ban.Build, e.Ban.Since.UTC().Format(time.RFC3339), e.Ban.Reason)
}

func (e *BannedError) Is(target error) bool { return target == ErrBanned }

// QuotaError is Queue.Admit's refusal: errors.Is(err, ErrQuota).
type QuotaError struct {
	Client string
	// Queued is what the client has queued; Adding what the refused work
	// would add to its queue; Max the quota.
	Queued, Adding, Max int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("client %q has %d tasks queued and this would queue %d more, past its quota of %d queued tasks per client",
		e.Client, e.Queued, e.Adding, e.Max)
}

func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// Limits on what callers may store. Names become parts of Pebble keys, so
// they are bounded and may not contain the NUL byte that separates them.
const (
	MaxNameLen  = 512
	MaxErrorLen = 8 << 10
)

// TaskID names one memoization task: one component over one raw block
// (paper IV.A, "Scheduling New Work"). However many pipelines want the
// block, there is one task.
//
// The component is a canon.Key, the type matching hands out at SubmitGraph
// and the reader reads: the queue never parses it. Only the store writes it
// as its 64 hex digits (see doc.go, "Persistence"), and the lease protocol
// carries it as hex in sigv1.Task, parsed once in RemoteLeaser.
type TaskID struct {
	Component canon.Key     // the component's Merkle key
	Block     blockref.Memo // the memo block: the raw block and the input version
}

func (id TaskID) String() string { return id.Component.String() + "/" + id.Block.String() }

// Requester is one pipeline of one client that asked for a task, at the
// pipeline's priority.
type Requester struct {
	Client   string
	Pipeline string
	Priority int32
}

// Request asks for a task on behalf of a pipeline: the argument of Enqueue.
type Request struct {
	Task     TaskID
	Client   string
	Pipeline string
	Priority int32
}

// State is where a task is in its life.
type State uint8

const (
	StateQueued State = iota + 1
	StateLeased
	StateQuarantined
)

func (s State) String() string {
	switch s {
	case StateQueued:
		return "queued"
	case StateLeased:
		return "leased"
	case StateQuarantined:
		return "quarantined"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Task is a snapshot of one task.
type Task struct {
	ID    TaskID
	State State
	// Attempts counts failed runs and expired leases since the task was
	// enqueued or released from quarantine.
	Attempts int
	// Requesters, sorted by client then pipeline.
	Requesters []Requester
	// Err is the last failure (the quarantine reason when quarantined).
	Err string
	// Since is when the task entered its current state.
	Since time.Time
	// Spec describes the task for a worker that cannot read the matching
	// cache (canonical DSL, objects, schema). It is set by the remote lease
	// protocol and by Describe; nil otherwise.
	Spec *sigv1.Task
}

// Priority is the task's effective priority: the highest among the
// pipelines that requested it (paper IV.A, "Prioritization").
func (t Task) Priority() int32 { return maxPriority(t.Requesters) }

// Clients lists the distinct requesting clients in name order.
func (t Task) Clients() []string {
	var out []string
	for i, r := range t.Requesters {
		if i == 0 || r.Client != t.Requesters[i-1].Client {
			out = append(out, r.Client)
		}
	}
	return out
}

// Lease is a task handed to one worker until Deadline; heartbeats extend it.
type Lease struct {
	ID     string
	Task   Task
	Worker string
	// Build is the worker's build (BuildID), as it said when leasing; ""
	// when it did not say.
	Build string
	// Client is the queue the task was taken from and Priority its priority
	// there (the task may sit in several clients' queues; it is leased once).
	Client   string
	Priority int32
	Deadline time.Time
}

// Result is what a successful run produced, reported with Complete.
type Result struct {
	// Object is the pack the task's column was written into (issue 28,
	// warehouse/block's pack.go; its column is the task component's key
	// in hex); "" is the task's own memo object, as a worker that predates
	// packs writes (Task.Spec.MemoObject).
	Object string
	Rows   int64
	Bytes  int64
	// OpNanos is the time the task's kernels took, by op class
	// (insertion.OpClass), over Rows rows: the workers' measurements the
	// insertion policy decides with (kept in the matching cache).
	OpNanos map[string]int64
	// Build is the build of the worker that ran the task, from its lease
	// (the queue's record of who leased it, not the worker's report at
	// completion): what sigd records with the memo entry, so that a
	// confirmed mismatch names the build to ban (issue 27). Set by the
	// lease protocol's server and sigd's in-process completion; workers
	// leave it empty.
	Build string
}

// Depth is the size of one client's queue at one priority.
type Depth struct {
	Client   string
	Priority int32
	// Queued counts tasks waiting in this client's queue. A task requested by
	// several clients waits in each of their queues and is counted in each.
	Queued int
	// Leased counts tasks leased from this client's queue at this priority.
	Leased int
}

func maxPriority(rs []Requester) int32 {
	var p int32
	for i, r := range rs {
		if i == 0 || r.Priority > p {
			p = r.Priority
		}
	}
	return p
}

func sortRequesters(rs []Requester) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Client != rs[j].Client {
			return rs[i].Client < rs[j].Client
		}
		return rs[i].Pipeline < rs[j].Pipeline
	})
}

// checkName validates a name that becomes part of a key.
func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(s), MaxNameLen)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalid, what, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not UTF-8", ErrInvalid, what, s)
	}
	return nil
}

func (id TaskID) validate() error {
	// The zero key is no component's hash: it is a TaskID left unset.
	if id.Component == (canon.Key{}) {
		return fmt.Errorf("%w: empty component key", ErrInvalid)
	}
	return checkName("block id", id.Block.ID())
}

func (r Request) validate() error {
	if err := r.Task.validate(); err != nil {
		return err
	}
	if err := checkName("client", r.Client); err != nil {
		return err
	}
	return checkName("pipeline", r.Pipeline)
}

// clip bounds an error text so one pathological failure cannot bloat the
// store, and makes it valid UTF-8 so it can travel in protobuf strings.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxErrorLen {
		return s
	}
	s = s[:MaxErrorLen]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " …(truncated)"
}

// EventKind says what happened to a task.
type EventKind uint8

const (
	// EventQuarantined: the task failed MaxAttempts times; Task.Err says why.
	EventQuarantined EventKind = iota + 1
	// EventReleased: an operator released the task from quarantine; it is
	// queued again.
	EventReleased
)

func (k EventKind) String() string {
	switch k {
	case EventQuarantined:
		return "quarantined"
	case EventReleased:
		return "released"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a notification from the queue.
type Event struct {
	Kind EventKind
	Task Task
}
