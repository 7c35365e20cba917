package transform

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/internal/rowref"
)

// A kernel case: one op with fixed parameters over inputs of fixed types,
// and the reference that computes the expected column.
type kcase struct {
	op     string
	params []Param
	in     []rowref.Type
	// words draws strings from a small vocabulary (set ops need overlaps).
	words bool
	ref   func(in []rowref.Column) (rowref.Column, error)
}

func (c kcase) name() string {
	var b strings.Builder
	b.WriteString(c.op + "(")
	for i, t := range c.in {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(t.String())
	}
	for _, p := range c.params {
		fmt.Fprintf(&b, ",%s=%s", p.Name, literal(p.Value))
	}
	return b.String() + ")"
}

func ok(c rowref.Column) (rowref.Column, error) { return c, nil }

func pInt(name string, v int64) Param         { return Param{Name: name, Value: IntValue(v)} }
func pFloat(name string, v float64) Param     { return Param{Name: name, Value: FloatValue(v)} }
func pFloats(name string, v ...float64) Param { return Param{Name: name, Value: FloatListValue(v)} }

const (
	tS  = rowref.String
	tI  = rowref.Int64
	tF  = rowref.Float64
	tLS = rowref.ListString
	tLI = rowref.ListInt64
)

// kernelCases covers every op of the default registry, every input type it
// accepts, and parameters at and inside their ranges.
func kernelCases() []kcase {
	var cs []kcase
	for _, t := range []rowref.Type{tS, tLS} {
		cs = append(cs,
			kcase{op: "lower", in: []rowref.Type{t}, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Lower(in[0])) }},
			kcase{op: "strip_punct", in: []rowref.Type{t}, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.StripPunct(in[0])) }},
		)
	}
	cs = append(cs, kcase{op: "unigrams", in: []rowref.Type{tS}, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Unigrams(in[0])) }})
	for _, n := range []int64{1, 2, 3, 16} {
		cs = append(cs, kcase{op: "ngrams", params: []Param{pInt("n", n)}, in: []rowref.Type{tS},
			ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Ngrams(in[0], int(n))) }})
	}
	setIns := [][]rowref.Type{
		{tLS}, {tS}, {tLS, tLS}, {tLS, tS}, {tS, tLS}, {tS, tS}, {tLS, tLS, tLS}, {tS, tLS, tS, tLS},
		{tLI}, {tI}, {tLI, tLI}, {tI, tLI}, {tLI, tI, tLI},
	}
	for _, in := range setIns {
		cs = append(cs,
			kcase{op: "intersect", in: in, words: true, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Intersect(in...)) }},
			kcase{op: "union", in: in, words: true, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Union(in...)) }},
			kcase{op: "concat", in: in, words: true, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Concat(in...)) }},
		)
	}
	for _, t := range []rowref.Type{tLS, tLI} {
		cs = append(cs,
			kcase{op: "dedupe", in: []rowref.Type{t}, words: true, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Dedupe(in[0])) }},
			kcase{op: "length", in: []rowref.Type{t}, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Length(in[0])) }},
		)
		for _, max := range []int64{0, 1, 3, 100, 1 << 20} {
			cs = append(cs, kcase{op: "truncate", params: []Param{pInt("max", max)}, in: []rowref.Type{t},
				ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Truncate(in[0], int(max))) }})
		}
	}
	for _, t := range []rowref.Type{tS, tI, tLS, tLI} {
		for _, p := range [][2]int64{{1, 0}, {7, 0}, {1000003, 0}, {1 << 20, -1}, {1 << 62, math.MaxInt64}, {1<<62 - 1, math.MinInt64}} {
			cs = append(cs, kcase{op: "hash", params: []Param{pInt("buckets", p[0]), pInt("salt", p[1])}, in: []rowref.Type{t},
				ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Hash(in[0], p[0], p[1])) }})
		}
	}
	for _, t := range []rowref.Type{tS, tLS} { // repeating values: the hash memo hits
		cs = append(cs, kcase{op: "hash", params: []Param{pInt("buckets", 97), pInt("salt", 5)}, in: []rowref.Type{t}, words: true,
			ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Hash(in[0], 97, 5)) }})
	}
	for _, in := range [][]rowref.Type{{tS, tS}, {tLS, tI}, {tLI, tLS}, {tLS, tLS}, {tI, tI}} {
		for _, buckets := range []int64{1, 1000, 1 << 62} {
			cs = append(cs, kcase{op: "cross", params: []Param{pInt("buckets", buckets)}, in: in,
				ref: func(in []rowref.Column) (rowref.Column, error) { return rowref.Cross(in[0], in[1], buckets) }})
		}
	}
	for _, t := range []rowref.Type{tI, tF} {
		var many []float64 // more than the branch-free path handles
		for k := range 40 {
			many = append(many, float64(k*k)/7-50)
		}
		for _, bs := range [][]float64{{0}, {-1, 0, 0.5, 1, 5}, {-1e300, 1e-300, 1e300}, {-3.5, -1, 2.25, 7, 10}, many} {
			cs = append(cs, kcase{op: "bucketize", params: []Param{pFloats("boundaries", bs...)}, in: []rowref.Type{t},
				ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Bucketize(in[0], bs)) }})
		}
		cs = append(cs, kcase{op: "log1p", in: []rowref.Type{t}, ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Log1p(in[0])) }})
		for _, b := range [][2]float64{{0, 1}, {-2.5, 3.5}, {0.5, 0.7}, {-1e300, 1e300}, {5, 5}, {-9.3e18, 9.3e18}, {math.MinInt64, math.MaxInt64}} {
			cs = append(cs, kcase{op: "clip", params: []Param{pFloat("lo", b[0]), pFloat("hi", b[1])}, in: []rowref.Type{t},
				ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.Clip(in[0], b[0], b[1])) }})
		}
	}
	for _, def := range []string{"", "unknown", "É😀"} {
		cs = append(cs, kcase{op: "fill_missing", params: []Param{{Name: "default", Value: StringValue(def)}}, in: []rowref.Type{tS},
			ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.FillMissing(in[0], def)) }})
	}
	for _, def := range []int64{0, -7, math.MinInt64} {
		cs = append(cs, kcase{op: "fill_missing", params: []Param{pInt("default", def)}, in: []rowref.Type{tI},
			ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.FillMissing(in[0], def)) }})
	}
	for _, def := range []float64{0, -1.5, math.MaxFloat64} {
		cs = append(cs, kcase{op: "fill_missing", params: []Param{pFloat("default", def)}, in: []rowref.Type{tF},
			ref: func(in []rowref.Column) (rowref.Column, error) { return ok(rowref.FillMissing(in[0], def)) }})
	}
	return cs
}

