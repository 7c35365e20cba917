package transform

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestDefaultLimits checks each size limit at its default value: text
// exactly at the limit is accepted, one step over is rejected with the
// expected error and position.
func TestDefaultLimits(t *testing.T) {
	lim := DefaultLimits()
	nested := func(depth int) string { // depth ops on one line, col included
		return "input x = " + strings.Repeat("lower(", depth-1) + `col("query")` + strings.Repeat(")", depth-1) + "\n"
	}
	chain := func(depth int) string { // depth ops through lets
		var b strings.Builder
		b.WriteString("let a1 = col(\"query\")\n")
		for i := 2; i <= depth; i++ {
			fmt.Fprintf(&b, "let a%d = lower(a%d)\n", i, i-1)
		}
		fmt.Fprintf(&b, "input x = a%d\n", depth)
		return b.String()
	}
	nodes := func(stmts int) string { // 5 nodes a statement
		var b strings.Builder
		for i := range stmts {
			fmt.Fprintf(&b, "let x%d = lower(lower(lower(lower(col(\"query\")))))\n", i)
		}
		return b.String() + "input out = x0\n"
	}
	list := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprint(i)
		}
		return "input x = bucketize(col(\"bid_price\"), boundaries=[" + strings.Join(parts, ", ") + "])\n"
	}
	file := func(size int) string {
		s := "input x = lower(col(\"query\"))\n"
		line := "# " + strings.Repeat("-", 97) + "\n" // 100 bytes
		s += strings.Repeat(line, (size-len(s))/100)
		return s + strings.Repeat("#", size-len(s))
	}
	inputs := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "input x%d = col(\"query\")\n", i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name    string
		atLimit string
		over    string
		wantErr string
	}{
		{"depth nested", nested(lim.MaxDepth), nested(lim.MaxDepth + 1),
			fmt.Sprintf("1:%d: expression is nested deeper than the limit of 256 ops", 11+6*256)},
		{"depth lets", chain(lim.MaxDepth), chain(lim.MaxDepth + 1),
			"257:12: graph is deeper than the limit of 256 ops"},
		{"nodes", nodes(lim.MaxNodes / 5), nodes(lim.MaxNodes/5 + 1),
			"2001:37: graph has more than 10000 nodes (the limit)"},
		{"list", list(lim.MaxListLen), list(lim.MaxListLen + 1),
			"1:50: list has more than 1024 elements (the limit)"},
		{"file", file(lim.MaxSourceBytes), file(lim.MaxSourceBytes + 1),
			"10487:47: source is 1048577 bytes, more than the limit of 1048576"},
		{"inputs", inputs(lim.MaxInputs), inputs(lim.MaxInputs + 1),
			"1025:7: graph has 1025 model inputs, more than the limit of 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkDSL(t, []byte(tc.atLimit), Limits{}); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			err := checkDSL(t, []byte(tc.over), Limits{})
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("over the limit: got %v, want %s", err, tc.wantErr)
			}
		})
	}
}

