package transform

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// programSrc computes components of every kind of raw column the Ads
// schema has, two of them sharing nodes.
const programSrc = `
let q = unigrams(lower(col("query")))
input overlap = concat(intersect(q, unigrams(lower(col("ad_title")))), col("ad_category"))
input ids = hash(q, buckets=1000)
input cat = fill_missing(col("ad_category"), default="none")
input pair = cross(col("ad_category"), col("advertiser_id"), buckets=1000)
input country = lower(col("country"))
`

// reencode returns a's values (strings or int64s) in Arrow type dt: the
// encodings another producer writes (Arrow JS dictionary-encodes strings,
// pyarrow and Polars write large and view strings, narrower integers).
func reencode(t *testing.T, mem memory.Allocator, a arrow.Array, dt arrow.DataType) arrow.Array {
	t.Helper()
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.BinaryDictionaryBuilder:
			if err := b.AppendString(a.(*array.String).Value(i)); err != nil {
				t.Fatal(err)
			}
		case *array.LargeStringBuilder:
			b.Append(a.(*array.String).Value(i))
		case *array.StringViewBuilder:
			b.Append(a.(*array.String).Value(i))
		case *array.Int32Builder:
			b.Append(int32(a.(*array.Int64).Value(i)))
		default:
			t.Fatalf("no re-encoding into %s", dt)
		}
	}
	return b.NewArray()
}

// foreignAds returns rec with its string and advertiser_id columns in
// other producers' encodings.
func foreignAds(t *testing.T, mem memory.Allocator, rec arrow.Record) arrow.Record {
	encodings := map[string]arrow.DataType{
		"query":         &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
		"ad_title":      arrow.BinaryTypes.LargeString,
		"ad_category":   arrow.BinaryTypes.StringView,
		"advertiser_id": arrow.PrimitiveTypes.Int32, // the values fit
		"country":       &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String},
	}
	fields := slices.Clone(rec.Schema().Fields())
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		if dt, ok := encodings[f.Name]; ok {
			cols[i] = reencode(t, mem, rec.Column(i), dt)
			fields[i].Type = dt
		} else {
			cols[i] = rec.Column(i)
			cols[i].Retain()
		}
	}
	out := array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}

// TestProgramRunsForeignEncodings: a program computes the same columns
// from a record in other producers' encodings (dictionary-encoded, large
// and view strings, int32 ids), whole and sliced, as from the schema's
// types, and as the executor does from those: what keeps a memo object a
// worker computed from a block pyarrow wrote equal to sigd's recomputation
// and to a reader's LIG. The executor alone refuses such a record.
func TestProgramRunsForeignEncodings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := AdsSchema()
	p, err := CompileDSL([]byte(programSrc), "ads.sig", s, Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Columns(), []string{ColEventID, "ad_category", "ad_title", "advertiser_id", "country", "query"}; !slices.Equal(got, want) {
		t.Fatalf("Columns() = %v, want %v", got, want)
	}
	plain := adsRecord(mem, 3000, 3)
	defer plain.Release()
	foreign := foreignAds(t, mem, plain)
	defer foreign.Release()
	if err := CheckRecord(p.Graph(), s, foreign); err == nil {
		t.Fatal("CheckRecord accepts the foreign record: the test does not test conforming")
	}
	var nodes []int
	for _, in := range p.Graph().Inputs {
		nodes = append(nodes, in.Node)
	}
	for _, span := range [][2]int64{{0, plain.NumRows()}, {7, plain.NumRows() - 5}} {
		pl, fo := plain.NewSlice(span[0], span[1]), foreign.NewSlice(span[0], span[1])
		want, err := Run(p.Graph(), Default(), pl, nodes...)
		if err != nil {
			t.Fatal(err)
		}
		fromPlain, err := p.Run(pl, nil)
		if err != nil {
			t.Fatal(err)
		}
		fromForeign, err := p.Run(fo, nil)
		if err != nil {
			t.Fatalf("rows %v: %v", span, err)
		}
		for i, in := range p.Graph().Inputs {
			if !array.Equal(fromPlain[i], want[i]) {
				t.Errorf("rows %v: input %s: the program's column differs from Run's", span, in.Name)
			}
			if !arrow.TypeEqual(fromForeign[i].DataType(), want[i].DataType()) || !array.Equal(fromForeign[i], want[i]) {
				t.Errorf("rows %v: input %s: computed from the foreign encodings, the column differs", span, in.Name)
			}
		}
		releaseAll(want)
		releaseAll(fromPlain)
		releaseAll(fromForeign)
		pl.Release()
		fo.Release()
	}
}