// variants are the shapes every kernel input is tried in.
var variants = []string{"plain", "sliced", "child-offset", "null-garbage", "no-nulls", "all-null", "empty", "one-row",
	"ascii", "ascii-sliced", "ascii-lower", "ascii-lower-sliced", "short-lists"}

// makeInputs draws the inputs of case c for variant v.
func makeInputs(c kcase, v string, g *gen, n int) (refs []rowref.Column, arrs []arrow.Array) {
	saved := *g
	defer func() { *g = saved }()
	switch v {
	case "no-nulls":
		g.nullRate, g.elemNullRate = 0, 0
	case "all-null":
		g.nullRate = 1
	case "empty":
		n = 0
	case "one-row":
		n = 1
	case "ascii", "ascii-sliced":
		g.pieces = asciiPieces
	case "ascii-lower", "ascii-lower-sliced":
		g.pieces, g.longRows = lowerASCIIPieces, false
	case "short-lists":
		g.longRows = false
	}
	if c.op == "cross" {
		g.maxList, g.longRows = 5, false // keep rows under the pair limit
	}
	for _, t := range c.in {
		ref := g.column(t, n, c.words)
		var a arrow.Array
		switch {
		case v == "sliced" || v == "ascii-sliced" || v == "ascii-lower-sliced":
			a = toArrowSliced(ref, g.column(t, 1+g.r.IntN(9), c.words), g.column(t, g.r.IntN(5), c.words))
		case v == "child-offset" && t.IsList():
			a = toArrowChildOffset(ref, g.column(t, 1+g.r.IntN(9), c.words))
		case v == "null-garbage":
			a = toArrowNullGarbage(ref, g)
		default:
			a = toArrow(ref)
		}
		refs = append(refs, ref)
		arrs = append(arrs, a)
	}
	return refs, arrs
}

// TestKernelsAgainstReference runs every kernel case over every input
// variant and compares the output with rowref cell by cell.
func TestKernelsAgainstReference(t *testing.T) {
	reg := Default()
	for ci, c := range kernelCases() {
		k, found := reg.Kernel(c.op)
		if !found || k == nil {
			t.Fatalf("no kernel for %s", c.op)
		}
		t.Run(c.name(), func(t *testing.T) {
			for vi, v := range variants {
				g := newGen(uint64(ci*100 + vi))
				refs, arrs := makeInputs(c, v, g, 300)
				node := &Node{Op: c.op, Params: c.params}
				got, err := runKernel(k, arrs, node)
				want, werr := c.ref(refs)
				if (err != nil) != (werr != nil) {
					t.Fatalf("%s: kernel error %v, reference error %v", v, err, werr)
				}
				if err != nil {
					if err.Error() != werr.Error() {
						t.Fatalf("%s: kernel error %q, reference error %q", v, err, werr)
					}
					continue
				}
				if d := diffColumns(want, fromArrow(got)); d != "" {
					t.Fatalf("%s: %s", v, d)
				}
				got.Release()
				for _, a := range arrs {
					a.Release()
				}
			}
		})
	}
}

// TestKernelCasesCoverRegistry makes sure no op is left without a kernel
// test when the registry grows.
func TestKernelCasesCoverRegistry(t *testing.T) {
	covered := map[string]bool{"col": true}
	for _, c := range kernelCases() {
		covered[c.op] = true
	}
	for _, name := range Default().Names() {
		if !covered[name] {
			t.Errorf("op %s has no kernel test case", name)
		}
	}
}
