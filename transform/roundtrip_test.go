package transform

import (
	"strings"
	"testing"
)

// roundTripExamples are DSL texts that must survive Parse -> Print -> Parse
// as the same graph.
var roundTripExamples = []string{
	// The brief's example.
	`let q      = unigrams(lower(col("query")))
let t      = unigrams(lower(col("ad_title")))
input qa_overlap = concat(intersect(q, t), col("ad_category"))
input query_ids  = hash(q, buckets=1000003)
input price_bin  = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
`,
	// Forward references: names used before the line that defines them.
	`input overlap = intersect(q, t)
let t = unigrams(lower(col("ad_title")))
let q = unigrams(lower(col("query")))
`,
	// Aliases.
	`let q = unigrams(lower(col("query")))
let r = q
let s = r
input a = dedupe(s)
input b = length(r)
`,
	// Inputs referencing other inputs, and two inputs on one node.
	`input tokens = unigrams(strip_punct(lower(col("ad_title"))))
input ids = hash(tokens, buckets=1000, salt=-7)
input same = tokens
input n = length(tokens)
`,
	// Dead lets, one of them using another.
	`let unused = ngrams(col("query"), n=3)
let unused2 = truncate(unused, max=2)
input x = col("advertiser_id")
`,
	// Multi-line calls, trailing commas, comments everywhere.
	`# header comment
let q = unigrams(   # tokens of the query
    lower(col("query")),
)
input c = cross(
    q,
    col("country"),  # a scalar, promoted
    buckets=4096,
)
input b = bucketize(col("bid_price"), boundaries=[
    -1.5,
    0,
    1e-3,
    2.5e10,
])   # trailing comment
`,
	// Every op and parameter kind, strings with escapes and Unicode.
	`input a = fill_missing(col("country"), default="n/a \"quoted\" \\ é 日本 \t")
input b = fill_missing(col("advertiser_id"), default=-9223372036854775808)
input c = fill_missing(col("bid_price"), default=-0.25)
input d = clip(col("bid_price"), lo=-1e300, hi=1.7976931348623157e308)
input e = clip(col("click"), lo=0, hi=1)
input f = log1p(col("bid_price"))
input g = union(unigrams(col("query")), col("ad_category"), ngrams(col("ad_title"), n=16))
input h = concat(col("event_id"), hash(col("advertiser_id"), buckets=1, salt=9223372036854775807))
input i = intersect(unigrams(col("query")))
input j = truncate(dedupe(unigrams(col("query"))), max=0)
input k = hash(col("device"))
input l = cross(unigrams(col("query")), unigrams(col("ad_title")))
`,
	// col(name=...) and a parameter before it is filled by Check.
	`input x = lower(col(name="query"))
input y = ngrams(col("query"))
`,
	// Statements in an order that is not a topological order, deeply.
	`input out = union(c, b)
let c = unigrams(b2)
let b2 = lower(a)
let b = unigrams(a)
let a = strip_punct(col("ad_title"))
`,
	// Names that look like the printer's generated ones.
	`let _n0 = lower(col("query"))
let _n1 = unigrams(_n0)
input x = union(_n1, unigrams(_n0))
`,
	// Windows line endings and tabs.
	"let q =\tunigrams(lower(col(\"query\")))\r\ninput x = q\r\n",
}

// TestParsePrintParse checks that Print is an inverse of Parse: the printed
// text parses back to an Equal graph, both before and after Check, and
// printing is a fixed point.
func TestParsePrintParse(t *testing.T) {
	for i, src := range roundTripExamples {
		g1, err := Parse([]byte(src), "", Limits{})
		if err != nil {
			t.Fatalf("example %d: %v\n%s", i, err, src)
		}
		s1 := Print(g1)
		g2, err := Parse([]byte(s1), "", Limits{})
		if err != nil {
			t.Fatalf("example %d: printed text does not parse: %v\n%s", i, err, s1)
		}
		if !g1.Equal(g2) {
			t.Fatalf("example %d: Parse(Print(g)) != g\nsource:\n%s\nprinted:\n%s", i, src, s1)
		}
		if s2 := Print(g2); s2 != s1 {
			t.Fatalf("example %d: Print is not a fixed point:\n%s\nthen\n%s", i, s1, s2)
		}
		// Checked graphs (explicit defaults, normalized numbers).
		if _, err := Check(g1, AdsSchema(), Default(), Limits{}); err != nil {
			t.Fatalf("example %d: %v", i, err)
		}
		s3 := Print(g1)
		g3, _, err := ParseAndCheck([]byte(s3), "", AdsSchema(), Default(), Limits{})
		if err != nil {
			t.Fatalf("example %d: printed checked graph: %v\n%s", i, err, s3)
		}
		if !g1.Equal(g3) {
			t.Fatalf("example %d: checked graph does not round trip\n%s", i, s3)
		}
	}
}

