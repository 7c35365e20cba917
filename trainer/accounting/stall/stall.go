package stall

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is what a stalled second waited on: a state of SIG's work (the
// memo entry a unit needs), a phase of a reader's work, or nothing
// recorded.
type Kind string

// SIG-side kinds: why sigd says a pending memo entry is not ready
// (sigd's ExplainPending).
const (
	// Queued: the entry's task is queued behind other tasks (Cause.Client
	// and Cause.Priority name the work ahead of it that weighs most).
	Queued Kind = "queued"
	// Running: the entry's task is leased and a worker is computing it.
	Running Kind = "running"
	// Failed: the entry failed or its task is quarantined; only an
	// operator's release moves it.
	Failed Kind = "failed"
	// Ingestion: the block the unit needs is not in the catalog yet.
	Ingestion Kind = "ingestion"
	// Recomputing: the entry was ready once and was evicted, invalidated
	// or repaired; its recomputation is queued or running.
	Recomputing Kind = "recomputing"
	// Pending: SIG-side, but sigd gave no explanation covering the
	// instant (not asked yet, or unreachable).
	Pending Kind = "pending"
)

// Reader-side kinds: a unit's read was under way and the reader was
// the slow part (the host had asked and was waiting for rows).
const (
	// ReaderFetch: the reader was fetching the unit's objects.
	ReaderFetch Kind = "reader_fetch"
	// ReaderDecode: the reader was decoding segments or computing inputs.
	ReaderDecode Kind = "reader_decode"
	// ReaderGuard: the reader's shared-fate guard was recomputing samples.
	ReaderGuard Kind = "reader_guard"
	// ReaderSend: the reader was sending rows (the stream itself).
	ReaderSend Kind = "reader_send"
	// ReaderUnavailable: no reader answered; the host was retrying.
	ReaderUnavailable Kind = "reader_unavailable"
)

// Unrecorded is stall no wait covered: the device waited and no host or
// controller said on what. Charged so that the ledger still sums to the
// stall; a large share of it is a gap in the recording.
const Unrecorded Kind = "unrecorded"

// Kinds lists every kind, SIG side first, in the order reports print them.
var Kinds = []Kind{Queued, Running, Failed, Ingestion, Recomputing, Pending,
	ReaderFetch, ReaderDecode, ReaderGuard, ReaderSend, ReaderUnavailable, Unrecorded}

// Reader says whether the kind is on the readers' side.
func (k Kind) Reader() bool { return strings.HasPrefix(string(k), "reader_") }

// SIG says whether the kind is on SIG's side (sigd, its queue, workers,
// ingestion).
func (k Kind) SIG() bool {
	switch k {
	case Queued, Running, Failed, Ingestion, Recomputing, Pending:
		return true
	}
	return false
}

// ParseKind reads a kind's name; an unknown name is an error naming it.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("stall: unknown cause kind %q", s)
}

// Cause is one line of the ledger: what a stalled second is charged to.
// Two seconds with equal Causes are one line.
type Cause struct {
	Kind Kind `json:"kind"`
	// Component is the memo component (or memo node) waited on, as the
	// recorder names it (its canonical DSL or key); for a reader-side
	// cause, the component the unit's read was computing, if known.
	Component string `json:"component,omitempty"`
	// Block is the block (a unit's block ref) waited on.
	Block string `json:"block,omitempty"`
	// Client and Priority: for Queued and Recomputing, the client whose
	// queued work ahead weighed most, and its priority (see Charge for
	// "most").
	Client   string `json:"client,omitempty"`
	Priority int32  `json:"priority,omitempty"`
	// Reader is the reader's address for a reader-side cause.
	Reader string `json:"reader,omitempty"`
}

func (c Cause) String() string {
	var b strings.Builder
	b.WriteString(string(c.Kind))
	if c.Component != "" {
		fmt.Fprintf(&b, " %s", c.Component)
	}
	if c.Block != "" {
		fmt.Fprintf(&b, " block=%s", c.Block)
	}
	if c.Client != "" {
		fmt.Fprintf(&b, " behind=%s@%d", c.Client, c.Priority)
	}
	if c.Reader != "" {
		fmt.Fprintf(&b, " reader=%s", c.Reader)
	}
	return b.String()
}

// Interval is [Start, End).
type Interval struct{ Start, End time.Time }

// Wait is one recorded wait: a host (or the controller) needed Block's
// Component for Unit from Start to End and did not have it. End zero: the
// wait is still open (it ends at the ledger's horizon).
type Wait struct {
	Start, End time.Time
	// Who waited: a host's id, or "controller" for an epoch the
	// controller could not plan.
	Who string
	// Unit is the work unit (block ref) and Input the model input
	// needing it ("" for the whole unit).
	Unit, Input string
	// Component and Block are what was waited on: the memo entry for a
	// SIG-side wait, the unit's read for a reader-side one.
	Component, Block string
	// Kind is the reader-side kind for a reader-side wait; empty for a
	// SIG-side one, whose kind at each instant is sigd's explanation
	// (Explanation) of the entry at that instant.
	Kind Kind
	// Reader is the reader's address, for a reader-side wait.
	Reader string
}

