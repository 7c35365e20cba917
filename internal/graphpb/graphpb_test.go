package graphpb

import (
	"errors"
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
	}
	for _, tc := range cases {
		_, err := FromProto(tc.g, transform.Limits{})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("err = %v, want field %s", err, tc.field)
		}
	}
}
