package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestGuardRows: the sample is a function of its seed, k distinct rows in
// [0, n) ascending (all rows when k >= n), and over seeds every row is
// drawn, the first and the last included, about k/n of the time.
func TestGuardRows(t *testing.T) {
	const n, k, seeds = 100, 16, 2000
	hits := make([]int, n)
	for seed := uint64(0); seed < seeds; seed++ {
		rows := guardRows(n, k, seed)
		if !slices.Equal(rows, guardRows(n, k, seed)) {
			t.Fatalf("seed %d: two draws differ", seed)
		}
		if len(rows) != k || !slices.IsSorted(rows) || len(slices.Compact(slices.Clone(rows))) != k || rows[0] < 0 || rows[k-1] >= n {
			t.Fatalf("seed %d: rows %v, want %d distinct sorted rows in [0, %d)", seed, rows, k, n)
		}
		for _, r := range rows {
			hits[r]++
		}
	}
	// Each row is drawn with probability k/n = 0.16: 320 of 2000 seeds,
	// standard deviation 16. 5 deviations either way.
	for r, h := range hits {
		if h < 240 || h > 400 {
			t.Errorf("row %d drawn %d times in %d seeds, want about %d", r, h, seeds, seeds*k/n)
		}
	}
	if slices.Equal(guardRows(n, k, 1), guardRows(n, k, 2)) {
		t.Error("seeds 1 and 2 draw the same rows")
	}
	if got := guardRows(5, 16, 9); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("16 rows of 5: %v, want all", got)
	}
	if got := guardRows(0, 16, 9); len(got) != 0 {
		t.Errorf("rows of an empty block: %v", got)
	}
	k1 := canon.Key{1}
	if guardSeed("u1", "b", k1) == guardSeed("u2", "b", k1) || guardSeed("u1", "b", k1) == guardSeed("u1", "c", k1) ||
		guardSeed("u1", "b", k1) == guardSeed("u1", "b", canon.Key{2}) || guardSeed("u1", "b", k1) != guardSeed("u1", "b", k1) {
		t.Error("the seed is not a function of unit, block and component")
	}
	// A read's seed is the unit's and the read's nonce: the same nonce
	// gives the same rows (a logged seed replays the sample, GuardSample),
	// another nonce other rows.
	u := guardSeed("u1", "b", k1)
	if readSeed(u, 7) != readSeed(u, 7) || readSeed(u, 7) == readSeed(u, 8) || readSeed(u, 7) == readSeed(guardSeed("u2", "b", k1), 7) {
		t.Error("the read's seed is not a function of the unit's seed and the nonce")
	}
	if got := GuardSample(n, k, readSeed(u, 7)); !slices.Equal(got, guardRows(n, k, readSeed(u, 7))) {
		t.Errorf("GuardSample %v is not the guard's sample", got)
	}
}