// TestPrintExamples pins what Print writes for a few graphs, so that a
// change of format is a deliberate one.
func TestPrintExamples(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		// Statements come in dependency order, ties in source order.
		{roundTripExamples[1], `let t = unigrams(lower(col("ad_title")))
let q = unigrams(lower(col("query")))
input overlap = intersect(q, t)
`},
		{roundTripExamples[2], `let q = unigrams(lower(col("query")))
input a = dedupe(q)
input b = length(q)
`},
		{roundTripExamples[3], `input tokens = unigrams(strip_punct(lower(col("ad_title"))))
input same = tokens
input ids = hash(tokens, buckets=1000, salt=-7)
input n = length(tokens)
`},
	} {
		g, err := Parse([]byte(tc.src), "", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got := Print(g); got != tc.want {
			t.Errorf("Print:\n%s\nwant:\n%s", got, tc.want)
		}
	}
	// A graph built in code with an unnamed shared node gets a generated
	// name; a node named by a keyword or by a model input's name is not
	// printed under that name.
	g := &Graph{
		Nodes: []Node{
			{Op: "col", Params: []Param{{Name: "name", Value: StringValue("query")}}},
			{Op: "lower", Inputs: []int{0}, Name: "let"},
			{Op: "unigrams", Inputs: []int{1}, Name: "x"},
			{Op: "union", Inputs: []int{2, 2}},
		},
		Inputs: []ModelInput{{Name: "x", Node: 3}},
	}
	want := "let _n2 = unigrams(lower(col(\"query\")))\ninput x = union(_n2, _n2)\n"
	if got := Print(g); got != want {
		t.Errorf("Print:\n%s\nwant:\n%s", got, want)
	}
}

// TestGraphEqual makes sure Equal sees every difference the round-trip
// tests rely on it to see.
func TestGraphEqual(t *testing.T) {
	base, err := Parse([]byte(roundTripExamples[0]), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(g *Graph){
		"op":          func(g *Graph) { g.Nodes[1].Op = "strip_punct" },
		"name":        func(g *Graph) { g.Nodes[2].Name = "other" },
		"input edge":  func(g *Graph) { g.Nodes[2].Inputs[0] = 0 },
		"param value": func(g *Graph) { g.Nodes[0].Params[0].Value = StringValue("ad_title") },
		"param name":  func(g *Graph) { g.Nodes[0].Params[0].Name = "other" },
		"extra param": func(g *Graph) { g.Nodes[1].Params = append(g.Nodes[1].Params, Param{Name: "n", Value: IntValue(1)}) },
		"input node":  func(g *Graph) { g.Inputs[0].Node = 0 },
		"input name":  func(g *Graph) { g.Inputs[0].Name = "renamed" },
		"extra node":  func(g *Graph) { g.Nodes = append(g.Nodes, Node{Op: "col"}) },
		"list param": func(g *Graph) {
			for i := range g.Nodes {
				if g.Nodes[i].Op == "bucketize" {
					g.Nodes[i].Params[0].Value.Floats[0] = 0.2
				}
			}
		},
	} {
		h := base.Clone()
		mutate(h)
		if base.Equal(h) || h.Equal(base) {
			t.Errorf("Equal misses a different %s", name)
		}
	}
	if !base.Equal(base.Clone()) {
		t.Error("a graph is not Equal to its clone")
	}
	if !strings.Contains(Print(base), "bucketize") {
		t.Error("Print lost a node")
	}
}
