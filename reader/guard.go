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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
// The rows are chosen per read (issue 27): from a seed of the unit's id,
// block and component (guardSeed) mixed with a nonce drawn for each read
// (readSeed). A trainer's unit id is its block's reference, so every job
// reading a memo block sends the same unit: a sample of the unit alone
// checked the same 16 rows for every job, and 22 pipelines reading the
// block checked those rows 22 times, while the paper's shared-fate risk
// (VIII.E) grows with exactly that reuse. With a sample per read, k reads
// of s rows check about k·s rows of the block, and a block with m wrong
// rows of n is caught with probability 1 - (1 - m/n)^(k·s)
// (bench/guard-detection.txt measures it). A failure stays reproducible:
// its error carries the seed of the rows it checked (MEMO_MISMATCH's
// guard_seed; GuardSample replays it). With Config.GuardEvery = N the
// same seed picks whether this read guards an input (one read in N), so
// that every read of a block has the same chance of being the guarded one.

// DefaultGuardSampleRows is the rows of each MEMO input a unit recomputes
// by default (Config.GuardSampleRows; cmd/reader --guard-sample-rows).
const DefaultGuardSampleRows = 16

// ErrMemoMismatch: a memo object's values differ from what its component
// computes from the raw block (the guard). The guard's errors wrap it and
// ErrCorrupt.
var ErrMemoMismatch = errors.New("memo mismatch")

// ReasonMemoMismatch is the ErrorInfo reason of a guard failure.
const ReasonMemoMismatch = "MEMO_MISMATCH"

// ErrGuard: the guard could not recompute a memo object's sampled rows
// (an op failed on them), and Config.GuardOnError is GuardFail. The memo
// data may be right: the reader could not check it.
var ErrGuard = errors.New("guard could not check memo data")

// ReasonGuardError is the ErrorInfo reason of a unit failed because its
// guard could not compute its sample (GuardFail).
const ReasonGuardError = "GUARD_ERROR"

// GuardOnError is what a reader does with a unit whose guard could not
// compute its sample (Config.GuardOnError; cmd/reader --guard-on-error).
type GuardOnError uint8

const (
	// GuardServe serves the unit unchecked (the default): the failure is
	// the reader's (it computes otherwise than the worker did), not
	// evidence against the memo data, and it is logged and counted
	// (MetricGuardErrors).
	GuardServe GuardOnError = iota
	// GuardFail fails the unit with FailedPrecondition, reason
	// GUARD_ERROR, naming the input, component, block and the sample's
	// seed: no memo data is served unchecked.
	GuardFail
)

func (g GuardOnError) String() string {
	if g == GuardFail {
		return "fail"
	}
	return "serve"
}

// ParseGuardOnError parses "serve" or "fail".
func ParseGuardOnError(s string) (GuardOnError, error) {
	switch s {
	case "serve":
		return GuardServe, nil
	case "fail":
		return GuardFail, nil
	}
	return 0, fmt.Errorf("%q: want serve or fail", s)
}

// guardError is a guarded memo object whose sample could not be
// recomputed, under GuardFail.
type guardError struct {
	Input     string
	Component canon.Key
	Block     string
	Seed      uint64
	Err       error
}

func (e *guardError) Error() string {
	return fmt.Sprintf("%v: input %q (component %s) of block %s: its sampled rows (guard seed %#016x) could not be recomputed "+
		"from the raw block: %v (the reader serves no memo data it could not check: --guard-on-error fail)",
		ErrGuard, e.Input, e.Component, e.Block, e.Seed, e.Err)
}

func (e *guardError) Unwrap() error { return ErrGuard }

// GRPCStatus is the status the unit fails with: FailedPrecondition (a
// retry on this reader computes the same way), reason GUARD_ERROR.
func (e *guardError) GRPCStatus() *status.Status {
	st := status.New(codes.FailedPrecondition, e.Error())
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonGuardError, Domain: ErrorDomain, Metadata: map[string]string{
		"input": e.Input, "component": e.Component.String(), "block": e.Block, "guard_seed": fmt.Sprintf("%#016x", e.Seed)}}); err == nil {
		st = d
	}
	return st
}

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
	// Seed is the seed of the sample (readSeed): GuardSample(block rows,
	// Checked, Seed) gives the rows checked.
	Seed uint64
}