// TestGuardPassesHonestMemos: with every row sampled, the guard recomputes
// every input of every example pipeline over every row of blocks with
// nulls and finds the memo objects SIG workers write equal: running a
// component over a record of some rows gives those rows of its output over
// the block (no false alarm), and the bytes served are those without the
// guard.
func TestGuardPassesHonestMemos(t *testing.T) {
	const rows = 2000
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: rows, Nulls: true,
		Graphs: fleetGraphs(t, "ctr_small", "ctr_wide", "cvr", "explore", "ranking")})
	all := f.server(t, Config{GuardSampleRows: rows})
	off := f.server(t, Config{GuardSampleRows: -1})
	ctx := context.Background()
	for b := range f.blocks {
		got, err := collect(ctx, all, &readerv1.ReadRequest{Unit: f.unit(b, 4096, nil)})
		if err != nil {
			t.Fatalf("block %d, every row guarded: %v", b, err)
		}
		want, err := collect(ctx, off, &readerv1.ReadRequest{Unit: f.unit(b, 4096, nil)})
		if err != nil {
			t.Fatal(err)
		}
		sameResponses(t, "guarded", got, "unguarded", want)
	}
	if got, want := all.guardMetrics.rows.Load(), int64(len(f.blocks)*len(f.inputs)*rows); got != want {
		t.Errorf("guard checked %d rows, want %d (every row of every input of every block)", got, want)
	}
	if all.guardMetrics.errors.Load() != 0 || off.guardMetrics.rows.Load() != 0 {
		t.Errorf("guard errors %d, rows checked with the guard off %d", all.guardMetrics.errors.Load(), off.guardMetrics.rows.Load())
	}
	// MetricTransform: the guard's recomputing is timed as guard, a LOCAL
	// input's program as local, and neither when nothing ran.
	if st := all.Stats(); st.Transform.Guard <= 0 || st.Transform.Local != 0 {
		t.Errorf("guarded memo reads: transform time %+v, want guard only", st.Transform)
	}
	if st := off.Stats(); st.Transform != (struct{ Local, Guard time.Duration }{}) {
		t.Errorf("unguarded memo reads: transform time %+v, want none", st.Transform)
	}
	if _, err := collect(ctx, off, &readerv1.ReadRequest{Unit: f.unit(0, 4096, allMode(local))}); err != nil {
		t.Fatal(err)
	}
	if st := off.Stats(); st.Transform.Local <= 0 || st.Transform.Guard != 0 {
		t.Errorf("a LOCAL read: transform time %+v, want local only", st.Transform)
	}
}

// recordingReporter keeps the reports a Server sends.
type recordingReporter struct {
	mu   sync.Mutex
	got  []string // component/block/reason
	done chan struct{}
}

func (r *recordingReporter) ReportCorruptMemo(_ context.Context, k canon.Key, blockID blockref.Memo, reason, detail string) (*sigv1.ReportCorruptMemoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, k.String()+"/"+blockID.String()+"/"+reason)
	if r.done != nil {
		close(r.done)
		r.done = nil
	}
	return &sigv1.ReportCorruptMemoResponse{}, nil
}

