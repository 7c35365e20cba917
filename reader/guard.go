package reader

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
)

// The shared-fate guard (paper VIII.E: memoized data shared by many
// revenue-critical models is a shared-fate risk; issue 21). A memo object
// whose bytes are sound (checksums, footer, alignment: what the rest of
// the reader checks) can still hold wrong values: a faulty worker, a kernel
// bug on one machine, a bad CPU. Every model reading the object would
// train on them. So a reader recomputes a few rows of every memo object a
// unit reads (its MEMO inputs' and the memo nodes its LOCAL inputs read)
// from the raw block, with the canonical DSL the unit carries, and
// compares them with the memo object's rows bit for bit
// (transform.SameRow). A difference fails the unit with DataLoss, reason
// MEMO_MISMATCH, and is reported to sigd, which recomputes the block
// itself to confirm it before it quarantines the entry (eviction).
//
// Rows, not the whole block: every op is defined row by row (transform's
// semantics; internal/rowref computes each row on its own), so a
// component run over a record of some rows of the raw block gives exactly
// those rows of its output over the whole block, and the guard costs a few
// rows' compute (TestGuardOpsAreRowLocal fails for an op added without
// checking this). What it does cost is fetching the raw columns the guarded
// components read, whole (a segment is the unit of a ranged read and of
// its checksum); bench/reader.sh measures it (BenchmarkGuard).
//
// The rows are chosen from a seed of the unit's id, block and component
// (guardRows), so that a unit read again checks the same rows (a failure
// is reproducible, a retry does not pass by luck), while other units of
// the block (other epochs, other pipelines) check other rows. With
// Config.GuardEvery = N the same seed picks one unit in N to guard an
// input in, for 1/N of the cost.

// DefaultGuardSampleRows is the rows of each MEMO input a unit recomputes
// by default (Config.GuardSampleRows; cmd/reader --guard-sample-rows).
const DefaultGuardSampleRows = 16

// ErrMemoMismatch: a memo object's values differ from what its component
// computes from the raw block (the guard). The guard's errors wrap it and
// ErrCorrupt.
var ErrMemoMismatch = errors.New("memo mismatch")

// ReasonMemoMismatch is the ErrorInfo reason of a guard failure.
const ReasonMemoMismatch = "MEMO_MISMATCH"

// mismatchError is a memo object whose row Row differs from the recomputed
// value; it names the input, the component, the block and the first
// differing row of the sample.
type mismatchError struct {
	Input     string
	Component canon.Key
	Block     string
	Row       int64 // in the block
	EventID   int64
	Memo      string // the memo object's value (transform.FormatRow)
	Local     string // the recomputed one
	Checked   int    // rows of the sample
}

func (e *mismatchError) Error() string {
	return fmt.Sprintf("memo mismatch: input %q (component %s) of block %s: row %d (event_id %d) holds %s in the memo object, "+
		"but the component computes %s from the raw block (%d sampled rows checked)",
		e.Input, e.Component, e.Block, e.Row, e.EventID, e.Memo, e.Local, e.Checked)
}

func (e *mismatchError) Unwrap() []error { return []error{ErrMemoMismatch, ErrCorrupt} }

// guardPlan is what a unit's guard runs: per guarded memo object (a MEMO
// input's, or a memo node's a LOCAL input reads) the program of its
// component, whose output is what the object must hold.
type guardPlan struct {
	inputs []guardInput // by plan.inputs index, MEMO inputs only
	nodes  map[int]guardInput
}

type guardInput struct {
	idx  int // in plan.inputs, or in plan.nodes
	prog *transform.Program
}

// sampleRows is the configured rows per input, 0 when the guard is off.
func (c *Config) sampleRows() int {
	switch {
	case c.GuardSampleRows < 0:
		return 0
	case c.GuardSampleRows == 0:
		return DefaultGuardSampleRows
	}
	return c.GuardSampleRows
}

