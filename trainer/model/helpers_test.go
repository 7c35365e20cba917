package model

import (
	"io/fs"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/examples"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/gen"
)

// adsExamples runs a fleet graph (examples/fleet/<name>.sig) over n
// generated Ads events with the real transform executor and returns the
// model's features and the examples, as a reader would deliver them.
func adsExamples(tb testing.TB, name string, seed uint64, n int) (Features, *Examples) {
	tb.Helper()
	src, err := fs.ReadFile(examples.Fleet, "fleet/"+name+".sig")
	if err != nil {
		tb.Fatal(err)
	}
	s := transform.AdsSchema()
	g, types, err := transform.ParseAndCheck(src, name, s, transform.Default(), transform.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	var inputs []Input
	var nodes []int
	for _, in := range g.Inputs {
		inputs = append(inputs, Input{Name: in.Name, Type: types[in.Node]})
		nodes = append(nodes, in.Node)
	}
	f, err := NewFeatures(inputs)
	if err != nil {
		tb.Fatal(err)
	}
	ex := NewExamples(f)
	for _, raw := range gen.New(gen.Config{Seed: seed}).Records(n, 4096) {
		out, err := transform.Run(g, transform.Default(), raw, nodes...)
		if err != nil {
			tb.Fatal(err)
		}
		fields := []arrow.Field{{Name: "event_id", Type: arrow.PrimitiveTypes.Int64}, {Name: "click", Type: arrow.PrimitiveTypes.Int64}}
		cols := []arrow.Array{raw.Column(0), raw.Column(raw.Schema().FieldIndices("click")[0])}
		for i, in := range inputs {
			fields = append(fields, arrow.Field{Name: in.Name, Type: out[i].DataType(), Nullable: true})
			cols = append(cols, out[i])
		}
		rec := array.NewRecord(arrow.NewSchema(fields, nil), cols, raw.NumRows())
		if err := ex.AppendRecord(f, rec, "click"); err != nil {
			tb.Fatal(err)
		}
		rec.Release()
		for _, a := range out {
			a.Release()
		}
		raw.Release()
	}
	return f, ex
}