// perturbMemo rewrites the memo object of input in for block b through the
// memo writer (valid Arrow, valid checksums) with row r's value replaced
// by row s's: the values of a faulty worker.
func (f *fixture) perturbMemo(t *testing.T, b int, in fixtureInput, perm func(n int) []int) {
	t.Helper()
	ctx := context.Background()
	key := block.MemoKey(in.key, blockref.ParseMemo(f.blocks[b].id))
	meta, rec, err := block.ReadBlock(ctx, f.store, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	bad, err := takeRows(rec.Column(1), perm(int(rec.NumRows())))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Release()
	out := memoRecord(rec.Column(0), bad)
	defer out.Release()
	ev, _ := meta.Column(transform.ColEventID)
	meta.Columns, meta.Size, meta.Rows = nil, 0, 0
	if _, err := block.WriteWith(ctx, f.store, meta, out,
		block.EncodeOptions{Columns: map[string]block.Compression{transform.ColEventID: ev.Compression}}); err != nil {
		t.Fatal(err)
	}
}

// swapFirstDifferent swaps row r with the first later row holding another
// value of col.
func swapFirstDifferent(t *testing.T, f *fixture, b int, in fixtureInput, r int) func(int) []int {
	t.Helper()
	_, rec, err := block.ReadBlock(context.Background(), f.store, block.MemoKey(in.key, blockref.ParseMemo(f.blocks[b].id)))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	c := rec.Column(1)
	for s := r + 1; s < c.Len(); s++ {
		if !transform.SameRow(c, r, c, s) {
			return func(n int) []int {
				p := make([]int, n)
				for i := range p {
					p[i] = i
				}
				p[r], p[s] = s, r
				return p
			}
		}
	}
	t.Fatalf("input %s: no row after %d differs from it", in.name, r)
	return nil
}

// TestGuardCatchesWrongValues: a memo object rewritten with two rows'
// values swapped is valid Arrow with valid checksums, so without the guard
// the reader serves it; with the guard sampling those rows the unit fails
// with DataLoss, reason MEMO_MISMATCH, naming the input, component, block
// and first differing row, and the object is reported to sigd with that
// reason. A LIG read of the unit is unaffected. With the default sample
// (16 rows) a memo object whose every row is wrong is caught too.
func TestGuardCatchesWrongValues(t *testing.T) {
	const rows = 500
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: rows, Nulls: true, Graphs: fleetGraphs(t, "ctr_small")})
	victim := f.inputs[0]
	perm := swapFirstDifferent(t, f, 0, victim, 7)
	f.perturbMemo(t, 0, victim, perm)
	ctx := context.Background()

	if _, err := collect(ctx, f.server(t, Config{GuardSampleRows: -1}), &readerv1.ReadRequest{Unit: f.unit(0, 4096, nil)}); err != nil {
		t.Fatalf("without the guard the perturbed object is served: %v", err)
	}
	rep := &recordingReporter{done: make(chan struct{})}
	done := rep.done
	s := f.server(t, Config{GuardSampleRows: rows, Reporter: rep})
	_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 4096, nil)})
	st := Status(err)
	if !errors.Is(err, ErrMemoMismatch) || !errors.Is(err, ErrCorrupt) || st.Code() != codes.DataLoss || reasonOf(st) != ReasonMemoMismatch {
		t.Fatalf("guarded read: %v (code %v, reason %q), want DataLoss MEMO_MISMATCH", err, st.Code(), reasonOf(st))
	}
	for _, want := range []string{strconv.Quote(victim.name), victim.key.String(), f.blocks[0].id, "row 7 "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	<-done
	rep.mu.Lock()
	if want := victim.key.String() + "/" + f.blocks[0].id + "/" + ReasonMemoMismatch; !slices.Equal(rep.got, []string{want}) {
		t.Errorf("reports %v, want [%s]", rep.got, want)
	}
	rep.mu.Unlock()
	var m dto.Metric
	if err := s.guardMetrics.mismatches.WithLabelValues(victim.key.String()).Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		n := m.GetCounter().GetValue()
		t.Errorf("%s{component=%s} = %v, want 1", MetricMemoMismatches, victim.key.Short(), n)
	}
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 4096, allMode(local))}); err != nil {
		t.Errorf("LIG read of the same unit: %v", err)
	}

	// Every row wrong (each row holds its successor's value): the default
	// sample finds it.
	f.perturbMemo(t, 0, victim, func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = (i + 1) % n
		}
		return p
	})
	ds := f.server(t, Config{})
	ds.guardNonce = func() uint64 { return 42 }
	u := f.unit(0, 4096, nil)
	_, err = collect(ctx, ds, &readerv1.ReadRequest{Unit: u})
	st = Status(err)
	if st.Code() != codes.DataLoss || reasonOf(st) != ReasonMemoMismatch {
		t.Fatalf("default guard over a memo object of shifted rows: %v, want DataLoss MEMO_MISMATCH", err)
	}
	// The error carries the seed of the rows it checked (issue 27: each
	// read draws its own): the sample replays from it, and every row
	// being wrong, the first row reported is the sample's first.
	var mm *mismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("%v is no mismatchError", err)
	}
	seed := readSeed(guardSeed(u.UnitId, u.BlockId, victim.key), 42)
	sample := GuardSample(rows, mm.Checked, mm.Seed)
	if mm.Seed != seed || len(sample) != DefaultGuardSampleRows || mm.Row != int64(sample[0]) {
		t.Errorf("mismatch of seed %#x at row %d, sample %v; want seed %#x, the sample's first row", mm.Seed, mm.Row, sample, seed)
	}
	if md := errorMetadata(st); md["guard_seed"] != fmt.Sprintf("%#016x", seed) || !strings.Contains(err.Error(), md["guard_seed"]) {
		t.Errorf("ErrorInfo metadata %v and message %q: want guard_seed %#016x in both", md, err, seed)
	}
}

// errorMetadata is the ErrorInfo metadata of a reader's status.
func errorMetadata(s *status.Status) map[string]string {
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			return info.Metadata
		}
	}
	return nil
}