// guardTurn reports whether this unit guards memo object k (GuardEvery).
func (s *Server) guardTurn(p *plan, k canon.Key) bool {
	n := uint64(s.cfg.GuardEvery)
	return n <= 1 || guardSeed(p.unit.GetUnitId(), p.unit.GetBlockId(), k)%n == 0
}

// parseGuardDSL parses and canonicalizes the canonical DSL of unit input i
// (one model input named out), errors naming its field.
func parseGuardDSL(p *plan, i int, lim transform.Limits) (*canon.Canonical, error) {
	field := fmt.Sprintf("inputs[%d].canonical_dsl", i)
	dsl := p.unit.Inputs[i].GetCanonicalDsl()
	if len(dsl) > lim.MaxSourceBytes {
		return nil, invalid(field, "%d bytes, more than %d", len(dsl), lim.MaxSourceBytes)
	}
	parsed, err := transform.Parse([]byte(dsl), "", lim)
	if err != nil {
		return nil, invalid(field, "%v", err)
	}
	if len(parsed.Inputs) != 1 || parsed.Inputs[0].Name != "out" {
		return nil, invalid(field, "want exactly one model input named out, as in a read solution")
	}
	c, err := canon.Canonicalize(parsed, p.schema, p.reg, lim)
	if err != nil {
		return nil, invalid(field, "%v", err)
	}
	return c, nil
}

// guardOf returns the guard of component comp of c (its program, whose
// raw columns are added to those p reads).
func guardOf(p *plan, c *canon.Canonical, comp *canon.Component, idx int, field string, lim transform.Limits) (guardInput, error) {
	prog, err := transform.Compile(c.ComponentGraph(comp, "out"), p.schema, p.reg, lim)
	if err != nil {
		return guardInput{}, invalid(field, "%v", err)
	}
	for _, col := range prog.Columns()[1:] { // event_id is always read
		if !slices.Contains(p.rawColumns, col) {
			p.rawColumns = append(p.rawColumns, col)
		}
	}
	return guardInput{idx: idx, prog: prog}, nil
}

// planGuard plans the guard of unit p: every MEMO input that carries its
// canonical DSL (read solutions give it for every input) is guarded, and
// every memo node the LOCAL inputs read, with the cone of the node in the
// DSL of a LOCAL input listing it; the raw columns their components read
// are added to those p reads. A MEMO input's DSL must canonicalize to the
// input's component key and type, as a LOCAL input's must (errors name
// inputs[i].canonical_dsl or .type): the guard never compares a memo
// object with another component's values.
func (s *Server) planGuard(p *plan) error {
	if s.cfg.sampleRows() == 0 {
		return nil
	}
	lim := s.cfg.Limits.Graph
	g := &guardPlan{nodes: map[int]guardInput{}}
	for i, in := range p.inputs {
		if in.mode != readerv1.InputMode_INPUT_MODE_MEMO || p.unit.Inputs[i].GetCanonicalDsl() == "" || !s.guardTurn(p, in.component) {
			continue // not read from memo, no DSL, or another unit's turn (its DSL is not run, so not checked)
		}
		c, err := parseGuardDSL(p, i, lim)
		if err != nil {
			return err
		}
		comp := &c.Components[0]
		field := fmt.Sprintf("inputs[%d]", i)
		if comp.Key != in.component {
			return invalid(field+".canonical_dsl", "canonicalizes to component %s, not component_key %s",
				comp.Key.Short(), in.component.Short())
		}
		if comp.Type != in.typ {
			return invalid(field+".type", "%s, but the component's type is %s", in.typ, comp.Type)
		}
		gi, err := guardOf(p, c, comp, i, field+".canonical_dsl", lim)
		if err != nil {
			return err
		}
		g.inputs = append(g.inputs, gi)
	}
	// Memo nodes: p.nodes are those the residual reads, each once; its
	// cone comes from the first LOCAL input listing it (planLocal checked
	// that the node is a node of that input's component).
	want := map[canon.Key]int{}
	for j, nd := range p.nodes {
		if s.guardTurn(p, nd.component) {
			want[nd.component] = j
		}
	}
	for x, mns := range p.memoNodes {
		if len(want) == 0 {
			break
		}
		var c *canon.Canonical
		for _, mn := range mns {
			j, ok := want[mn.read.component]
			if !ok {
				continue
			}
			i := p.localIdx[x]
			if c == nil {
				var err error
				if c, err = parseGuardDSL(p, i, lim); err != nil {
					return err
				}
			}
			n, ok := c.NodeIndex(mn.read.component)
			if !ok {
				continue // planLocal's check makes this impossible
			}
			cone := c.Cone(n, "out")
			gi, err := guardOf(p, c, &cone, j, fmt.Sprintf("inputs[%d].canonical_dsl", i), lim)
			if err != nil {
				return err
			}
			g.nodes[j] = gi
			delete(want, mn.read.component)
		}
	}
	if len(g.inputs) > 0 || len(g.nodes) > 0 {
		p.guard = g
	}
	return nil
}

