package transform

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/internal/rowref"
)

// FuzzParse feeds arbitrary bytes to the parser and checker. Nothing may
// panic; errors are *Error; a parsed graph's MinSourceBytes is at most its
// source's length; a parsed graph prints to text that parses back
// to an Equal graph; a checked graph prints to text that parses and checks
// back to an Equal graph, and printing is a fixed point.
//
//	go test ./transform -run XXX -fuzz FuzzParse -fuzztime 60s
//
// Seeds: testdata/fuzz/FuzzParse, the round-trip examples and the inputs
// of every DSL error case.
func FuzzParse(f *testing.F) {
	for _, src := range roundTripExamples {
		f.Add([]byte(src))
	}
	paths, _ := filepath.Glob("testdata/errors/*.txt")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// Read from a string: the seeds never rewrite the case files.
		datadriven.RunTestFromStringAny(f, string(b), func(_ testing.TB, td *datadriven.TestData) string {
			f.Add(dslInput(td))
			return td.Expected
		})
	}
	schema := AdsSchema()
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := Parse(src, "", Limits{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error is a %T: %v", err, err)
			}
			return
		}
		// MinSourceBytes is a lower bound of the text a graph parses from
		// (graph messages are held to the source limit with it).
		if n := MinSourceBytes(g); n > len(src) {
			t.Fatalf("MinSourceBytes = %d for a graph parsed from %d bytes:\n%q", n, len(src), src)
		}
		// Parse-level round trip, before any normalization.
		p1 := Print(g)
		g1, err := Parse([]byte(p1), "", Limits{})
		if err != nil {
			t.Fatalf("printed graph does not parse: %v\nsource:\n%q\nprinted:\n%s", err, src, p1)
		}
		if !g.Equal(g1) {
			t.Fatalf("Parse(Print(g)) != g\nsource:\n%q\nprinted:\n%s", src, p1)
		}
		if _, err := Check(g, schema, Default(), Limits{}); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check error is a %T: %v", err, err)
			}
			return
		}
		p2 := Print(g)
		g2, _, err := ParseAndCheck([]byte(p2), "", schema, Default(), Limits{})
		if err != nil {
			t.Fatalf("printed checked graph does not check: %v\nsource:\n%q\nprinted:\n%s", err, src, p2)
		}
		if !g.Equal(g2) {
			t.Fatalf("checked graph does not round trip\nsource:\n%q\nprinted:\n%s", src, p2)
		}
		if p3 := Print(g2); p3 != p2 {
			t.Fatalf("Print is not a fixed point:\n%s\nthen\n%s", p2, p3)
		}
	})
}

// FuzzRandomGraph generates a random valid graph from the seed (random ops
// with well-typed inputs, random parameters in range, random let names,
// shared and dead nodes, several model inputs) and checks that Print and
// Parse round trip it: the printed text parses and checks, the result has
// the same structure (isomorphic from the model inputs and named lets,
// sharing preserved), and printing it again gives the same text.
func FuzzRandomGraph(f *testing.F) {
	for seed := range uint64(16) {
		f.Add(seed, seed*7919)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		checkRandomGraph(t, rand.New(rand.NewPCG(a, b)))
	})
}

// TestRandomGraphsRoundTrip runs the property of FuzzRandomGraph on a few
// hundred seeds in every normal test run.
func TestRandomGraphsRoundTrip(t *testing.T) {
	for seed := range uint64(400) {
		checkRandomGraph(t, rand.New(rand.NewPCG(seed, 42)))
	}
}