// TestProgramConformTakesSchemaTypesAsTheyAre: conforming a record already
// in the schema's types copies nothing (every column is the record's own
// array), keeps only the program's columns, event_id first, and a record
// Conform returned runs as it is.
func TestProgramConformTakesSchemaTypesAsTheyAre(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	p, err := CompileDSL([]byte(`input x = hash(col("query"), buckets=10)`+"\n"+`input y = col("bid_price")`), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := adsRecord(mem, 500, 1)
	defer rec.Release()
	c, err := p.Conform(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if c.NumCols() != 3 {
		t.Fatalf("conformed record has %d columns, want event_id, bid_price and query", c.NumCols())
	}
	for i, f := range c.Schema().Fields() {
		if f.Name != p.Columns()[i] {
			t.Errorf("column %d is %s, want %s", i, f.Name, p.Columns()[i])
		}
		if c.Column(i) != rec.Column(rec.Schema().FieldIndices(f.Name)[0]) {
			t.Errorf("column %s was copied", f.Name)
		}
	}
	out, err := p.Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(out)
	if len(out) != 2 || out[1] != c.Column(1) {
		t.Errorf("y = col(\"bid_price\") is not the record's own column")
	}
}

// TestProgramResidual: a residual graph (what canon.Residual leaves above
// memoized nodes) given the column of its memo node computes what the
// whole graph computes, without reading the raw columns beneath it; a
// given column missing, of another type or of other rows is an error.
func TestProgramResidual(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := AdsSchema()
	whole, err := CompileDSL([]byte(`input out = concat(hash(unigrams(lower(col("query"))), buckets=1000), col("advertiser_id"))`), "", s, Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Nodes: 0 col(query), 1 lower, 2 unigrams, 3 hash, 4 col(advertiser_id), 5 concat.
	g := whole.Graph()
	if len(g.Nodes) != 6 || g.Nodes[2].Op != "unigrams" {
		t.Fatalf("unexpected graph %+v", g.Nodes)
	}
	rec := adsRecord(mem, 1000, 5)
	defer rec.Release()
	want, err := whole.Run(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(want)
	memo, err := Run(g, Default(), rec, 2) // the memo object of unigrams(lower(query))
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(memo)

	res := g.Clone()
	res.Nodes[2].Inputs = nil
	p, err := CompileResidual(res, whole.Types(), []int{2}, s, Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Columns(); !slices.Equal(got, []string{ColEventID, "advertiser_id"}) {
		t.Errorf("residual Columns() = %v, want event_id and advertiser_id only", got)
	}
	// The raw block as read for the residual: no query column.
	noQuery, err := Conform(s, rec, []string{ColEventID, "advertiser_id"})
	if err != nil {
		t.Fatal(err)
	}
	defer noQuery.Release()
	observed := map[int]int{}
	got, err := p.RunObserved(noQuery, map[int]arrow.Array{2: memo[0]}, func(node int, d time.Duration) { observed[node]++ })
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(got)
	if !array.Equal(got[0], want[0]) {
		t.Error("the residual over the memo node computes another column than the whole graph")
	}
	if want := map[int]int{3: 1, 5: 1}; len(observed) != len(want) || observed[3] != 1 || observed[5] != 1 {
		t.Errorf("observed nodes %v, want the ops above the memo node once each: %v", observed, want)
	}

	ids := rec.Column(0)
	short := array.NewSlice(memo[0], 1, int64(memo[0].Len()))
	defer short.Release()
	for _, tc := range []struct {
		name  string
		given map[int]arrow.Array
		want  string
	}{
		{"none", nil, "given the columns of 0 nodes, want those of 1"},
		{"another node", map[int]arrow.Array{3: memo[0]}, "the column of node 2 (unigrams) is not given"},
		{"another type", map[int]arrow.Array{2: ids}, "given column of node 2 (unigrams) has Arrow type int64"},
		{"other rows", map[int]arrow.Array{2: short}, "given column of node 2 (unigrams) has 999 rows, the record 1000"},
	} {
		out, err := p.Run(noQuery, tc.given)
		if err == nil {
			releaseAll(out)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrColumn) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}

	for _, tc := range []struct {
		name  string
		types []Type
		given []int
		want  string
	}{
		{"types", whole.Types()[:5], []int{2}, "residual graph of 6 nodes with 5 types"},
		{"given", whole.Types(), []int{6}, "given node 6, but the graph has 6 nodes"},
	} {
		if _, err := CompileResidual(res, tc.types, tc.given, s, Default()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	unknown := res.Clone()
	unknown.Nodes[3].Op = "no_such_op"
	if _, err := CompileResidual(unknown, whole.Types(), []int{2}, s, Default()); err == nil || !strings.Contains(err.Error(), `op "no_such_op" has no kernel`) {
		t.Errorf("unknown op: %v", err)
	}
}

// TestProgramErrors: a record that does not conform is an ErrColumn (a
// corrupt block, to the reader), an op that panics is not (a compute
// failure); Compile refuses what Check refuses and leaves its graph as it
// was.
func TestProgramErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := AdsSchema()
	p, err := CompileDSL([]byte(`input x = lower(col("query"))`), "", s, Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := adsRecord(mem, 100, 2)
	defer rec.Release()

	noQuery, err := Conform(s, rec, []string{ColEventID, "ad_title"})
	if err != nil {
		t.Fatal(err)
	}
	defer noQuery.Release()
	if _, err := p.Run(noQuery, nil); !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), `no column "query"`) {
		t.Errorf("record without query: %v", err)
	}
	nullIDs, _, err := array.FromJSON(mem, arrow.PrimitiveTypes.Int64, strings.NewReader(`[1, null]`))
	if err != nil {
		t.Fatal(err)
	}
	defer nullIDs.Release()
	q, _, _ := array.FromJSON(mem, arrow.BinaryTypes.String, strings.NewReader(`["a", "b"]`))
	defer q.Release()
	bad := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: ColEventID, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "query", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), []arrow.Array{nullIDs, q}, 2)
	defer bad.Release()
	if _, err := p.Run(bad, nil); !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), `column "event_id" has 1 nulls`) {
		t.Errorf("event_id with a null: %v", err)
	}

	reg := testRegistry()
	spec, _ := Default().Op("lower")
	boom := *spec
	boom.Name = "boom"
	reg.Register(&boom, func([]arrow.Array, *Node) (arrow.Array, error) { panic("kernel bug") })
	g, err := Parse([]byte(`input x = boom(col("query"))`), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := Compile(g, s, reg, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var pe *PanicError
	if _, err := pb.Run(rec, nil); !errors.As(err, &pe) || errors.Is(err, ErrColumn) {
		t.Errorf("a kernel that panics: %v, want a PanicError", err)
	}
	// Check gives ngrams its default n; Compile does so on its own copy.
	g, err = Parse([]byte(`input x = ngrams(col("query"))`), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	before := g.Clone()
	if _, err := Compile(g, s, Default(), Limits{}); err != nil {
		t.Fatal(err)
	}
	if !g.Equal(before) {
		t.Error("Compile changed the caller's graph")
	}
	checked := g.Clone()
	if _, err := Check(checked, s, Default(), Limits{}); err != nil || checked.Equal(before) {
		t.Errorf("Check leaves ngrams(col(\"query\")) as it is (%v): the test above tests nothing", err)
	}
	if _, err := Compile(&Graph{}, s, Default(), Limits{}); err == nil {
		t.Error("Compile accepts a graph without model inputs")
	}
}