// guardSeed is the seed of the rows a unit's guard checks for one
// component: the unit's id, its block and the component.
func guardSeed(unitID, blockID string, k canon.Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(unitID))
	h.Write([]byte{0})
	h.Write([]byte(blockID))
	h.Write([]byte{0})
	h.Write(k[:])
	return h.Sum64()
}

// guardRows returns k distinct rows of [0, n), ascending, drawn uniformly
// from seed (Floyd's algorithm: every row as likely as any other, rows 0
// and n-1 included, in k steps); all rows when k >= n.
func guardRows(n int64, k int, seed uint64) []int {
	if n <= 0 || k <= 0 {
		return nil
	}
	if int64(k) >= n {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^seed))
	chosen := make(map[int64]bool, k)
	out := make([]int, 0, k)
	for j := n - int64(k); j < n; j++ {
		t := rng.Int64N(j + 1)
		if chosen[t] {
			t = j
		}
		chosen[t] = true
		out = append(out, int(t))
	}
	slices.Sort(out)
	return out
}

// guard checks the sampled rows of every guarded MEMO input of p: cols
// are the batch columns (event_id, labels, inputs) over the whole block,
// raw the raw block's columns read (event_id first).
func (s *Server) guard(p *plan, raw arrow.Record, cols []arrow.Array) error {
	if p.guard == nil {
		return nil
	}
	for _, gi := range p.guard.inputs {
		if err := s.guardColumn(p, p.inputs[gi.idx], gi, raw, cols[1+len(p.labels)+gi.idx]); err != nil {
			return err
		}
	}
	return nil
}

// guardNode checks the sampled rows of memo node p.nodes[j], col being
// its memo object's column, if it is guarded.
func (s *Server) guardNode(p *plan, j int, raw arrow.Record, col arrow.Array) error {
	if p.guard == nil {
		return nil
	}
	gi, ok := p.guard.nodes[j]
	if !ok {
		return nil
	}
	return s.guardColumn(p, p.nodes[j], gi, raw, col)
}

// guardColumn recomputes the sampled rows of memo object in's column
// memoCol and compares them. A sample that cannot be computed (an op
// fails on it, which the worker's run over the whole block did not) is
// logged and counted and does not fail the unit: the memo data may well
// be right.
func (s *Server) guardColumn(p *plan, in inputPlan, gi guardInput, raw arrow.Record, memoCol arrow.Array) error {
	rows := guardRows(raw.NumRows(), s.cfg.sampleRows(), guardSeed(p.unit.GetUnitId(), p.unit.GetBlockId(), in.component))
	if len(rows) == 0 {
		return nil
	}
	local, err := s.guardCompute(raw, gi, rows)
	if err != nil {
		s.guardMetrics.errors.Add(1)
		s.cfg.Logger.Warn("guard could not recompute sampled rows", "unit", p.unit.GetUnitId(), "block", p.unit.GetBlockId(),
			"input", in.name, "component", in.component.String(), "err", err)
		return nil
	}
	defer local.Release()
	s.guardMetrics.rows.Add(int64(len(rows)))
	for x, r := range rows {
		if transform.SameRow(memoCol, r, local, x) {
			continue
		}
		err := &mismatchError{Input: in.name, Component: in.component, Block: p.unit.GetBlockId(), Row: int64(r),
			EventID: raw.Column(0).(*array.Int64).Value(r), Memo: transform.FormatRow(memoCol, r),
			Local: transform.FormatRow(local, x), Checked: len(rows)}
		s.guardMetrics.mismatches.WithLabelValues(in.component.String()).Inc()
		s.noteMemoError(p, in, err)
		return err
	}
	return nil
}