func (e *mismatchError) Error() string {
	return fmt.Sprintf("memo mismatch: input %q (component %s) of block %s: row %d (event_id %d) holds %s in the memo object, "+
		"but the component computes %s from the raw block (%d sampled rows checked, guard seed %#016x)",
		e.Input, e.Component, e.Block, e.Row, e.EventID, e.Memo, e.Local, e.Checked, e.Seed)
}

func (e *mismatchError) Unwrap() []error { return []error{ErrMemoMismatch, ErrCorrupt} }

// guardPlan is what a unit's guard runs: per guarded memo object (a MEMO
// input's, or a memo node's a LOCAL input reads) the program of its
// component, whose output is what the object must hold.
type guardPlan struct {
	inputs []guardInput // by plan.inputs index, MEMO inputs only
	nodes  map[int]guardInput
	// nonce is this read's, mixed into every guarded object's seed
	// (readSeed).
	nonce uint64
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

// guardTurn reports whether the read of p with nonce guards memo object k
// (GuardEvery).
func (s *Server) guardTurn(p *plan, k canon.Key, nonce uint64) bool {
	n := uint64(s.cfg.GuardEvery)
	return n <= 1 || objectSeed(p, k, nonce)%n == 0
}

// parseGuardDSL parses and canonicalizes dsl, the canonical DSL of unit
// input i (one model input named out), errors naming its field.
func parseGuardDSL(dsl string, i int, sc *transform.Schema, reg *transform.Registry, lim transform.Limits) (*canon.Canonical, error) {
	field := fmt.Sprintf("inputs[%d].canonical_dsl", i)
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
	c, err := canon.Canonicalize(parsed, sc, reg, lim)
	if err != nil {
		return nil, invalid(field, "%v", err)
	}
	return c, nil
}

// guardOf returns the guard of component comp of c.
func guardOf(t *plan, c *canon.Canonical, comp *canon.Component, idx int, field string, lim transform.Limits) (guardInput, error) {
	prog, err := transform.Compile(c.ComponentGraph(comp, "out"), t.schema, t.reg, lim)
	if err != nil {
		return guardInput{}, invalid(field, "%v", err)
	}
	return guardInput{idx: idx, prog: prog}, nil
}

// inputGuard returns the guard of MEMO input i of the shape, compiled on
// first use: its DSL must canonicalize to the input's component key and
// type, as a LOCAL input's must (errors name inputs[i].canonical_dsl or
// .type): the guard never compares a memo object with another
// component's values. ok is false for an input without a DSL.
func (sh *shape) inputGuard(i int, lim transform.Limits) (guardInput, bool, error) {
	g := &sh.guards[i]
	g.once.Do(func() {
		if sh.dsls[i] == "" {
			return
		}
		t, in := sh.tmpl, sh.tmpl.inputs[i]
		c, err := parseGuardDSL(sh.dsls[i], i, t.schema, t.reg, lim)
		if err != nil {
			g.err = err
			return
		}
		comp := &c.Components[0]
		field := fmt.Sprintf("inputs[%d]", i)
		if comp.Key != in.component {
			g.err = invalid(field+".canonical_dsl", "canonicalizes to component %s, not component_key %s",
				comp.Key.Short(), in.component.Short())
			return
		}
		if comp.Type != in.typ {
			g.err = invalid(field+".type", "%s, but the component's type is %s", in.typ, comp.Type)
			return
		}
		g.gi, g.err = guardOf(t, c, comp, i, field+".canonical_dsl", lim)
		g.ok = g.err == nil
		sh.compiled.Add(1)
	})
	return g.gi, g.ok, g.err
}

// nodeGuard returns the guard of memo node j of the shape, compiled on
// first use: the node's cone in the DSL of the first LOCAL input listing
// it (planLocal checked that the node is a node of that input's
// component). ok is false when there is none.
func (sh *shape) nodeGuard(j int, lim transform.Limits) (guardInput, bool, error) {
	g := &sh.nodeGuards[j]
	g.once.Do(func() {
		x := sh.nodeGuardSrc[j]
		if x < 0 {
			return
		}
		t := sh.tmpl
		i := t.localIdx[x]
		c, err := parseGuardDSL(sh.dsls[i], i, t.schema, t.reg, lim)
		if err != nil {
			g.err = err
			return
		}
		n, ok := c.NodeIndex(t.nodes[j].component)
		if !ok {
			return // planLocal's check makes this impossible
		}
		cone := c.Cone(n, "out")
		g.gi, g.err = guardOf(t, c, &cone, j, fmt.Sprintf("inputs[%d].canonical_dsl", i), lim)
		g.ok = g.err == nil
		sh.compiled.Add(1)
	})
	return g.gi, g.ok, g.err
}

// planGuard plans the guard of this read of unit p: every MEMO input that
// carries its canonical DSL (read solutions give it for every input) is
// guarded, and every memo node the LOCAL inputs read, with the cone of the
// node in the DSL of a LOCAL input listing it (their programs are the
// shape's: shape.inputGuard, shape.nodeGuard); with Config.GuardEvery,
// those whose turn this read is. The raw columns their components read
// are added to those p reads, so that the unit fetches them with the rest
// of its raw columns, once.
func (s *Server) planGuard(p *plan) error {
	if s.cfg.sampleRows() == 0 {
		return nil
	}
	lim := s.cfg.Limits.Graph
	sh := p.shape
	g := &guardPlan{nodes: map[int]guardInput{}, nonce: s.guardNonce()}
	add := func(gi guardInput) {
		for _, col := range gi.prog.Columns()[1:] { // event_id is always read
			if !slices.Contains(p.rawColumns, col) {
				p.rawColumns = append(p.rawColumns, col)
			}
		}
	}
	for i, in := range p.inputs {
		if in.mode != readerv1.InputMode_INPUT_MODE_MEMO || !s.guardTurn(p, in.component, g.nonce) {
			continue // not read from memo, or another read's turn (its DSL is not run, so not checked)
		}
		gi, ok, err := sh.inputGuard(i, lim)
		if err != nil {
			return err
		}
		if ok {
			add(gi)
			g.inputs = append(g.inputs, gi)
		}
	}
	for j, nd := range p.nodes {
		if !s.guardTurn(p, nd.component, g.nonce) {
			continue
		}
		gi, ok, err := sh.nodeGuard(j, lim)
		if err != nil {
			return err
		}
		if ok {
			add(gi)
			g.nodes[j] = gi
		}
	}
	if len(g.inputs) > 0 || len(g.nodes) > 0 {
		p.guard = g
	}
	return nil
}

// guardSeed is a unit's part of the seed of the rows a read's guard
// checks for one component: the unit's id, its block and the component.
// Every read of the unit mixes its own nonce into it (readSeed).
func guardSeed(unitID, blockID string, k canon.Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(unitID))
	h.Write([]byte{0})
	h.Write([]byte(blockID))
	h.Write([]byte{0})
	h.Write(k[:])
	return h.Sum64()
}