// failingShortRegistry is the default registry with every kernel refusing
// records of fewer than 50 rows: a reader that computes the whole block
// as the worker did but cannot compute a guard's sample.
func failingShortRegistry() *transform.Registry {
	r := transform.NewRegistry()
	for _, name := range transform.Default().Names() {
		spec, _ := transform.Default().Op(name)
		k, _ := transform.Default().Kernel(name)
		r.Register(spec, func(in []arrow.Array, n *transform.Node) (arrow.Array, error) {
			if len(in) > 0 && in[0].Len() < 50 {
				return nil, fmt.Errorf("%s refuses a record of %d rows", name, in[0].Len())
			}
			return k(in, n)
		})
	}
	return r
}

// TestGuardOnError (issue 27): a guard that cannot compute its sample
// serves the unit unchecked by default and counts it on /metrics
// (sig_reader_guard_errors_total, one per input); with GuardFail
// (--guard-on-error fail) the unit fails with FailedPrecondition, reason
// GUARD_ERROR, naming the input, component, block and the sample's seed,
// and nothing is reported to sigd (the memo data may be right).
func TestGuardOnError(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 100, Graphs: fleetGraphs(t, "ctr_small")})
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	serve := f.server(t, Config{Registry: failingShortRegistry(), Registerer: reg})
	if _, err := collect(ctx, serve, &readerv1.ReadRequest{Unit: f.unit(0, 4096, nil)}); err != nil {
		t.Fatalf("default --guard-on-error serve: %v", err)
	}
	if got := gauge(t, reg, MetricGuardErrors); got != float64(len(f.inputs)) {
		t.Errorf("%s = %v on /metrics, want %d (every input's sample)", MetricGuardErrors, got, len(f.inputs))
	}

	rep := &recordingReporter{}
	fail := f.server(t, Config{Registry: failingShortRegistry(), GuardOnError: GuardFail, Reporter: rep})
	fail.guardNonce = func() uint64 { return 9 }
	u := f.unit(0, 4096, nil)
	_, err := collect(ctx, fail, &readerv1.ReadRequest{Unit: u})
	st := Status(err)
	if !errors.Is(err, ErrGuard) || st.Code() != codes.FailedPrecondition || reasonOf(st) != ReasonGuardError {
		t.Fatalf("--guard-on-error fail: %v (code %v, reason %q), want FailedPrecondition %s", err, st.Code(), reasonOf(st), ReasonGuardError)
	}
	seed := fmt.Sprintf("%#016x", readSeed(guardSeed(u.UnitId, u.BlockId, f.inputs[0].key), 9))
	for _, want := range []string{strconv.Quote(f.inputs[0].name), f.inputs[0].key.String(), f.blocks[0].id, seed, "refuses a record"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("status message %q does not name %s", st.Message(), want)
		}
	}
	if md := errorMetadata(st); md["guard_seed"] != seed || md["component"] != f.inputs[0].key.String() {
		t.Errorf("ErrorInfo metadata %v", md)
	}
	if fail.guardMetrics.errors.Load() != 1 {
		t.Errorf("guard errors %d, want 1 (the unit failed at the first)", fail.guardMetrics.errors.Load())
	}
	fail.reports.wg.Wait()
	if len(rep.got) != 0 {
		t.Errorf("reported %v to sigd, want nothing: the reader could not check, the memo data may be right", rep.got)
	}
	if _, err := ParseGuardOnError("bogus"); err == nil {
		t.Error("ParseGuardOnError accepted bogus")
	}
}

// gauge returns the value of the unlabelled counter or gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

// TestGuardChecksMemoDSL: a MEMO input's canonical DSL is what the guard
// runs, so it must be the input's component, as a LOCAL input's must; a
// MEMO input without one is served unguarded.
func TestGuardChecksMemoDSL(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 100, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	u := f.unit(0, 4096, nil)
	u.Inputs[1].CanonicalDsl = f.inputs[0].dsl
	_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
	if st := Status(err); st.Code() != codes.InvalidArgument || !strings.Contains(err.Error(), "inputs[1].canonical_dsl") {
		t.Fatalf("a MEMO input with another component's DSL: %v, want InvalidArgument naming inputs[1].canonical_dsl", err)
	}
	u = f.unit(0, 4096, nil)
	u.Inputs[1].CanonicalDsl = ""
	before := s.guardMetrics.rows.Load()
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); err != nil {
		t.Fatal(err)
	}
	if got, want := s.guardMetrics.rows.Load()-before, int64((len(f.inputs)-1)*DefaultGuardSampleRows); got != want {
		t.Errorf("guard checked %d rows, want %d (every input but the one without a DSL)", got, want)
	}
}

