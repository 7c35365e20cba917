package sigd_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
)

func protoGraph(g *sigv1.Graph) *sigv1.GraphSpec {
	return &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Graph{Graph: g}, RawSource: "ads"}
}

func withName(n *sigv1.Node, name string) *sigv1.Node {
	n.Name = name
	return n
}

// bigDefaults is a graph of n fill_missing nodes, each with a default of
// 4096 bytes (the string limit): every field within its limit, its DSL
// text over the 1 MiB source limit from n = 256.
func bigDefaults(n int) *sigv1.Graph {
	g := &sigv1.Graph{Nodes: []*sigv1.Node{colNode("query")}}
	for i := range n {
		g.Nodes = append(g.Nodes, &sigv1.Node{Op: "fill_missing", Inputs: []uint32{0}, Params: []*sigv1.Param{
			{Name: "default", Value: &sigv1.Value{Kind: &sigv1.Value_Str{Str: strings.Repeat(string(rune('a'+i%26)), 4096)}}}}})
		g.Inputs = append(g.Inputs, &sigv1.ModelInput{Name: fmt.Sprintf("x%d", i), Node: uint32(i + 1)})
	}
	return g
}

func colNode(name string) *sigv1.Node {
	return &sigv1.Node{Op: "col", Params: []*sigv1.Param{{Name: "name", Value: &sigv1.Value{Kind: &sigv1.Value_Str{Str: name}}}}}
}

// TestBadRequests: malformed graphs, unknown columns and ops, empty ranges,
// oversized graphs and bad names are refused with InvalidArgument naming
// the problem, whether the graph comes as DSL or as a message; nothing is
// registered, scheduled or changed, even when the bad graph is submitted
// for an existing pipeline.
func TestBadRequests(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctr, op := srv.SIG(t, "ctr"), srv.SIG(t, "operator")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, hashGraph(11), w.All())); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, srv)

	all := w.All()
	dsl := func(src string) *sigv1.SubmitGraphRequest { return sigdtest.Submit("ctr", "p", 5, src, all) }
	withRange := func(from, to int64) *sigv1.SubmitGraphRequest {
		r := dsl(hashGraph(13))
		r.Range = &sigv1.EventRange{StartMicros: from, EndMicros: to}
		return r
	}
	graph := func(g *sigv1.Graph) *sigv1.SubmitGraphRequest {
		r := dsl("")
		r.Graph = protoGraph(g)
		return r
	}
	var huge strings.Builder
	for i := 0; huge.Len() <= 1<<20; i++ {
		fmt.Fprintf(&huge, "input x%d = hash(col(\"query\"), buckets=%d)\n", i, i+2)
	}
	manyInputs := ""
	for i := 0; i < 1025; i++ {
		manyInputs += fmt.Sprintf("input x%d = hash(col(\"query\"), buckets=%d)\n", i, i+2)
	}
	manyNodes := &sigv1.Graph{}
	for i := 0; i < 10001; i++ {
		manyNodes.Nodes = append(manyNodes.Nodes, colNode("query"))
	}
	manyNodes.Inputs = []*sigv1.ModelInput{{Name: "q", Node: 0}}
	deep := "let x0 = col(\"query\")\n"
	for i := 1; i <= 300; i++ {
		deep += fmt.Sprintf("let x%d = lower(x%d)\n", i, i-1)
	}
	deep += "input out = x300\n"
	noRange := dsl(hashGraph(13))
	noRange.Range = nil
	noGraph := dsl("")
	noGraph.Graph = nil
	otherSource := dsl(hashGraph(13))
	otherSource.Graph.RawSource = "clicks"
	badPrio := dsl(hashGraph(13))
	badPrio.Priority = 5000
	badPipeline := dsl(hashGraph(13))
	badPipeline.Pipeline = "p\x00q"
	badClient := dsl(hashGraph(13))
	badClient.Client = "a/b"

	submits := []struct {
		name string
		c    sigv1.SIGClient
		req  *sigv1.SubmitGraphRequest
		want []string // substrings of the error message
	}{
		{"DSL syntax error", ctr, dsl("input x = lower(col(\"query\")\n"), []string{"graph.dsl: 1:16:", "not closed"}},
		{"unknown op", ctr, dsl("input x = frobnicate(col(\"query\"))\n"), []string{"frobnicate"}},
		{"unknown column", ctr, dsl("input x = lower(col(\"no_such_column\"))\n"), []string{"no_such_column"}},
		{"wrong type", ctr, dsl("input x = lower(col(\"bid_price\"))\n"), []string{"lower"}},
		{"parameter out of range", ctr, dsl("input x = hash(col(\"query\"), buckets=0)\n"), []string{"buckets"}},
		{"duplicate input", ctr, dsl("input x = col(\"query\")\ninput x = col(\"ad_title\")\n"), []string{"x"}},
		{"no inputs", ctr, dsl("# nothing\n"), []string{"graph"}},
		{"empty range", ctr, withRange(all.StartMicros, all.StartMicros), []string{"range", "empty"}},
		{"inverted range", ctr, withRange(all.EndMicros, all.StartMicros), []string{"range"}},
		{"missing range", ctr, noRange, []string{"range"}},
		{"range of all int64", ctr, withRange(math.MinInt64, math.MaxInt64), []string{"range.start_micros", "-9223372036854775808", "1970-01-01T00:00:00Z"}},
		{"range from before the epoch", ctr, withRange(-1, all.EndMicros), []string{"range.start_micros", "1970-01-01T00:00:00Z"}},
		{"range to MaxInt64", ctr, withRange(all.StartMicros, math.MaxInt64), []string{"range.end_micros", "10000-01-01T00:00:00Z"}},
		{"range into the year 10000", ctr, withRange(all.StartMicros, transform.EndEventTime+1), []string{"range.end_micros", "10000-01-01T00:00:00Z"}},
		{"missing graph", ctr, noGraph, []string{"graph"}},
		{"unknown raw source", ctr, otherSource, []string{"clicks"}},
		{"priority out of range", ctr, badPrio, []string{"priority"}},
		{"pipeline name with a NUL", ctr, badPipeline, []string{"pipeline"}},
		{"client name with a slash", op, badClient, []string{"client"}},
		{"DSL over the size limit", ctr, dsl(huge.String()), []string{"graph.dsl", "limit"}},
		{"too many inputs", ctr, dsl(manyInputs), []string{"1025", "1024"}},
		{"too deep", ctr, dsl(deep), []string{"deeper", "256"}},
		{"message graph with too many nodes", ctr, graph(manyNodes), []string{"graph.nodes", "10001"}},
		{"message graph with a dangling input", ctr, graph(&sigv1.Graph{
			Nodes:  []*sigv1.Node{{Op: "lower", Inputs: []uint32{7}}},
			Inputs: []*sigv1.ModelInput{{Name: "x", Node: 0}}}), []string{"graph.nodes[0].inputs", "node 7"}},
		{"message graph with a cycle", ctr, graph(&sigv1.Graph{
			Nodes:  []*sigv1.Node{{Op: "lower", Inputs: []uint32{1}}, {Op: "lower", Inputs: []uint32{0}}},
			Inputs: []*sigv1.ModelInput{{Name: "x", Node: 0}}}), []string{"cycle"}},
		{"message graph with a 3 MB node name", ctr, graph(&sigv1.Graph{
			Nodes:  []*sigv1.Node{withName(colNode("query"), strings.Repeat("a", 3<<20))},
			Inputs: []*sigv1.ModelInput{{Name: "x", Node: 0}}}), []string{"graph.nodes[0].name", "invalid name", "128 bytes"}},
		{"message graph with a node name that is not a DSL name", ctr, graph(&sigv1.Graph{
			Nodes:  []*sigv1.Node{withName(colNode("query"), "q\ninput y")},
			Inputs: []*sigv1.ModelInput{{Name: "x", Node: 0}}}), []string{"graph.nodes[0].name", "invalid name"}},
		{"message graph with two nodes of one name", ctr, graph(&sigv1.Graph{
			Nodes:  []*sigv1.Node{withName(colNode("query"), "q"), withName(colNode("ad_title"), "q")},
			Inputs: []*sigv1.ModelInput{{Name: "x", Node: 0}, {Name: "y", Node: 1}}}), []string{"node 1", "duplicate name \"q\""}},
		{"message graph whose DSL would exceed the source limit", ctr, graph(bigDefaults(300)), []string{"graph", "1048576"}},
		{"message graph input out of range", ctr, graph(&sigv1.Graph{
			Nodes:  []*sigv1.Node{colNode("query")},
			Inputs: []*sigv1.ModelInput{{Name: "x", Node: 3}}}), []string{"graph.inputs"}},
	}
	for _, c := range submits {
		_, err := c.c.SubmitGraph(ctx, c.req)
		st, _ := status.FromError(err)
		if st.Code() != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", c.name, err)
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(st.Message(), s) {
				t.Errorf("%s: message %q does not name %q", c.name, st.Message(), s)
			}
		}
	}
	others := []struct {
		name string
		call func() error
		want string
	}{
		{"read with an inverted range", func() error {
			_, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p",
				Range: &sigv1.EventRange{StartMicros: 10, EndMicros: 5}})
			return err
		}, "range"},
		{"read with a range past the end of event time", func() error {
			_, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p",
				Range: &sigv1.EventRange{StartMicros: all.StartMicros, EndMicros: math.MaxInt64}})
			return err
		}, "range.end_micros"},
		{"watch with a range before the epoch", func() error {
			st, err := ctr.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: "ctr", Pipeline: "p",
				Range: &sigv1.EventRange{StartMicros: math.MinInt64, EndMicros: all.EndMicros}})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}, "range.start_micros"},
		{"priority out of range", func() error {
			_, err := ctr.SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: -1})
			return err
		}, "priority"},
		{"release quarantine with a key that is not hex", func() error {
			_, err := op.ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{ComponentKey: strings.Repeat("z", 64), BlockId: w.Blocks[0].ID})
			return err
		}, "component_key"},
		{"release quarantine without a key", func() error {
			_, err := op.ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{BlockId: w.Blocks[0].ID})
			return err
		}, "component_key"},
		{"lease with a bad worker id", func() error {
			_, err := srv.Workers(t, "worker").LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: ""})
			return err
		}, "worker"},
		{"complete with negative rows", func() error {
			_, err := srv.Workers(t, "worker").CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: "x", Rows: -1})
			return err
		}, "negative"},
	}
	for _, c := range others {
		err := c.call()
		st, _ := status.FromError(err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", c.name, err, c.want)
		}
	}
	checkUnchanged(t, before, stateOf(t, srv))
}

// TestConfigRefused: worker bounds that cannot work are refused before
// anything starts, naming the flags.
func TestConfigRefused(t *testing.T) {
	for _, cfg := range []sigd.Config{
		{WorkersMin: 1, WorkersMax: 0},
		{WorkersMin: 5, WorkersMax: 4},
		{WorkersMin: -1, WorkersMax: 4},
	} {
		_, err := sigd.New(context.Background(), cfg, sigd.Options{})
		if err == nil || !strings.Contains(err.Error(), "--workers-max") {
			t.Errorf("min %d max %d: %v, want an error naming --workers-max", cfg.WorkersMin, cfg.WorkersMax, err)
		}
	}
}