func checkRandomGraph(t *testing.T, r *rand.Rand) {
	t.Helper()
	g := randomGraph(r, AdsSchema())
	if _, err := Check(g, AdsSchema(), Default(), Limits{}); err != nil {
		t.Fatalf("generated graph does not check: %v\n%s", err, Print(g))
	}
	s1 := Print(g)
	h, _, err := ParseAndCheck([]byte(s1), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		t.Fatalf("printed graph does not parse and check: %v\n%s", err, s1)
	}
	if err := isomorphic(g, h); err != nil {
		t.Fatalf("printed graph differs: %v\n%s", err, s1)
	}
	if s2 := Print(h); s2 != s1 {
		t.Fatalf("Print(Parse(Print(g))) != Print(g):\n%s\nthen\n%s", s1, s2)
	}
	h2, err := Parse([]byte(Print(h)), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(h2, AdsSchema(), Default(), Limits{}); err != nil {
		t.Fatal(err)
	}
	if !h.Equal(h2) {
		t.Fatalf("Parse(Print(h)) != h for a parsed graph h:\n%s", s1)
	}
}

// isomorphic reports how g and h differ in structure: the subgraphs under
// each model input and each named node must match node for node (op,
// parameters, inputs in order, let names), with a one-to-one mapping, so
// that sharing is preserved. Names h gave to nodes unnamed in g (the
// printer's _n<i>) and dead unnamed nodes of g are not compared.
func isomorphic(g, h *Graph) error {
	fwd, rev := map[int]int{}, map[int]int{}
	var match func(a, b int) error
	match = func(a, b int) error {
		if x, ok := fwd[a]; ok {
			if x != b {
				return fmt.Errorf("node %d of g maps to both %d and %d of h", a, x, b)
			}
			return nil
		}
		if y, ok := rev[b]; ok {
			return fmt.Errorf("node %d of h matches both %d and %d of g", b, y, a)
		}
		fwd[a], rev[b] = b, a
		na, nb := &g.Nodes[a], &h.Nodes[b]
		if na.Op != nb.Op || len(na.Inputs) != len(nb.Inputs) || !sameParams(na.Params, nb.Params) {
			return fmt.Errorf("node %d (%s %v) of g != node %d (%s %v) of h", a, na.Op, na.Params, b, nb.Op, nb.Params)
		}
		if na.Name != "" && na.Name != nb.Name {
			return fmt.Errorf("node %d of g is named %q, of h %q", a, na.Name, nb.Name)
		}
		for k := range na.Inputs {
			if err := match(na.Inputs[k], nb.Inputs[k]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(g.Inputs) != len(h.Inputs) {
		return fmt.Errorf("%d model inputs, then %d", len(g.Inputs), len(h.Inputs))
	}
	for _, in := range g.Inputs {
		hin, ok := h.Input(in.Name)
		if !ok {
			return fmt.Errorf("model input %s lost", in.Name)
		}
		if err := match(in.Node, hin.Node); err != nil {
			return err
		}
	}
	for a := range g.Nodes {
		if g.Nodes[a].Name == "" {
			continue
		}
		b := -1
		for j := range h.Nodes {
			if h.Nodes[j].Name == g.Nodes[a].Name {
				b = j
			}
		}
		if b < 0 {
			return fmt.Errorf("let %s lost", g.Nodes[a].Name)
		}
		if err := match(a, b); err != nil {
			return err
		}
	}
	// Nodes g left unnamed but shared are printed as lets _n<index in g>
	// (with '_' appended on a clash), even when only dead nodes use them.
	gNames := map[string]bool{}
	for _, n := range g.Nodes {
		gNames[n.Name] = true
	}
	for b, n := range h.Nodes {
		var a int
		if gNames[n.Name] || !strings.HasPrefix(n.Name, "_n") {
			continue
		}
		if _, err := fmt.Sscanf(strings.TrimRight(n.Name, "_"), "_n%d", &a); err != nil || a >= len(g.Nodes) {
			return fmt.Errorf("h has a let %s that g does not explain", n.Name)
		}
		if err := match(a, b); err != nil {
			return err
		}
	}
	if len(fwd) != len(h.Nodes) {
		return fmt.Errorf("h has %d nodes, %d of them matched", len(h.Nodes), len(fwd))
	}
	return nil
}

// randomGraph builds a random, well-typed graph over schema s, nodes in
// topological order.
func randomGraph(r *rand.Rand, s *Schema) *Graph {
	g := &Graph{}
	var types []Type
	byType := map[Type][]int{}
	add := func(n Node, t Type) int {
		g.Nodes = append(g.Nodes, n)
		types = append(types, t)
		byType[t] = append(byType[t], len(g.Nodes)-1)
		return len(g.Nodes) - 1
	}
	addCol := func(want Type) int {
		var cands []Field
		for _, f := range s.Fields {
			if want == TypeInvalid || f.Type == want {
				cands = append(cands, f)
			}
		}
		f := cands[r.IntN(len(cands))]
		return add(Node{Op: "col", Params: []Param{{Name: "name", Value: StringValue(f.Name)}}}, f.Type)
	}
	// pick returns a node of one of the types, creating what is needed.
	var pick func(ts ...Type) int
	pick = func(ts ...Type) int {
		var cands []int
		for _, t := range ts {
			cands = append(cands, byType[t]...)
		}
		if len(cands) > 0 && r.IntN(4) != 0 {
			return cands[r.IntN(len(cands))]
		}
		t := ts[r.IntN(len(ts))]
		switch t {
		case ListString:
			return add(Node{Op: "unigrams", Inputs: []int{pick(String)}}, ListString)
		case ListInt64:
			return add(Node{Op: "hash", Inputs: []int{pick(ListString)}}, ListInt64)
		}
		return addCol(t)
	}
	randInt := func(lo, hi int64) int64 {
		if r.IntN(3) == 0 {
			return []int64{lo, hi}[r.IntN(2)]
		}
		return lo + r.Int64N(min(hi-lo, 1<<40)+1)
	}
	randFloat := func() float64 {
		switch r.IntN(5) {
		case 0:
			return float64(r.IntN(100) - 50)
		case 1:
			return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(1000+r.IntN(48))<<52) // any mantissa
		case 2:
			return []float64{0, 1e-300, -1e300, 5e-324, math.MaxFloat64, 0.1}[r.IntN(6)]
		}
		return (r.Float64() - 0.5) * 1e6
	}
	steps := 1 + r.IntN(25)
	for range steps {
		var n Node
		var t Type
		switch op := Default().Names()[r.IntN(len(Default().Names()))]; op {
		case "col":
			addCol(TypeInvalid)
			continue
		case "lower", "strip_punct":
			in := pick(String, ListString)
			n, t = Node{Op: op, Inputs: []int{in}}, types[in]
		case "unigrams":
			n, t = Node{Op: op, Inputs: []int{pick(String)}}, ListString
		case "ngrams":
			n, t = Node{Op: op, Inputs: []int{pick(String)}}, ListString
			if r.IntN(2) == 0 {
				n.Params = []Param{{Name: "n", Value: IntValue(randInt(1, 16))}}
			}
		case "intersect", "union", "concat":
			elem := []Type{String, Int64}[r.IntN(2)]
			k := 1 + r.IntN(4)
			for range k {
				n.Inputs = append(n.Inputs, pick(elem, ListOf(elem)))
			}
			n.Op, t = op, ListOf(elem)
		case "dedupe", "truncate", "length":
			in := pick(ListString, ListInt64)
			n, t = Node{Op: op, Inputs: []int{in}}, types[in]
			if op == "truncate" && r.IntN(2) == 0 {
				n.Params = []Param{{Name: "max", Value: IntValue(randInt(0, 1<<20))}}
			}
			if op == "length" {
				t = Int64
			}
		case "hash":
			in := pick(String, Int64, ListString, ListInt64)
			n, t = Node{Op: op, Inputs: []int{in}}, Int64
			if types[in].IsList() {
				t = ListInt64
			}
			if r.IntN(2) == 0 {
				n.Params = append(n.Params, Param{Name: "buckets", Value: IntValue(randInt(1, 1<<62))})
			}
			if r.IntN(2) == 0 {
				n.Params = append(n.Params, Param{Name: "salt", Value: IntValue(int64(r.Uint64()))})
			}
		case "cross":
			n = Node{Op: op, Inputs: []int{pick(String, Int64, ListString, ListInt64), pick(String, Int64, ListString, ListInt64)}}
			t = ListInt64
			if r.IntN(2) == 0 {
				n.Params = []Param{{Name: "buckets", Value: IntValue(randInt(1, 1<<62))}}
			}
		case "bucketize":
			var bs []float64
			x := randFloat()
			for range 1 + r.IntN(8) {
				bs = append(bs, x)
				x += math.Abs(randFloat()) + math.Abs(x)*1e-9 + 1e-300
				if math.IsInf(x, 0) {
					break
				}
			}
			n = Node{Op: op, Inputs: []int{pick(Int64, Float64)}, Params: []Param{{Name: "boundaries", Value: FloatListValue(bs)}}}
			t = Int64
		case "log1p":
			n, t = Node{Op: op, Inputs: []int{pick(Int64, Float64)}}, Float64
		case "clip":
			in := pick(Int64, Float64)
			lo, hi := randFloat(), randFloat()
			if lo > hi {
				lo, hi = hi, lo
			}
			n = Node{Op: op, Inputs: []int{in}, Params: []Param{{Name: "hi", Value: FloatValue(hi)}, {Name: "lo", Value: FloatValue(lo)}}}
			t = types[in]
		case "fill_missing":
			in := pick(String, Int64, Float64)
			var def Value
			switch types[in] {
			case String:
				def = StringValue(randString(r))
			case Int64:
				def = IntValue(int64(r.Uint64()))
			default:
				def = FloatValue(randFloat())
			}
			n, t = Node{Op: op, Inputs: []int{in}, Params: []Param{{Name: "default", Value: def}}}, types[in]
		default:
			panic("randomGraph does not know op " + op)
		}
		add(n, t)
	}
	// Names: some nodes get a let name, some become model inputs (names of
	// both kinds unique across the graph).
	used := map[string]bool{}
	name := func() string {
		for {
			nm := randIdent(r)
			if !used[nm] && !IsKeyword(nm) {
				used[nm] = true
				return nm
			}
		}
	}
	for i := range g.Nodes {
		if r.IntN(4) == 0 {
			g.Nodes[i].Name = name()
		}
	}
	for range 1 + r.IntN(4) {
		g.Inputs = append(g.Inputs, ModelInput{Name: name(), Node: r.IntN(len(g.Nodes))})
	}
	if r.IntN(3) == 0 { // the last node is often the output
		g.Inputs = append(g.Inputs, ModelInput{Name: name(), Node: len(g.Nodes) - 1})
	}
	return g
}

func randIdent(r *rand.Rand) string {
	const first = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
	const rest = first + "0123456789"
	var b strings.Builder
	b.WriteByte(first[r.IntN(len(first))])
	for range r.IntN(8) {
		b.WriteByte(rest[r.IntN(len(rest))])
	}
	return b.String()
}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(5) {
		p := textPieces[r.IntN(len(textPieces))]
		if strings.ToValidUTF8(p, "") == p {
			b.WriteString(p)
		}
	}
	return b.String()
}

var update = flag.Bool("update", false, "rewrite the seed corpus testdata/fuzz/FuzzParse from the round-trip examples")

// TestWriteFuzzSeeds keeps testdata/fuzz/FuzzParse in step with the
// examples when run with -update.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, src := range roundTripExamples {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", src)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("example%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzStringKernels splits arbitrary bytes into rows and checks every
// string kernel (lower, strip_punct, unigrams, ngrams, hash, and the set
// ops, truncate and its readers over the tokens) against rowref, cell by cell: the 8-bytes-at-a-time
// paths, the tokenizer's shortcuts and invalid UTF-8 handling meet inputs
// no table of cases thought of.
//
//	go test ./transform -run XXX -fuzz FuzzStringKernels -fuzztime 60s
func FuzzStringKernels(f *testing.F) {
	f.Add([]byte("Hello WORLD\x00ΣΑΣ ς İ\xff\xe2\x82 a\u00a0b\u3000c, d!\x00\x00"), uint8(3), uint8(0))
	f.Add([]byte("abcdefgh ABCDEFGH 12345678\tIJKLMNOP\x00qrstuvwx"), uint8(1), uint8(0x20))
	f.Add([]byte("\xe2\x80\x80\xe2\x80\x8b\xc2\xa0\xc2\x85x\xe1\x9a\x80y\xe3\x80\x80z"), uint8(2), uint8(7))
	reg := Default()
	f.Fuzz(func(t *testing.T, data []byte, n uint8, nullEvery uint8) {
		rows := strings.Split(string(data), "\x00")
		col := rowref.Column{Type: rowref.String, Str: rows}
		if nullEvery > 0 {
			col.Null = make([]bool, len(rows))
			for i := range rows {
				col.Null[i] = i%int(nullEvery) == 0
				if col.Null[i] {
					col.Str[i] = ""
				}
			}
		}
		in := toArrow(col)
		defer in.Release()
		run := func(op string, params []Param, in ...arrow.Array) rowref.Column {
			k, _ := reg.Kernel(op)
			out, err := runKernel(k, in, &Node{Op: op, Params: params})
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			defer out.Release()
			return fromArrow(out)
		}
		check := func(name string, want, got rowref.Column) {
			if d := diffColumns(want, got); d != "" {
				t.Fatalf("%s: %s", name, d)
			}
		}
		ng := int(n%4) + 1
		check("lower", rowref.Lower(col), run("lower", nil, in))
		check("strip_punct", rowref.StripPunct(col), run("strip_punct", nil, in))
		toks := rowref.Unigrams(col)
		check("unigrams", toks, run("unigrams", nil, in))
		check("ngrams", rowref.Ngrams(col, ng), run("ngrams", []Param{pInt("n", int64(ng))}, in))
		check("hash", rowref.Hash(col, 1000003, 1), run("hash", []Param{pInt("buckets", 1000003), pInt("salt", 1)}, in))
		tokArr := toArrow(toks)
		defer tokArr.Release()
		check("lower(list)", rowref.Lower(toks), run("lower", nil, tokArr))
		check("hash(list)", rowref.Hash(toks, 97, 0), run("hash", []Param{pInt("buckets", 97), pInt("salt", 0)}, tokArr))
		check("dedupe", rowref.Dedupe(toks), run("dedupe", nil, tokArr))
		check("intersect", rowref.Intersect(toks, col), run("intersect", nil, tokArr, in))
		check("union", rowref.Union(col, toks), run("union", nil, in, tokArr))
		check("concat", rowref.Concat(toks, col), run("concat", nil, tokArr, in))
		short := rowref.Truncate(toks, ng)
		check("truncate", short, run("truncate", []Param{pInt("max", int64(ng))}, tokArr))
		// truncate's result (a list-view when it shortens a row) read by
		// hash and length as it is, and by lower through a copy.
		tk, _ := reg.Kernel("truncate")
		tr, err := runKernel(tk, []arrow.Array{tokArr}, &Node{Op: "truncate", Params: []Param{pInt("max", int64(ng))}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Release()
		check("hash(truncate)", rowref.Hash(short, 97, 0), run("hash", []Param{pInt("buckets", 97), pInt("salt", 0)}, tr))
		check("length(truncate)", rowref.Length(short), run("length", nil, tr))
		check("lower(truncate)", rowref.Lower(short), run("lower", nil, tr))
	})
}