// TestGuardEvery: with GuardEvery = 4 each input is guarded in about one
// read of 4, whatever the unit: reads of the same unit (every job reading
// a block sends the same one) are each guarded with that chance, so no
// block escapes the guard for good (issue 27; before, the unit's seed
// alone picked the units, and a block not picked was never guarded). A
// read's nonce decides it: the same nonce guards the same inputs.
func TestGuardEvery(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 100, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{GuardEvery: 4})
	ctx := context.Background()
	const reads = 80
	checked := func(nonce uint64) int64 {
		s.guardNonce = func() uint64 { return nonce }
		before := s.guardMetrics.rows.Load()
		if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 4096, nil)}); err != nil {
			t.Fatal(err)
		}
		return s.guardMetrics.rows.Load() - before
	}
	var total int64
	for i := range uint64(reads) {
		n := checked(i)
		if again := checked(i); again != n {
			t.Fatalf("nonce %d guarded %d rows, then %d", i, n, again)
		}
		total += n
	}
	// Binomial(80 x inputs, 1/4) input-reads of 16 rows: 5 deviations.
	trials := float64(reads * len(f.inputs))
	mean, sd := trials/4, math.Sqrt(trials*3/16)
	if got := float64(total) / DefaultGuardSampleRows; got < mean-5*sd || got > mean+5*sd {
		t.Errorf("%v input-reads of one unit guarded of %v, want about %v", got, trials, mean)
	}
}