// guardCompute runs gi's component over rows of raw.
func (s *Server) guardCompute(raw arrow.Record, gi guardInput, rows []int) (arrow.Array, error) {
	names := gi.prog.Columns()
	fields := make([]arrow.Field, len(names))
	sample := make([]arrow.Array, len(names))
	defer func() {
		for _, c := range sample {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, name := range names {
		idx := raw.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("raw column %q was not read", name)
		}
		fields[i] = raw.Schema().Field(idx[0])
		c, err := takeRows(raw.Column(idx[0]), rows)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		sample[i] = c
	}
	rec := array.NewRecord(arrow.NewSchema(fields, nil), sample, int64(len(rows)))
	defer rec.Release()
	out, err := gi.prog.Run(rec, nil)
	if err != nil {
		return nil, err
	}
	if out[0].Len() != len(rows) {
		out[0].Release()
		return nil, fmt.Errorf("computed %d rows from %d", out[0].Len(), len(rows))
	}
	return out[0], nil
}

// takeRows returns a new array of rows of a, in order: one-row slices
// concatenated by Arrow, for every type (a sample is a few rows).
func takeRows(a arrow.Array, rows []int) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	parts := make([]arrow.Array, len(rows))
	for i, r := range rows {
		parts[i] = array.NewSlice(a, int64(r), int64(r+1))
	}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	return array.Concatenate(parts, mem)
}

// guardMetrics are the guard's counters (MetricGuardRows,
// MetricMemoMismatches, MetricGuardErrors).
type guardMetrics struct {
	rows, errors atomic.Int64
	mismatches   *prometheus.CounterVec
}

// Metric names of the guard.
const (
	// MetricGuardRows counts the memo rows the guard recomputed and
	// compared.
	MetricGuardRows = "sig_reader_guard_rows_total"
	// MetricMemoMismatches counts units failed because a memo object's
	// sampled rows differed from the recomputed ones, by component (hex
	// key): each is a memo object that was wrong, or a reader computing
	// wrong.
	MetricMemoMismatches = "sig_reader_memo_mismatches_total"
	// MetricGuardErrors counts guarded inputs whose sample could not be
	// recomputed (the unit was served unchecked).
	MetricGuardErrors = "sig_reader_guard_errors_total"
)

var (
	descGuardRows   = prometheus.NewDesc(MetricGuardRows, "Memo rows recomputed and compared by the guard.", nil, nil)
	descGuardErrors = prometheus.NewDesc(MetricGuardErrors, "Guarded inputs whose sampled rows could not be recomputed.", nil, nil)
)

func newGuardMetrics() *guardMetrics {
	return &guardMetrics{mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricMemoMismatches,
		Help: "Units failed by the guard: memo values differing from a recomputation, by component."}, []string{"component"})}
}

func (m *guardMetrics) describe(ch chan<- *prometheus.Desc) {
	ch <- descGuardRows
	ch <- descGuardErrors
	m.mismatches.Describe(ch)
}

func (m *guardMetrics) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descGuardRows, prometheus.CounterValue, float64(m.rows.Load()))
	ch <- prometheus.MustNewConstMetric(descGuardErrors, prometheus.CounterValue, float64(m.errors.Load()))
	m.mismatches.Collect(ch)
}
