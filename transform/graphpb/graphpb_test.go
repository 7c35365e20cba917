package graphpb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
)

func TestRoundTrip(t *testing.T) {
	src := `
let q = unigrams(lower(col("query")))
input a = hash(q, buckets=10, salt=-3)
input b = bucketize(col("bid_price"), boundaries=[0.5, 1, 2])
input c = fill_missing(col("country"), default="xx")
input d = clip(col("bid_price"), lo=0, hi=2.5)
`
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromProto(ToProto(g), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Equal(back) {
		t.Fatalf("round trip changed the graph:\n%s\nvs\n%s", transform.Print(g), transform.Print(back))
	}
}

func TestFromProtoNamesTheField(t *testing.T) {
	cases := []struct {
		g     *sigv1.Graph
		field string
	}{
		{nil, "graph"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "lower", Inputs: []uint32{5}}}}, "graph.nodes[0].inputs"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col", Params: []*sigv1.Param{{Name: "name"}}}}}, "graph.nodes[0].params[0]"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col"}}, Inputs: []*sigv1.ModelInput{{Name: "x", Node: 3}}}, "graph.inputs[0].node"},
		{&sigv1.Graph{Nodes: make([]*sigv1.Node, 20000)}, "graph.nodes"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col", Name: strings.Repeat("a", 129)}}}, "graph.nodes[0].name"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col", Name: "let"}}}, "graph.nodes[0].name"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col"}}, Inputs: []*sigv1.ModelInput{{Name: "a b", Node: 0}}}, "graph.inputs[0].name"},
		{&sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col"}}, Inputs: []*sigv1.ModelInput{{Name: strings.Repeat("x", 129), Node: 0}}}, "graph.inputs[0].name"},
		{manyStrings(300), "graph"},
	}
	for _, tc := range cases {
		_, err := FromProto(tc.g, transform.Limits{})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("err = %v, want field %s", err, tc.field)
		}
	}
}

// manyStrings is a graph whose every field is within its limit but whose
// DSL text cannot be under the source limit: n nodes with a 4096-byte
// string parameter each.
func manyStrings(n int) *sigv1.Graph {
	g := &sigv1.Graph{Nodes: []*sigv1.Node{{Op: "col", Params: []*sigv1.Param{{Name: "name", Value: &sigv1.Value{Kind: &sigv1.Value_Str{Str: "query"}}}}}}}
	for i := range n {
		g.Nodes = append(g.Nodes, &sigv1.Node{Op: "fill_missing", Inputs: []uint32{0}, Params: []*sigv1.Param{
			{Name: "default", Value: &sigv1.Value{Kind: &sigv1.Value_Str{Str: strings.Repeat("z", 4096)}}}}})
		g.Inputs = append(g.Inputs, &sigv1.ModelInput{Name: fmt.Sprintf("x%d", i), Node: uint32(i + 1)})
	}
	return g
}

// TestFromProtoAcceptsWhatTheDSLWrites: every example graph, sent as a
// message, is accepted; the source limit holds a message to at least the
// size of the DSL text it came from (MinSourceBytes is a lower bound).
func TestFromProtoAcceptsWhatTheDSLWrites(t *testing.T) {
	files, err := filepath.Glob("../../examples/fleet/*.sig")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := transform.Parse(src, f, transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if n := transform.MinSourceBytes(g); n > len(src) {
			t.Errorf("%s: MinSourceBytes %d > %d bytes of source", f, n, len(src))
		}
		// At a source limit of exactly its own size, the graph is accepted.
		if _, err := FromProto(ToProto(g), transform.Limits{MaxSourceBytes: len(src)}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
