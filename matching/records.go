package matching

import (
	"slices"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The records the matching cache keeps: a component's record, a memo
// entry, a registered pipeline and its inputs' covers. Component and
// pipeline records are JSON; memo entries have a binary encoding
// (keys.go's encodeMemo).

// ComponentRecord is what the cache keeps per component.
type ComponentRecord struct {
	Key     canon.Key `json:"key"`
	Source  string    `json:"source"`
	Type    string    `json:"type"`
	Columns []string  `json:"columns"`
	Ops     []string  `json:"ops"`
	Nodes   int       `json:"nodes"`
	DSL     string    `json:"dsl"` // canonical DSL, one input named out
	Created time.Time `json:"created"`
	// NodeKeys are the keys of every node of the component (search index).
	NodeKeys []canon.Key `json:"node_keys"`
}

// BareColumn reports whether the component is one raw column, col("...")
// alone: its only op is col, which reads no other node.
func (r *ComponentRecord) BareColumn() bool {
	return len(r.Ops) == 1 && r.Ops[0] == "col"
}

// MemoState is the state of one memoized block.
type MemoState uint8

// Memo states.
const (
	MemoPending MemoState = 1 + iota
	MemoReady
	MemoFailed
)

func (s MemoState) String() string {
	switch s {
	case MemoPending:
		return "pending"
	case MemoReady:
		return "ready"
	case MemoFailed:
		return "failed"
	}
	return "unknown"
}

// MemoEntry is the state of one (component, block).
type MemoEntry struct {
	Component canon.Key
	Block     blockref.Memo
	State     MemoState
	// Object is the memo object of a ready entry: a pack (issue 28,
	// warehouse/block's pack.go) when Column is set, else an object of
	// this component alone, memo/<key>/<block>.arrow, as every entry
	// written before packs names. A pending or failed entry names the
	// latter, where a worker that predates packs writes.
	Object string
	// Column is the entry's column in the pack Object
	// (block.MemberColumn of Component); "" for an object of one
	// component, whose column is block.MemoColumn. Stored after Build,
	// only when set (keys.go).
	Column string
	Rows   int64
	// Bytes is the entry's share of storage: its column's segment in a
	// pack, the whole object of one component's.
	Bytes   int64
	Error   string
	Updated time.Time
	// Gen identifies one incarnation of the entry: a pending entry created
	// after an eviction has a new Gen, so a worker that started before the
	// eviction cannot mark the new incarnation ready (see MarkReady).
	Gen uint64
	// Build is the worker build that computed a ready incarnation, as its
	// lease recorded it (workers.BuildID; "" when unknown): a mismatch
	// sigd confirms in the object bans that build (issue 27, eviction).
	// Stored after the other fields only when known.
	Build string
}

// Packed reports whether the entry names a column of a pack.
func (e MemoEntry) Packed() bool { return e.Column != "" }

// Pipeline is a registered training pipeline.
type Pipeline struct {
	Client    string          `json:"client"`
	Name      string          `json:"name"`
	Priority  int32           `json:"priority"`
	Source    string          `json:"source"`
	From      int64           `json:"from"`
	To        int64           `json:"to"`
	Inputs    []PipelineInput `json:"inputs"`
	Graph     string          `json:"graph"`     // the graph as submitted, printed as DSL
	Submitted time.Time       `json:"submitted"` // the first registration (a re-submit keeps it)
}

// usedKeys are the keys a pipeline uses: its inputs' components and their
// covers' memo nodes, each once, in input order.
func (p *Pipeline) usedKeys() []canon.Key {
	var out []canon.Key
	seen := map[canon.Key]bool{}
	for i := range p.Inputs {
		for _, k := range append([]canon.Key{p.Inputs[i].Component}, p.Inputs[i].MemoKeys()...) {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// memoKeys are the keys whose memo entries a pipeline reads, each once, in
// input order.
func (p *Pipeline) memoKeys() []canon.Key {
	var out []canon.Key
	seen := map[canon.Key]bool{}
	for i := range p.Inputs {
		for _, k := range p.Inputs[i].MemoKeys() {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// Memoizes reports whether the pipeline reads k's memo entries (k is one
// of its covers' memo nodes, or a component of a record from before
// covers).
func (p *Pipeline) Memoizes(k canon.Key) bool {
	for i := range p.Inputs {
		if slices.Contains(p.Inputs[i].MemoKeys(), k) {
			return true
		}
	}
	return false
}

// PipelineInput is one model input of a registered pipeline.
type PipelineInput struct {
	Name      string    `json:"name"`
	Component canon.Key `json:"component"`
	Type      string    `json:"type"`
	// Cover is the insertion policy's cover of the component, decided when
	// the pipeline was submitted. Nil in a record written before covers:
	// the whole component is memoized, as the paper's SIG does.
	Cover *Cover `json:"cover,omitempty"`
}

// Cover is which nodes of a model input's component are memoized (issue 20,
// matching/insertion): readers fetch the memo nodes and compute the
// residual ops above them. Memo is exactly the component's key when the
// whole component is memoized, empty when readers compute it from raw
// columns.
type Cover struct {
	Memo []canon.Key `json:"memo"`
	// Residual is the component's canonical DSL with the memo nodes as
	// memo("<key prefix>"), for people.
	Residual string `json:"residual,omitempty"`
	Reason   string `json:"reason"`
	// Override is the owner's override ("always", "never"), if any.
	Override string `json:"override,omitempty"`
}

// MemoKeys are the keys whose memo entries the input reads: its cover's
// memo nodes, or its component (a record from before covers).
func (in *PipelineInput) MemoKeys() []canon.Key {
	if in.Cover == nil {
		return []canon.Key{in.Component}
	}
	return in.Cover.Memo
}

// Computed reports whether readers compute the input (its component is not
// memoized whole).
func (in *PipelineInput) Computed() bool {
	return in.Cover != nil && !(len(in.Cover.Memo) == 1 && in.Cover.Memo[0] == in.Component)
}
