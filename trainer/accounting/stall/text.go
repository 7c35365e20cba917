package stall

import (
	"fmt"
	"strings"
	"time"
)

// Sentence says a line for people: "12m0s waiting on
// unigrams(lower(col("query"))), block b3, queued behind 340 tasks (340 of
// client ranking at priority 900)".
func (ln Line) Sentence() string {
	c := ln.Cause
	var b strings.Builder
	fmt.Fprintf(&b, "%v ", ln.Charged.Round(time.Millisecond))
	switch {
	case c.Kind == Unrecorded:
		b.WriteString("stalled with no wait recorded")
		return b.String()
	case c.Kind.Reader():
		fmt.Fprintf(&b, "waiting on a reader (%s)", strings.TrimPrefix(string(c.Kind), "reader_"))
		if c.Reader != "" {
			fmt.Fprintf(&b, " %s", c.Reader)
		}
		if c.Block != "" {
			fmt.Fprintf(&b, ", block %s", c.Block)
		}
		return b.String()
	}
	// A component's canonical DSL names its one output "out".
	what := strings.TrimPrefix(c.Component, "input out = ")
	if what == "" {
		what = "SIG"
	}
	fmt.Fprintf(&b, "waiting on %s", what)
	if c.Block != "" {
		fmt.Fprintf(&b, ", block %s", c.Block)
	}
	switch c.Kind {
	case Queued, Recomputing:
		if c.Kind == Recomputing {
			b.WriteString(", recomputing")
		}
		if c.Client != "" {
			fmt.Fprintf(&b, ", queued behind %d tasks (%d of client %s at priority %d)", ln.Ahead, ln.AheadOf, c.Client, c.Priority)
		} else {
			b.WriteString(", queued")
		}
	case Running:
		b.WriteString(", running on a worker")
	case Failed:
		b.WriteString(", failed or quarantined")
	case Ingestion:
		b.WriteString(", not ingested yet")
	case Pending:
		b.WriteString(", pending (no explanation from sigd)")
	}
	return b.String()
}

// Text is the ledger for people: the stall, one sentence per line, and
// the sum by kind.
func (l Ledger) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "input stall %v by cause (sum %v):\n", l.Stall.Round(time.Millisecond), l.Charged().Round(time.Millisecond))
	for _, ln := range l.Lines {
		fmt.Fprintf(&b, "  %s\n", ln.Sentence())
	}
	by := l.ByKind()
	var parts []string
	for _, k := range Kinds {
		if d, ok := by[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %v", k, d.Round(time.Millisecond)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, "  by kind: %s\n", strings.Join(parts, ", "))
	}
	return b.String()
}
