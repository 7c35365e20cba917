package reader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	fleetgen "github.com/sigdata/sig/fleet/gen"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestCoversEqualLIG is the property of covers (issue 20): whatever memo
// nodes a LOCAL input reads — any subset of its component's nodes, its root
// included, nested in each other or not, shared with other inputs or not —
// and whichever inputs are read whole from their memo objects, a unit's
// responses are byte for byte those of pure local input generation. The
// graphs are random fleets' (fleet/gen: families of near-duplicates with
// nested shared subexpressions); the covers random by seed.
func TestCoversEqualLIG(t *testing.T) {
	fl, err := fleetgen.Generate(fleetgen.Config{Seed: 20, Pipelines: 12, Clients: 3, Epochs: 2, FirstEpoch: 4})
	if err != nil {
		t.Fatal(err)
	}
	var graphs []string
	for _, p := range fl.Pipelines[:3] {
		graphs = append(graphs, p.DSL)
	}
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 1500, Nulls: true, Graphs: graphs, Nodes: true})
	s := f.server(t, Config{})
	ctx := context.Background()
	lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 512, allMode(local))})
	if err != nil {
		t.Fatal(err)
	}
	f.checkContent(t, 0, lig)
	nested := 0
	for seed := uint64(0); seed < 12; seed++ {
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