// TestGuardMemoNodes: a LOCAL input computed over a memo node (a cover,
// issue 20) takes the node's values on trust, so the guard recomputes the
// node's sampled rows too, from the node's cone in the input's DSL. An
// honest node passes with every row sampled; a node object of wrong values
// (two rows swapped, valid checksums) is served without the guard, with
// wrong values in the input's column, and fails the unit with
// MEMO_MISMATCH naming the memo node with the guard.
func TestGuardMemoNodes(t *testing.T) {
	const rows = 400
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: rows, Nulls: true, Graphs: fleetGraphs(t, "ctr_small"), Nodes: true})
	x, n := -1, fixtureInput{}
	for i, in := range f.inputs {
		for _, nd := range in.nodes {
			if nd.key != in.key && nd.typ.IsList() {
				x, n = i, nd
				break
			}
		}
		if x >= 0 {
			break
		}
	}
	if x < 0 {
		t.Fatalf("no input of %s has an inner list node", f.inputNames())
	}
	unit := func() *readerv1.WorkUnit {
		u := f.unit(0, 4096, allMode(local))
		u.Inputs[x].MemoNodes = []*readerv1.MemoNodeRead{{Key: n.key.String(), Type: n.typ.String(),
			MemoObject: block.MemoKey(n.key, blockref.ParseMemo(f.blocks[0].id)), MemoState: sigv1.BlockState_BLOCK_STATE_READY}}
		return u
	}
	ctx := context.Background()
	all := f.server(t, Config{GuardSampleRows: rows})
	lig, err := collect(ctx, all, &readerv1.ReadRequest{Unit: f.unit(0, 4096, allMode(local))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(ctx, all, &readerv1.ReadRequest{Unit: unit()})
	if err != nil {
		t.Fatalf("honest memo node, every row guarded: %v", err)
	}
	sameResponses(t, "LIG", lig, "cover", got)
	if st := all.Stats(); st.MemoNodes != 1 || all.guardMetrics.rows.Load() != rows {
		t.Fatalf("stats %+v, %d rows guarded: want the memo node read and its %d rows guarded", st, all.guardMetrics.rows.Load(), rows)
	}

	f.perturbMemo(t, 0, n, swapFirstDifferent(t, f, 0, n, 11))
	wrong, err := collect(ctx, f.server(t, Config{GuardSampleRows: -1}), &readerv1.ReadRequest{Unit: unit()})
	if err != nil {
		t.Fatalf("without the guard the wrong memo node is served: %v", err)
	}
	if len(wrong) != len(lig) || bytes.Equal(wrong[0].ArrowIpc, lig[0].ArrowIpc) {
		t.Fatalf("the perturbed memo node did not change the served column")
	}
	_, err = collect(ctx, all, &readerv1.ReadRequest{Unit: unit()})
	if st := Status(err); st.Code() != codes.DataLoss || reasonOf(st) != ReasonMemoMismatch ||
		!strings.Contains(err.Error(), "memo node "+n.key.Short()) || !strings.Contains(err.Error(), n.key.String()) || !strings.Contains(err.Error(), "row 11 ") {
		t.Fatalf("guarded read over the wrong memo node: %v, want DataLoss MEMO_MISMATCH naming the node and row 11", err)
	}
}

// TestGuardOpsAreRowLocal: the guard runs a component over a record of
// sampled rows (guardCompute), which gives those rows of its output over
// the whole block only because every op computes each row from the same
// row of its inputs (transform's semantics; internal/rowref computes them
// row at a time). An op added to the registry fails this test until its
// author has checked that it is row-local too, and added it here, or made
// the guard compute such components over the whole block.
func TestGuardOpsAreRowLocal(t *testing.T) {
	rowLocal := map[string]bool{"col": true, "lower": true, "strip_punct": true, "unigrams": true, "ngrams": true,
		"intersect": true, "union": true, "concat": true, "dedupe": true, "truncate": true, "hash": true, "cross": true,
		"bucketize": true, "log1p": true, "clip": true, "fill_missing": true, "length": true}
	for _, name := range transform.Default().Names() {
		if !rowLocal[name] {
			t.Errorf("op %q: is each output row computed from the same row of its inputs only? The guard samples rows (guard.go)", name)
		}
	}
}

// TestGuardSampleGrowsWithReads (issue 27): every training job reading a
// block sends the same unit (a trainer's unit id is the block ref), so a
// sample drawn from the unit alone checks the same rows for every job,
// and 22 pipelines reading a memo block check its same 16 rows 22 times
// (paper VIII.E: the block is a shared-fate risk for all of them). Two
// rows outside the unit's own sample (guardSeed) are made wrong; the same
// unit is read 100 times. Each read draws its own sample, so the wrong
// rows are found (a read checks them with probability about 0.15; all
// 100 reads miss them with probability about 1e-7). With the sample of
// the unit alone, no read ever checked them.
func TestGuardSampleGrowsWithReads(t *testing.T) {
	const rows, reads = 200, 100
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: rows, Graphs: fleetGraphs(t, "ctr_small")})
	victim := f.inputs[0]
	u := f.unit(0, 4096, nil)
	unitSample := guardRows(rows, DefaultGuardSampleRows, guardSeed(u.UnitId, u.BlockId, victim.key))
	_, rec, err := block.ReadBlock(context.Background(), f.store, block.MemoKey(victim.key, blockref.ParseMemo(f.blocks[0].id)))
	if err != nil {
		t.Fatal(err)
	}
	c := rec.Column(1)
	r, s := -1, -1
	for a := 0; a < rows && s < 0; a++ {
		for b := a + 1; b < rows && !slices.Contains(unitSample, a); b++ {
			if !slices.Contains(unitSample, b) && !transform.SameRow(c, a, c, b) {
				r, s = a, b
				break
			}
		}
	}
	rec.Release()
	if s < 0 {
		t.Fatalf("input %s: no two rows outside the sample %v differ", victim.name, unitSample)
	}
	f.perturbMemo(t, 0, victim, func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		p[r], p[s] = s, r
		return p
	})
	srv := f.server(t, Config{})
	caught := 0
	for range reads {
		_, err := collect(context.Background(), srv, &readerv1.ReadRequest{Unit: f.unit(0, 4096, nil)})
		switch st := Status(err); {
		case err == nil:
		case st.Code() == codes.DataLoss && reasonOf(st) == ReasonMemoMismatch:
			caught++
		default:
			t.Fatalf("read: %v", err)
		}
	}
	if caught == 0 {
		t.Errorf("%d reads of the unit with rows %d and %d wrong (outside the unit's sample %v): none failed with %s; "+
			"every read checked the same rows", reads, r, s, unitSample, ReasonMemoMismatch)
	}
	t.Logf("%d of %d reads caught rows %d and %d", caught, reads, r, s)
}

