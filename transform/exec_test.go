package transform

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/internal/rowref"
)

// testRegistry returns a fresh registry with every built-in op, to which a
// test may add its own.
func testRegistry() *Registry {
	r := NewRegistry()
	for _, name := range Default().Names() {
		spec, _ := Default().Op(name)
		k, _ := Default().Kernel(name)
		r.Register(spec, k)
	}
	return r
}

// checkedAds returns a record of Ads-like rows in a checked allocator that
// must hold nothing when the test ends: after the test's own deferred
// releases, the record is released and the allocator checked.
func checkedAds(t *testing.T, rows int, seed int64) arrow.Record {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	rec := adsRecord(mem, rows, seed)
	t.Cleanup(rec.Release)
	return rec
}

// counting wraps op's spec and kernel as a new op that counts its calls.
func counting(r *Registry, name, op string, calls *atomic.Int64) {
	spec, _ := Default().Op(op)
	k, _ := Default().Kernel(op)
	s := *spec
	s.Name = name
	r.Register(&s, func(in []arrow.Array, n *Node) (arrow.Array, error) {
		calls.Add(1)
		return k(in, n)
	})
}

// TestRunSharedIntermediates runs several model inputs that share
// intermediates: each node runs once, every output matches the reference
// and nothing leaks (the checked allocator holds the record's memory, which
// outputs may share with zero-copy kernels).
func TestRunSharedIntermediates(t *testing.T) {
	reg := testRegistry()
	var lowerCalls, tokCalls atomic.Int64
	counting(reg, "lower_counted", "lower", &lowerCalls)
	counting(reg, "unigrams_counted", "unigrams", &tokCalls)
	src := `
let q = unigrams_counted(lower_counted(col("query")))
let t = unigrams(lower(col("ad_title")))
input overlap = concat(intersect(q, t), col("ad_category"))
input ids = hash(q, buckets=1000003)
input n = length(q)
input same = ids
input price = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
let tr = truncate(t, max=2)
input short = tr
input short_ids = hash(tr, buckets=1000003)
input short_n = length(tr)
input short_cat = concat(tr, col("ad_category"))
input shorter = truncate(t, max=3)
input shorter_ids = hash(truncate(t, max=4), buckets=1000003)
input shorter_n = length(truncate(t, max=1))
`
	g, _, err := ParseAndCheck([]byte(src), "", AdsSchema(), reg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := checkedAds(t, 2000, 1)
	if err := CheckRecord(g, AdsSchema(), rec); err != nil {
		t.Fatal(err)
	}
	var nodes []int
	for _, in := range g.Inputs {
		nodes = append(nodes, in.Node)
	}
	out, err := Run(g, reg, rec, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	if lowerCalls.Load() != 1 || tokCalls.Load() != 1 {
		t.Errorf("shared nodes ran lower %d and unigrams %d times, want once each", lowerCalls.Load(), tokCalls.Load())
	}
	col := func(name string) rowref.Column {
		return fromArrow(rec.Column(rec.Schema().FieldIndices(name)[0]))
	}
	q := rowref.Unigrams(rowref.Lower(col("query")))
	tt := rowref.Unigrams(rowref.Lower(col("ad_title")))
	want := map[string]rowref.Column{
		"overlap": rowref.Concat(rowref.Intersect(q, tt), col("ad_category")),
		"ids":     rowref.Hash(q, 1000003, 0),
		"same":    rowref.Hash(q, 1000003, 0),
		"n":       rowref.Length(q),
		"price":   rowref.Bucketize(col("bid_price"), []float64{0.1, 0.5, 1, 5}),
		// truncate returns a list-view, which the executor makes a list
		// once for its readers and its output.
		"short":     rowref.Truncate(tt, 2),
		"short_ids": rowref.Hash(rowref.Truncate(tt, 2), 1000003, 0),
		"short_n":   rowref.Length(rowref.Truncate(tt, 2)),
		"short_cat": rowref.Concat(rowref.Truncate(tt, 2), col("ad_category")),
		"shorter":   rowref.Truncate(tt, 3), // read by no kernel
		// hash and length read truncate's list-view as it is
		"shorter_ids": rowref.Hash(rowref.Truncate(tt, 4), 1000003, 0),
		"shorter_n":   rowref.Length(rowref.Truncate(tt, 1)),
	}
	for k, in := range g.Inputs {
		if _, ok := out[k].(*array.ListView); ok {
			t.Errorf("input %s: Run returned a list-view", in.Name)
		}
		if d := diffColumns(want[in.Name], fromArrow(out[k])); d != "" {
			t.Errorf("input %s: %s", in.Name, d)
		}
	}
}

// TestRunBadListViewReleases registers an op whose kernel returns a
// list-view that cannot be made a list (its rows overlap): Run fails with
// an error naming the op and releases every column, the outputs it had
// retained included.
func TestRunBadListViewReleases(t *testing.T) {
	reg := testRegistry()
	spec, _ := Default().Op("unigrams")
	bad := *spec
	bad.Name = "overlapping"
	reg.Register(&bad, func(in []arrow.Array, n *Node) (arrow.Array, error) {
		child := toArrow(rowref.Column{Type: rowref.String, Str: []string{"a", "b", "c"}})
		defer child.Release()
		rows := in[0].Len()
		starts, sizes := make([]int32, rows), make([]int32, rows)
		for i := range starts {
			sizes[i] = 2 // every row holds elements 0 and 1: they overlap
		}
		return stringListView(child, starts, sizes), nil
	})
	g, _, err := ParseAndCheck([]byte(`input q = col("query")
input bad = overlapping(col("ad_title"))
`), "", AdsSchema(), reg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := checkedAds(t, 100, 3)
	out, err := Run(g, reg, rec, g.Inputs[0].Node, g.Inputs[1].Node)
	if err == nil || out != nil || !strings.Contains(err.Error(), "op overlapping") {
		t.Fatalf("got %v, %v; want an error naming op overlapping", out, err)
	}
}

// TestRunPanicIsolated registers an op whose kernel panics: Run returns a
// *PanicError naming the op, and releases what it computed.
func TestRunPanicIsolated(t *testing.T) {
	reg := testRegistry()
	spec, _ := Default().Op("lower")
	boom := *spec
	boom.Name = "boom"
	reg.Register(&boom, func(in []arrow.Array, n *Node) (arrow.Array, error) {
		var m map[string]int
		m["x"]++ // nil map write
		return nil, nil
	})
	g, _, err := ParseAndCheck([]byte(`input ok = lower(col("query"))
input bad = unigrams(boom(lower(col("ad_title"))))
`), "", AdsSchema(), reg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := checkedAds(t, 100, 2)
	out, err := Run(g, reg, rec, g.Inputs[0].Node, g.Inputs[1].Node)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Op != "boom" || out != nil {
		t.Fatalf("got %v, %v; want a *PanicError for op boom", out, err)
	}
	if !strings.Contains(pe.Error(), "op boom panicked: assignment to entry in nil map") || !strings.Contains(pe.Stack, "exec_test.go") {
		t.Errorf("PanicError %q lacks the panic value or the stack:\n%s", pe, pe.Stack)
	}
	// The healthy input alone still runs.
	out, err = Run(g, reg, rec, g.Inputs[0].Node)
	if err != nil {
		t.Fatal(err)
	}
	out[0].Release()
}

// TestRunErrors covers the errors Run reports instead of panicking.
func TestRunErrors(t *testing.T) {
	g, _, err := ParseAndCheck([]byte(`input c = cross(unigrams(col("query")), unigrams(col("ad_title")), buckets=10)
input q = lower(col("query"))
`), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	// A row with more than MaxCrossPairs pairs fails cross with an error.
	b := array.NewRecordBuilder(mem, AdsSchema().Arrow())
	for i, f := range b.Fields() {
		switch fb := f.(type) {
		case *array.StringBuilder:
			name := AdsSchema().Fields[i].Name
			if name == "query" || name == "ad_title" {
				fb.Append(strings.Repeat("w ", 300))
			} else {
				fb.Append("x")
			}
		case *array.Int64Builder:
			fb.Append(1)
		case *array.Float64Builder:
			fb.Append(1)
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	if _, err := Run(g, Default(), rec, g.Inputs[0].Node); err == nil || err.Error() != "cross: row 0 has 300 x 300 pairs, more than the limit of 65536" {
		t.Errorf("cross over the pair limit: %v", err)
	}
	if _, err := Run(g, Default(), rec, 99); err == nil || err.Error() != "requested node 99, but the graph has 7 nodes" {
		t.Errorf("node out of range: %v", err)
	}
	// A record without the column.
	small := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: "ad_title", Type: arrow.BinaryTypes.String}}, nil),
		[]arrow.Array{rec.Column(3)}, 1)
	defer small.Release()
	if _, err := Run(g, Default(), small, g.Inputs[1].Node); err == nil || err.Error() != `column "query" is not in the record` {
		t.Errorf("missing column: %v", err)
	}
	// An empty record gives empty columns.
	empty := rec.NewSlice(0, 0)
	defer empty.Release()
	out, err := Run(g, Default(), empty, g.Inputs[0].Node, g.Inputs[1].Node)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range out {
		if a.Len() != 0 {
			t.Errorf("%d rows from an empty record", a.Len())
		}
		a.Release()
	}
}

// TestCheckRecord checks that a block whose columns do not match the
// schema is refused with an error naming the column.
func TestCheckRecord(t *testing.T) {
	g, _, err := ParseAndCheck([]byte(`input x = concat(unigrams(col("query")), col("ad_category"))
input p = log1p(col("bid_price"))
`), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	rec := adsRecord(mem, 10, 3)
	defer rec.Release()
	if err := CheckRecord(g, AdsSchema(), rec); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	// bid_price as int64, query as binary.
	ib := array.NewInt64Builder(mem)
	ib.AppendValues(make([]int64, 10), nil)
	ints := ib.NewArray()
	defer ints.Release()
	bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	for range 10 {
		bb.Append([]byte("q"))
	}
	bin := bb.NewArray()
	defer bin.Release()
	for _, tc := range []struct {
		col  string
		arr  arrow.Array
		want string
	}{
		{"bid_price", ints, `column "bid_price" has Arrow type int64, want float64`},
		{"query", bin, `column "query" has Arrow type binary, want utf8`},
	} {
		fields := append([]arrow.Field(nil), rec.Schema().Fields()...)
		cols := append([]arrow.Array(nil), rec.Columns()...)
		i := rec.Schema().FieldIndices(tc.col)[0]
		fields[i].Type = tc.arr.DataType()
		cols[i] = tc.arr
		bad := array.NewRecord(arrow.NewSchema(fields, nil), cols, 10)
		if err := CheckRecord(g, AdsSchema(), bad); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %s", err, tc.want)
		}
		// Without CheckRecord, a string kernel given binary data panics,
		// and the panic is isolated.
		var pe *PanicError
		if _, err := Run(g, Default(), bad, g.Inputs[0].Node, g.Inputs[1].Node); tc.col == "query" && !errors.As(err, &pe) {
			t.Errorf("Run on a bad record: %v, want a *PanicError", err)
		}
		bad.Release()
	}
	// A record missing a column.
	dropped := array.NewRecord(arrow.NewSchema(rec.Schema().Fields()[:3], nil), rec.Columns()[:3], 10)
	defer dropped.Release()
	if err := CheckRecord(g, AdsSchema(), dropped); err == nil || err.Error() != `record has no column "ad_category"` {
		t.Errorf("missing column: %v", err)
	}
}

// TestRunGivenComputesOnlyTheResidual: with a node's column given, Run
// computes only what is above it, from a record without the raw columns
// beneath it, and its outputs are those of the full run (a cover of
// memoized nodes computes what local input generation does).
func TestRunGivenComputesOnlyTheResidual(t *testing.T) {
	reg := testRegistry()
	var tokCalls atomic.Int64
	counting(reg, "unigrams_counted", "unigrams", &tokCalls)
	src := `
let q = unigrams_counted(lower(col("query")))
input ids = hash(q, buckets=1000003)
input overlap = concat(intersect(q, unigrams(col("ad_title"))), col("ad_category"))
`
	g, _, err := ParseAndCheck([]byte(src), "", AdsSchema(), reg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := checkedAds(t, 500, 3)
	roots := []int{g.Inputs[0].Node, g.Inputs[1].Node}
	full, err := Run(g, reg, rec, roots...)
	if err != nil {
		t.Fatal(err)
	}
	defer release(full)
	// q is the input of hash: its column, computed once by a full run.
	q := g.Nodes[g.Inputs[0].Node].Inputs[0]
	qv, err := Run(g, reg, rec, q)
	if err != nil {
		t.Fatal(err)
	}
	defer release(qv)
	// The record without query: the residual must not read it.
	var keep []int
	for i, f := range rec.Schema().Fields() {
		if f.Name != "query" {
			keep = append(keep, i)
		}
	}
	fields := make([]arrow.Field, len(keep))
	cols := make([]arrow.Array, len(keep))
	for x, i := range keep {
		fields[x], cols[x] = rec.Schema().Field(i), rec.Column(i)
	}
	noQuery := array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	defer noQuery.Release()
	before := tokCalls.Load()
	got, err := RunGiven(g, reg, noQuery, map[int]arrow.Array{q: qv[0]}, roots...)
	if err != nil {
		t.Fatal(err)
	}
	defer release(got)
	if n := tokCalls.Load() - before; n != 0 {
		t.Fatalf("unigrams ran %d times under a given node", n)
	}
	for x := range roots {
		if !array.Equal(full[x], got[x]) {
			t.Fatalf("input %d: given run differs from the full run", x)
		}
	}
	short := array.NewSlice(qv[0], 0, 10)
	defer short.Release()
	if _, err := RunGiven(g, reg, noQuery, map[int]arrow.Array{q: short}, roots...); err == nil || !strings.Contains(err.Error(), "rows") {
		t.Fatalf("a given column of the wrong length: %v", err)
	}
}

func release(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}