// readSeed is the seed of the rows one read checks for one memo object:
// the unit's seed (guardSeed) and the read's nonce, mixed by SplitMix64's
// finalizer so that nearby nonces give unrelated seeds.
func readSeed(unitSeed, nonce uint64) uint64 {
	z := unitSeed ^ (nonce * 0x9e3779b97f4a7c15)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// objectSeed is the seed of the read of p with nonce for memo object k.
func objectSeed(p *plan, k canon.Key, nonce uint64) uint64 {
	return readSeed(guardSeed(p.unit.GetUnitId(), p.unit.GetBlockId(), k), nonce)
}

// GuardSample returns the rows of a block of blockRows rows that a guard
// sampling sampleRows rows with seed checks: the rows behind a
// MEMO_MISMATCH error's guard_seed (with its count of rows checked), to
// replay a guard's check.
func GuardSample(blockRows int64, sampleRows int, seed uint64) []int {
	return guardRows(blockRows, sampleRows, seed)
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
// logged and counted (MetricGuardErrors); by default it does not fail the
// unit, since the memo data may well be right, and with
// Config.GuardOnError = GuardFail it does (a guardError).
func (s *Server) guardColumn(p *plan, in inputPlan, gi guardInput, raw arrow.Record, memoCol arrow.Array) error {
	seed := objectSeed(p, in.component, p.guard.nonce)
	rows := guardRows(raw.NumRows(), s.cfg.sampleRows(), seed)
	if len(rows) == 0 {
		return nil
	}
	var local arrow.Array
	var x int
	var err error
	s.guardNanos.Add(int64(onThreadCPU(func() { local, x, err = checkSample(raw, gi, memoCol, rows) })))
	if err != nil {
		s.guardMetrics.errors.Add(1)
		s.cfg.Logger.Warn("guard could not recompute sampled rows", "unit", p.unit.GetUnitId(), "block", p.unit.GetBlockId(),
			"input", in.name, "component", in.component.String(), "guard_seed", fmt.Sprintf("%#016x", seed), "rows", len(rows),
			"on_error", s.cfg.GuardOnError.String(), "err", err)
		if s.cfg.GuardOnError == GuardFail {
			return &guardError{Input: in.name, Component: in.component, Block: p.unit.GetBlockId(), Seed: seed, Err: err}
		}
		return nil
	}
	defer local.Release()
	s.guardMetrics.rows.Add(int64(len(rows)))
	if x < 0 {
		return nil
	}
	r := rows[x]
	merr := &mismatchError{Input: in.name, Component: in.component, Block: p.unit.GetBlockId(), Row: int64(r),
		EventID: raw.Column(0).(*array.Int64).Value(r), Memo: transform.FormatRow(memoCol, r),
		Local: transform.FormatRow(local, x), Checked: len(rows), Seed: seed}
	s.guardMetrics.mismatches.WithLabelValues(in.component.String()).Inc()
	s.noteMemoError(p, in, merr)
	return merr
}

// checkSample recomputes rows of raw with gi's component and compares
// them with the same rows of memoCol, bit for bit (transform.SameRow): the
// recomputed values and the index in rows of the first that differs, -1
// when none does. It is the whole of a guard's check but for drawing the
// rows (guardColumn; bench/guard-detection.sh measures it over many
// reads).
func checkSample(raw arrow.Record, gi guardInput, memoCol arrow.Array, rows []int) (local arrow.Array, diff int, err error) {
	local, err = guardCompute(raw, gi, rows)
	if err != nil {
		return nil, -1, err
	}
	return local, transform.FirstDifferenceAt(memoCol, rows, local), nil
}

// guardCompute runs gi's component over rows of raw.
func guardCompute(raw arrow.Record, gi guardInput, rows []int) (arrow.Array, error) {
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

// takeRows returns a new array of rows of a, in order (a sample is a few
// rows): copied value by value where appendRow knows the type, else
// one-row slices concatenated by Arrow.
func takeRows(a arrow.Array, rows []int) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	b := array.NewBuilder(mem, a.DataType())
	defer b.Release()
	b.Reserve(len(rows))
	ok := true
	for _, r := range rows {
		if ok = appendRow(b, a, r); !ok {
			break
		}
	}
	if ok {
		return b.NewArray(), nil
	}
	// A type appendRow does not copy: a slice per row, concatenated.
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

// appendRow appends row r of a to b, a builder of a's type, and says
// whether it could: the raw columns' types (integers, floats, booleans,
// strings, binary and lists of them) are copied value by value, which for
// the guard's few rows costs a fraction of slicing and concatenating
// (bench/caughtup.txt's guard column); any other type is not.
func appendRow(b array.Builder, a arrow.Array, r int) bool {
	if a.IsNull(r) {
		b.AppendNull()
		return true
	}
	switch a := a.(type) {
	case *array.Int64:
		b.(*array.Int64Builder).Append(a.Value(r))
	case *array.Int32:
		b.(*array.Int32Builder).Append(a.Value(r))
	case *array.Int16:
		b.(*array.Int16Builder).Append(a.Value(r))
	case *array.Int8:
		b.(*array.Int8Builder).Append(a.Value(r))
	case *array.Uint64:
		b.(*array.Uint64Builder).Append(a.Value(r))
	case *array.Uint32:
		b.(*array.Uint32Builder).Append(a.Value(r))
	case *array.Uint16:
		b.(*array.Uint16Builder).Append(a.Value(r))
	case *array.Uint8:
		b.(*array.Uint8Builder).Append(a.Value(r))
	case *array.Float64:
		b.(*array.Float64Builder).Append(a.Value(r))
	case *array.Float32:
		b.(*array.Float32Builder).Append(a.Value(r))
	case *array.Boolean:
		b.(*array.BooleanBuilder).Append(a.Value(r))
	case *array.String:
		b.(*array.StringBuilder).Append(a.Value(r))
	case *array.LargeString:
		b.(*array.LargeStringBuilder).Append(a.Value(r))
	case *array.Binary:
		b.(*array.BinaryBuilder).Append(a.Value(r))
	case *array.List:
		lb, ok := b.(*array.ListBuilder)
		if !ok {
			return false
		}
		lb.Append(true)
		start, end := a.ValueOffsets(r)
		vals, vb := a.ListValues(), lb.ValueBuilder()
		for j := start; j < end; j++ {
			if !appendRow(vb, vals, int(j)) {
				return false
			}
		}
	default:
		return false
	}
	return true
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