// Ahead is some of the work queued ahead of an entry's task: Tasks of
// Client's at Priority.
type Ahead struct {
	Client   string `json:"client"`
	Priority int32  `json:"priority"`
	Tasks    int    `json:"tasks"`
}

// Explanation is sigd's answer, at At, to why the memo entry
// (Component, Block) is not ready: a snapshot of its state.
type Explanation struct {
	At               time.Time
	Component, Block string
	Kind             Kind // a SIG-side kind
	// Ahead is the work queued ahead of the entry's task (Queued,
	// Recomputing), by client and priority.
	Ahead []Ahead
	// Running is how long the task had been leased (Running).
	Running time.Duration
	// Detail is sigd's sentence (a failure's cause, ...).
	Detail string
}

// Input is what the ledger is computed from.
type Input struct {
	// Stalls are the job's measured input-stall intervals (the goodput
	// timeline's input_stall).
	Stalls []Interval
	// Waits are the waits the hosts and the controller recorded.
	Waits []Wait
	// Explanations are sigd's answers about the entries waited on.
	Explanations []Explanation
}

// Line is one cause's share of the stall.
type Line struct {
	Cause Cause `json:"cause"`
	// Charged is the stall charged to the cause.
	Charged time.Duration `json:"charged_ns"`
	// Ahead is the most tasks queued ahead of the entry in any
	// explanation charged to this line; AheadOf is how many of them were
	// Cause.Client's at Cause.Priority.
	Ahead   int `json:"ahead,omitempty"`
	AheadOf int `json:"ahead_of,omitempty"`
	// First and Last bound the instants charged.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// Charge is one run of stall charged to one cause, in time order.
type Charge struct {
	Start, End time.Time
	Cause      Cause
}

// Ledger is a job's input stall, every second charged to one cause.
type Ledger struct {
	// Stall is the measured input stall (the union of Input.Stalls).
	Stall time.Duration `json:"stall_ns"`
	// Lines are the causes, most charged first; their Charged sum to
	// Stall exactly.
	Lines []Line `json:"lines"`
	// Charges is the stall in time order, adjacent runs of one cause
	// merged.
	Charges []Charge `json:"charges,omitempty"`
}

// ByKind sums the lines by kind.
func (l Ledger) ByKind() map[Kind]time.Duration {
	m := map[Kind]time.Duration{}
	for _, ln := range l.Lines {
		m[ln.Cause.Kind] += ln.Charged
	}
	return m
}

// Charged sums every line: equal to Stall.
func (l Ledger) Charged() time.Duration {
	var d time.Duration
	for _, ln := range l.Lines {
		d += ln.Charged
	}
	return d
}

// Compute charges every instant of the input's stall to exactly one
// cause; see doc.go for the rules. It is pure: the same input gives the
// same ledger, whatever the order of its slices.
func Compute(in Input) Ledger {
	stalls := union(in.Stalls)
	var led Ledger
	if len(stalls) == 0 {
		return led
	}
	horizon := stalls[len(stalls)-1].End
	waits := make([]Wait, 0, len(in.Waits))
	for _, w := range in.Waits {
		if w.End.IsZero() || w.End.After(horizon) {
			w.End = horizon
		}
		if w.End.After(w.Start) {
			waits = append(waits, w)
		}
	}
	slices.SortFunc(waits, waitOrder)
	exps := explanations(in.Explanations)

	// Boundaries: every instant at which the charged cause may change.
	var cuts []time.Time
	for _, s := range stalls {
		cuts = append(cuts, s.Start, s.End)
	}
	for _, w := range waits {
		cuts = append(cuts, w.Start, w.End)
	}
	for _, e := range in.Explanations {
		cuts = append(cuts, e.At)
	}
	slices.SortFunc(cuts, func(a, b time.Time) int { return a.Compare(b) })
	cuts = slices.Compact(cuts)

	lines := map[Cause]*Line{}
	si := 0
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		for si < len(stalls) && !stalls[si].End.After(a) {
			si++
		}
		if si == len(stalls) {
			break
		}
		if a.Before(stalls[si].Start) {
			continue // not stalled
		}
		cause, ahead, of := Cause{Kind: Unrecorded}, 0, 0
		if w, ok := binding(waits, a); ok {
			cause, ahead, of = explain(w, a, exps)
		}
		ln := lines[cause]
		if ln == nil {
			ln = &Line{Cause: cause, First: a}
			lines[cause] = ln
		}
		ln.Charged += b.Sub(a)
		ln.Last = b
		if ahead > ln.Ahead {
			ln.Ahead, ln.AheadOf = ahead, of
		}
		led.Stall += b.Sub(a)
		if n := len(led.Charges); n > 0 && led.Charges[n-1].Cause == cause && led.Charges[n-1].End.Equal(a) {
			led.Charges[n-1].End = b
		} else {
			led.Charges = append(led.Charges, Charge{Start: a, End: b, Cause: cause})
		}
	}
	for _, ln := range lines {
		led.Lines = append(led.Lines, *ln)
	}
	slices.SortFunc(led.Lines, func(x, y Line) int {
		if c := cmp.Compare(y.Charged, x.Charged); c != 0 {
			return c
		}
		return cmp.Compare(x.Cause.String(), y.Cause.String())
	})
	return led
}