// TestErrorFormats checks the three shapes of an error: with a file name,
// with a position only, and for graphs built in code (no position: the node
// index and op).
func TestErrorFormats(t *testing.T) {
	_, _, err := ParseAndCheck([]byte("input x = lowr(col(\"query\"))\n"), "model.sig", AdsSchema(), Default(), Limits{})
	if got, want := fmt.Sprint(err), `model.sig:1:11: unknown op "lowr" (did you mean "lower"?)`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	_, _, err = ParseAndCheck([]byte("input x = lower(col(\"query\")\n"), "model.sig", AdsSchema(), Default(), Limits{})
	if got, want := fmt.Sprint(err), `model.sig:1:16: "(" of lower is not closed (found end of input at 2:1)`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	g := &Graph{
		Nodes: []Node{
			{Op: "col", Params: []Param{{Name: "name", Value: StringValue("bid_price")}}},
			{Op: "lower", Inputs: []int{0}},
		},
		Inputs: []ModelInput{{Name: "x", Node: 1}},
	}
	_, err = Check(g, AdsSchema(), Default(), Limits{})
	if got, want := fmt.Sprint(err), "node 1 (lower): lower: argument 1 has type float64, want string or list<string>"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestCheckGraphsFromCode covers what only a graph built in code (or
// received over gRPC) can get wrong: references out of range, cycles
// among dead nodes, bad input names, invalid parameter values the DSL
// cannot write.
func TestCheckGraphsFromCode(t *testing.T) {
	col := func(name string) Node {
		return Node{Op: "col", Params: []Param{{Name: "name", Value: StringValue(name)}}}
	}
	for _, tc := range []struct {
		name string
		g    Graph
		want string
	}{
		{"input out of range", Graph{Nodes: []Node{col("query")}, Inputs: []ModelInput{{Name: "x", Node: 3}}},
			`input "x" refers to node 3, but the graph has 1 nodes`},
		{"edge out of range", Graph{Nodes: []Node{col("query"), {Op: "lower", Inputs: []int{-1}}}, Inputs: []ModelInput{{Name: "x", Node: 1}}},
			"node 1 (lower): input refers to node -1, but the graph has 2 nodes"},
		{"live cycle", Graph{Nodes: []Node{{Op: "lower", Inputs: []int{1}}, {Op: "lower", Inputs: []int{0}}}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			"node 0 (lower): cycle: node 0 (lower) -> node 1 (lower) -> node 0 (lower)"},
		{"dead cycle", Graph{Nodes: []Node{col("query"), {Op: "lower", Inputs: []int{2}, Name: "a"}, {Op: "lower", Inputs: []int{1}, Name: "b"}},
			Inputs: []ModelInput{{Name: "x", Node: 0}}},
			"node 1 (lower): cycle: a -> b -> a"},
		{"keyword input name", Graph{Nodes: []Node{col("query")}, Inputs: []ModelInput{{Name: "let", Node: 0}}},
			`invalid input name "let" (want a letter or _ followed by letters, digits or _, at most 128 bytes)`},
		{"bad input name", Graph{Nodes: []Node{col("query")}, Inputs: []ModelInput{{Name: "a-b", Node: 0}}},
			`invalid input name "a-b" (want a letter or _ followed by letters, digits or _, at most 128 bytes)`},
		{"invalid utf-8 column", Graph{Nodes: []Node{col("\xff")}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			"node 0 (col): col: parameter name is not valid UTF-8"},
		{"NaN bound", Graph{Nodes: []Node{col("bid_price"), {Op: "clip", Inputs: []int{0},
			Params: []Param{{Name: "lo", Value: FloatValue(nan())}, {Name: "hi", Value: FloatValue(1)}}}}, Inputs: []ModelInput{{Name: "x", Node: 1}}},
			"node 1 (clip): clip: parameter lo must be finite, got NaN"},
		{"infinite boundary", Graph{Nodes: []Node{col("bid_price"), {Op: "bucketize", Inputs: []int{0},
			Params: []Param{{Name: "boundaries", Value: FloatListValue([]float64{0, inf()})}}}}, Inputs: []ModelInput{{Name: "x", Node: 1}}},
			"node 1 (bucketize): bucketize: parameter boundaries element 2 must be finite, got +Inf"},
		{"infinite default", Graph{Nodes: []Node{col("bid_price"), {Op: "fill_missing", Inputs: []int{0},
			Params: []Param{{Name: "default", Value: FloatValue(inf())}}}}, Inputs: []ModelInput{{Name: "x", Node: 1}}},
			"node 1 (fill_missing): fill_missing: parameter default must be finite, got +Inf"},
		{"no kernel op", Graph{Nodes: []Node{{Op: "nope"}}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			`node 0: unknown op "nope"`},
		{"node name over the limit", Graph{Nodes: []Node{named(col("query"), strings.Repeat("a", 129))}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			`node 0 (col): invalid node name "` + strings.Repeat("a", 40) + `..." (want a letter or _ followed by letters, digits or _, at most 128 bytes)`},
		{"node name not an identifier", Graph{Nodes: []Node{named(col("query"), "q\ninput y")}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			`node 0 (col): invalid node name "q\ninput y" (want a letter or _ followed by letters, digits or _, at most 128 bytes)`},
		{"keyword node name", Graph{Nodes: []Node{named(col("query"), "input")}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			`node 0 (col): invalid node name "input" (want a letter or _ followed by letters, digits or _, at most 128 bytes)`},
		{"two nodes of one name", Graph{Nodes: []Node{named(col("query"), "q"), named(col("ad_title"), "q")},
			Inputs: []ModelInput{{Name: "x", Node: 0}, {Name: "y", Node: 1}}},
			`node 1 (col): duplicate name "q"`},
		{"node named like an input", Graph{Nodes: []Node{named(col("query"), "x")}, Inputs: []ModelInput{{Name: "x", Node: 0}}},
			`node 0 (col): duplicate name "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g.Clone()
			_, err := Check(g, AdsSchema(), Default(), Limits{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
}

func named(n Node, name string) Node {
	n.Name = name
	return n
}

func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }
