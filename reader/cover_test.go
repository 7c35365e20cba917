package reader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sigdata/sig/canon"
	fleetgen "github.com/sigdata/sig/fleet/gen"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// edgeGraph holds the node kinds a cover may name that random fleets rarely
// draw (issue 27, item 1): bare columns (a component that is one, and one
// read by two parents), nodes only constant folding produces (truncate of
// a truncate, ngrams with n=1, a flattened union, intersect(x, x)) and
// nodes used twice inside one component.
const edgeGraph = `
input dev = col("device")
input ok = hash(col("device"), buckets=16)
input devs = cross(col("device"), hash(col("device"), buckets=16), buckets=97)
input folded = truncate(truncate(unigrams(lower(lower(col("query")))), max=8), max=3)
input grams = union(ngrams(col("ad_title"), n=1), union(unigrams(col("ad_category")), unigrams(col("ad_title"))))
input same = intersect(unigrams(col("country")), unigrams(col("country")))
input twice = concat(unigrams(lower(col("query"))), ngrams(lower(col("query")), n=2))
`

// TestCoversEqualLIG is the property of covers (issue 20): whatever memo
// nodes a LOCAL input reads — any subset of its component's nodes, its root
// included, nested in each other or not, shared with other inputs or not,
// bare columns, nodes constant folding made, nodes used twice (issue 27) —
// and whichever inputs are read whole from their memo objects, a unit's
// responses are byte for byte those of pure local input generation. The
// graphs are random fleets' (fleet/gen: families of near-duplicates with
// nested shared subexpressions) and edgeGraph; the covers random by seed,
// and the test fails unless they drew every kind.
func TestCoversEqualLIG(t *testing.T) {
	fl, err := fleetgen.Generate(fleetgen.Config{Seed: 20, Pipelines: 12, Clients: 3, Epochs: 2, FirstEpoch: 4})
	if err != nil {
		t.Fatal(err)
	}
	var graphs []string
	for _, p := range fl.Pipelines[:3] {
		graphs = append(graphs, p.DSL)
	}
	graphs = append(graphs, edgeGraph)
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 1500, Nulls: true, Graphs: graphs, Nodes: true})
	ctx := context.Background()
	kinds := f.addColumnNodes(ctx, t, graphs)
	s := f.server(t, Config{})
	lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 512, allMode(local))})
	if err != nil {
		t.Fatal(err)
	}
	f.checkContent(t, 0, lig)
	nested := 0
	drawn := map[string]int{}
	for seed := uint64(0); seed < 24; seed++ {
		r := rand.New(rand.NewPCG(seed, 20))
		u := f.unit(0, 512, func(int) readerv1.InputMode {
			if r.IntN(5) == 0 {
				return memo
			}
			return local
		})
		p := r.Float64() // the density of memo nodes in this cover
		for i, in := range u.Inputs {
			if in.Mode != local {
				continue
			}
			picked := 0
			for _, n := range f.inputs[i].nodes {
				if r.Float64() >= p {
					continue
				}
				picked++
				for _, k := range kinds[n.key] {
					drawn[k]++
				}
				in.MemoNodes = append(in.MemoNodes, &readerv1.MemoNodeRead{Key: n.key.String(), Type: n.typ.String(),
					MemoObject: block.MemoKey(n.key, blockref.ParseMemo(f.blocks[0].id)), MemoState: sigv1.BlockState_BLOCK_STATE_READY})
			}
			if picked > 1 {
				nested++
			}
		}
		got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		sameResponses(t, "LIG", lig, fmt.Sprintf("cover seed %d", seed), got)
	}
	if st := s.Stats(); st.MemoNodes == 0 || nested == 0 {
		t.Fatalf("stats %+v, %d inputs with several memo nodes: the covers read no memo nodes", st, nested)
	}
	for _, k := range []string{kindColumn, kindFolded, kindTwice} {
		if drawn[k] == 0 {
			t.Errorf("the covers drew no %s as a memo node (drawn: %v)", k, drawn)
		}
	}
}

// foldedNodes are the nodes of edgeGraph's canonical form that it does not
// write: canonicalization's rewrites (canon.Canonical.mk) made them.
var foldedNodes = []string{
	`truncate(unigrams(lower(col("query"))), max=3)`,
	`union(unigrams(col("ad_category")), unigrams(col("ad_title")))`,
	`dedupe(unigrams(col("country")))`,
}

// The node kinds of issue 27 that TestCoversEqualLIG must draw.
const (
	kindColumn = "bare column"
	kindFolded = "node made by constant folding"
	kindTwice  = "node used twice"
)

// addColumnNodes adds every bare column of every input's component to the
// input's memo nodes (the fixture's Nodes skips them), memoizing each as a
// worker memoizes a component that is one column, and returns the kinds of
// issue 27 each memo node is: a bare column, a node of the canonical form
// the written graph does not have (foldedNodes), a node with two users in
// one component.
func (f *fixture) addColumnNodes(ctx context.Context, tb testing.TB, graphs []string) map[canon.Key][]string {
	tb.Helper()
	reg := transform.Default()
	kinds := map[canon.Key][]string{}
	at := 0
	for gi, src := range graphs {
		g, err := transform.Parse([]byte(src), fmt.Sprintf("graph%d", gi), transform.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		c, err := canon.Canonicalize(g, f.schema, reg, transform.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		// Nodes the written graph does not have: the rewrites of
		// canonicalization made them (truncate's bounds folded into one,
		// ngrams(n=1) made unigrams and the unions flattened, intersect(x,
		// x) made dedupe(x)).
		folded := map[canon.Key]bool{}
		for _, expr := range foldedNodes {
			if k, _, err := canon.KeyOf(expr, f.schema, reg); err != nil {
				tb.Fatal(err)
			} else if _, ok := c.NodeIndex(k); ok {
				folded[k] = true
			}
		}
		for x := range c.Components {
			comp := &c.Components[x]
			in := &f.inputs[at+x]
			users := map[int]int{}
			for _, j := range comp.Nodes {
				for _, i := range c.Nodes[j].Inputs {
					users[i]++
				}
			}
			for _, j := range comp.Nodes {
				n := &c.Nodes[j]
				if n.Op == "col" {
					cone := c.Cone(j, "out")
					node := fixtureInput{name: in.name + "_" + cone.Key.Short(), key: cone.Key,
						typ: cone.Type, dsl: c.DSL(&cone, "out"), columns: cone.Columns}
					if err := f.memoize(ctx, 0, node, block.Uncompressed); err != nil {
						tb.Fatal(err)
					}
					in.nodes = append(in.nodes, node)
					kinds[n.Key] = append(kinds[n.Key], kindColumn)
				}
				if folded[n.Key] && !slices.Contains(kinds[n.Key], kindFolded) {
					kinds[n.Key] = append(kinds[n.Key], kindFolded)
				}
				if users[j] > 1 && !slices.Contains(kinds[n.Key], kindTwice) {
					kinds[n.Key] = append(kinds[n.Key], kindTwice)
				}
			}
		}
		at += len(c.Components)
	}
	if at != len(f.inputs) {
		tb.Fatalf("%d components in the graphs, %d fixture inputs", at, len(f.inputs))
	}
	return kinds
}

// TestMemoNodeChecks: a memo node must be a node of its input's component,
// of that node's type, at its memo object, listed once, on a LOCAL input;
// each refusal is InvalidArgument naming the field. A memo node not ready
// is a pending memo (Unavailable), like a MEMO input's.
func TestMemoNodeChecks(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 100, Graphs: fleetGraphs(t, "ctr_small"), Nodes: true})
	s := f.server(t, Config{})
	ctx := context.Background()
	var withNodes, other int = -1, -1
	for i, in := range f.inputs {
		if len(in.nodes) >= 2 && withNodes < 0 {
			withNodes = i
		} else if other < 0 {
			other = i
		}
	}
	if withNodes < 0 || other < 0 {
		t.Fatalf("fixture inputs %s: want one with two nodes and another", f.inputNames())
	}
	node := func(n fixtureInput) *readerv1.MemoNodeRead {
		return &readerv1.MemoNodeRead{Key: n.key.String(), Type: n.typ.String(),
			MemoObject: block.MemoKey(n.key, blockref.ParseMemo(f.blocks[0].id)), MemoState: sigv1.BlockState_BLOCK_STATE_READY}
	}
	inner := f.inputs[withNodes].nodes[0]
	foreign := f.inputs[other].nodes[len(f.inputs[other].nodes)-1]
	for _, tc := range []struct {
		name, want string
		edit       func(in *readerv1.ModelInput)
	}{
		{"not in the component", "memo_nodes[0].key: " + foreign.key.Short() + " is not a node", func(in *readerv1.ModelInput) {
			in.MemoNodes = []*readerv1.MemoNodeRead{node(foreign)}
		}},
		{"wrong type", "memo_nodes[0].type", func(in *readerv1.ModelInput) {
			n := node(inner)
			n.Type = map[bool]string{true: "int64", false: "string"}[n.Type != "int64"]
			in.MemoNodes = []*readerv1.MemoNodeRead{n}
		}},
		{"twice", "memo_nodes[1].key", func(in *readerv1.ModelInput) {
			in.MemoNodes = []*readerv1.MemoNodeRead{node(inner), node(inner)}
		}},
		{"other object", "memo_nodes[0].memo_object", func(in *readerv1.ModelInput) {
			n := node(inner)
			n.MemoObject = block.MemoKey(foreign.key, blockref.ParseMemo(f.blocks[0].id))
			in.MemoNodes = []*readerv1.MemoNodeRead{n}
		}},
		{"bad key", "memo_nodes[0].key", func(in *readerv1.ModelInput) {
			n := node(inner)
			n.Key = "xyz"
			in.MemoNodes = []*readerv1.MemoNodeRead{n}
		}},
		{"on a MEMO input", "memo_nodes: only LOCAL", func(in *readerv1.ModelInput) {
			in.Mode = memo
			in.MemoNodes = []*readerv1.MemoNodeRead{node(inner)}
		}},
	} {
		u := f.unit(0, 64, allMode(local))
		tc.edit(u.Inputs[withNodes])
		_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
		want := fmt.Sprintf("inputs[%d].%s", withNodes, tc.want)
		if st := Status(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", tc.name, err, want)
		}
	}
	u := f.unit(0, 64, allMode(local))
	n := node(inner)
	n.MemoState = sigv1.BlockState_BLOCK_STATE_PENDING
	u.Inputs[withNodes].MemoNodes = []*readerv1.MemoNodeRead{n}
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); !IsMemoPending(err) {
		t.Errorf("a pending memo node: %v, want memo pending", err)
	}
}