// union sorts the intervals and merges the overlapping ones.
func union(in []Interval) []Interval {
	var out []Interval
	for _, iv := range in {
		if iv.End.After(iv.Start) {
			out = append(out, iv)
		}
	}
	slices.SortFunc(out, func(a, b Interval) int { return a.Start.Compare(b.Start) })
	merged := out[:0]
	for _, iv := range out {
		if n := len(merged); n > 0 && !iv.Start.After(merged[n-1].End) {
			if iv.End.After(merged[n-1].End) {
				merged[n-1].End = iv.End
			}
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}

// waitOrder is the tie-break among waits open at one instant, the first
// binding: the one ending last (the stall could not have ended before
// it), then the one that began first, then SIG-side before reader-side,
// then by who, unit, input, component, block.
func waitOrder(a, b Wait) int {
	if c := b.End.Compare(a.End); c != 0 {
		return c
	}
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	if ar, br := a.Kind != "", b.Kind != ""; ar != br {
		if ar {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.Who, b.Who), cmp.Compare(a.Unit, b.Unit), cmp.Compare(a.Input, b.Input),
		cmp.Compare(a.Component, b.Component), cmp.Compare(a.Block, b.Block),
		cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Reader, b.Reader))
}

// binding is the first wait in waitOrder open at instant t.
func binding(waits []Wait, t time.Time) (Wait, bool) {
	for _, w := range waits {
		if !w.Start.After(t) && w.End.After(t) {
			return w, true
		}
	}
	return Wait{}, false
}

type entry struct{ component, block string }

func explanations(in []Explanation) map[entry][]Explanation {
	m := map[entry][]Explanation{}
	for _, e := range in {
		k := entry{e.Component, e.Block}
		m[k] = append(m[k], e)
	}
	for _, es := range m {
		slices.SortStableFunc(es, explanationOrder)
	}
	return m
}

// explanationOrder orders an entry's explanations by time, and answers
// given at one instant by everything else they say, so that the one
// taken last at an instant (explain) does not depend on the order they
// came in: the ledger is a function of its input's contents alone.
func explanationOrder(a, b Explanation) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	if c := cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Running, b.Running), cmp.Compare(a.Detail, b.Detail),
		cmp.Compare(len(a.Ahead), len(b.Ahead))); c != 0 {
		return c
	}
	for i := range a.Ahead {
		x, y := a.Ahead[i], b.Ahead[i]
		if c := cmp.Or(cmp.Compare(x.Client, y.Client), cmp.Compare(x.Priority, y.Priority), cmp.Compare(x.Tasks, y.Tasks)); c != 0 {
			return c
		}
	}
	return 0
}

// explain is the cause of instant t of wait w: a reader-side wait's own
// kind; a SIG-side wait's entry as sigd last explained it at or before t,
// or, before its first explanation, as that first one (the state sigd
// found when first asked is taken to have held since the wait began).
func explain(w Wait, t time.Time, exps map[entry][]Explanation) (c Cause, ahead, of int) {
	c = Cause{Kind: w.Kind, Component: w.Component, Block: w.Block}
	if w.Kind != "" {
		c.Reader = w.Reader
		return c, 0, 0
	}
	es := exps[entry{w.Component, w.Block}]
	if len(es) == 0 {
		c.Kind = Pending
		return c, 0, 0
	}
	e := es[0]
	for _, x := range es[1:] {
		if x.At.After(t) {
			break
		}
		e = x
	}
	c.Kind = e.Kind
	if !c.Kind.SIG() {
		c.Kind = Pending
	}
	if top, n, ok := Dominant(e.Ahead); ok {
		c.Client, c.Priority = top.Client, top.Priority
		return c, n, top.Tasks
	}
	return c, 0, 0
}

// Dominant is the work ahead a queued entry is charged to: the (client,
// priority) with the most tasks ahead, then the higher priority, then the
// client first by name. n is every task ahead.
func Dominant(ahead []Ahead) (top Ahead, n int, ok bool) {
	for _, a := range ahead {
		n += a.Tasks
		if a.Tasks <= 0 {
			continue
		}
		if !ok || a.Tasks > top.Tasks || a.Tasks == top.Tasks && (a.Priority > top.Priority ||
			a.Priority == top.Priority && a.Client < top.Client) {
			top, ok = a, true
		}
	}
	return top, n, ok
}