// TestTakeRows: takeRows copies the rows of every raw and memo type the
// guard samples (and of one it does not know, through its fallback)
// equal to Arrow's slices of those rows, nulls and empty lists included.
func TestTakeRows(t *testing.T) {
	mem := memory.DefaultAllocator
	build := func(dt arrow.DataType, fill func(b array.Builder)) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		fill(b)
		return b.NewArray()
	}
	const n = 9
	cases := map[string]arrow.Array{
		"int64": build(arrow.PrimitiveTypes.Int64, func(b array.Builder) {
			for i := range n {
				if i%4 == 1 {
					b.AppendNull()
				} else {
					b.(*array.Int64Builder).Append(int64(i*i - 7))
				}
			}
		}),
		"int8": build(arrow.PrimitiveTypes.Int8, func(b array.Builder) {
			for i := range n {
				b.(*array.Int8Builder).Append(int8(i - 4))
			}
		}),
		"float64": build(arrow.PrimitiveTypes.Float64, func(b array.Builder) {
			for i := range n {
				if i == 3 {
					b.AppendNull()
				} else {
					b.(*array.Float64Builder).Append(float64(i) / 3)
				}
			}
		}),
		"bool": build(arrow.FixedWidthTypes.Boolean, func(b array.Builder) {
			for i := range n {
				b.(*array.BooleanBuilder).Append(i%3 == 0)
			}
		}),
		"string": build(arrow.BinaryTypes.String, func(b array.Builder) {
			for i := range n {
				if i == 5 {
					b.AppendNull()
				} else {
					b.(*array.StringBuilder).Append(strings.Repeat("ab", i))
				}
			}
		}),
		"list<string>": build(arrow.ListOf(arrow.BinaryTypes.String), func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			vb := lb.ValueBuilder().(*array.StringBuilder)
			for i := range n {
				switch i % 3 {
				case 0:
					lb.AppendNull()
				case 1:
					lb.Append(true) // empty
				default:
					lb.Append(true)
					for j := range i {
						if j == 1 {
							vb.AppendNull()
						} else {
							vb.Append(fmt.Sprint(i, j))
						}
					}
				}
			}
		}),
		"list<int32>": build(arrow.ListOf(arrow.PrimitiveTypes.Int32), func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			vb := lb.ValueBuilder().(*array.Int32Builder)
			for i := range n {
				lb.Append(true)
				for j := range i % 4 {
					vb.Append(int32(i*10 + j))
				}
			}
		}),
		// Not copied value by value: the fallback.
		"timestamp": build(arrow.FixedWidthTypes.Timestamp_us, func(b array.Builder) {
			for i := range n {
				b.(*array.TimestampBuilder).Append(arrow.Timestamp(i * 1000))
			}
		}),
	}
	rows := []int{7, 0, 3, 3, 8, 1, 5, 2}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			defer a.Release()
			got, err := takeRows(a, rows)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if got.Len() != len(rows) || !arrow.TypeEqual(got.DataType(), a.DataType()) {
				t.Fatalf("got %d rows of %s, want %d of %s", got.Len(), got.DataType(), len(rows), a.DataType())
			}
			for x, r := range rows {
				want := array.NewSlice(a, int64(r), int64(r+1))
				if !array.Equal(array.NewSlice(got, int64(x), int64(x+1)), want) {
					t.Errorf("row %d (of a: %d): got %v, want %v", x, r, array.NewSlice(got, int64(x), int64(x+1)), want)
				}
				want.Release()
			}
		})
	}
}
