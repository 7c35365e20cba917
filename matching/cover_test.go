package matching

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Two models sharing a nested subexpression, the query's tokens, each
// truncating them to its own length, and a cheap bucketized price.
const (
	graphNestedA = `
input q3 = truncate(unigrams(lower(col("query"))), max=3)
input price = bucketize(col("bid_price"), boundaries=[1, 2])
`
	graphNestedB = `
input q5 = truncate(unigrams(lower(col("query"))), max=5)
`
)

// newCoverFrontend is a frontend under the cost-aware insertion policy,
// over blocks of production-like size (a memo object's GET spread over
// 100k rows).
func newCoverFrontend(t *testing.T, nblocks int) (*Frontend, *fakeSched) {
	f, sched, _ := newTestFrontend(t, nblocks)
	f.cfg.Insertion = insertion.Config{}
	fb := f.cfg.Blocks.(*fakeBlocks)
	for i := range fb.blocks {
		fb.blocks[i].Rows = 100_000
	}
	return f, sched
}

func keyOf(t *testing.T, expr string) canon.Key {
	t.Helper()
	k, _, err := canon.KeyOf(expr, transform.AdsSchema(), transform.Default())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestNestedSharedNodeOnce: two models that share a nested subexpression
// read it from one memo node, computed by one task per block; each model's
// own op on top and the cheap input are their readers' (issue 20). The
// solutions name the node's entries, the residual and the policy's reason.
func TestNestedSharedNodeOnce(t *testing.T) {
	f, sched := newCoverFrontend(t, 3)
	submit := func(client, pipeline, graph string) *SubmitResult {
		t.Helper()
		r, err := f.Submit(SubmitRequest{Client: client, Pipeline: pipeline, Priority: 5, Graph: mustParse(t, graph), From: 0, To: 300})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// a arrives alone and decides with its own reuse; b's arrival makes the
	// tokens shared; a re-submits (as fleets do each epoch) and decides
	// again, with both.
	submit("c1", "a", graphNestedA)
	rb := submit("c2", "b", graphNestedB)
	ra := submit("c1", "a", graphNestedA)
	// The policy picks the shared node (its constants decide which node of
	// the shared cone: the tokens or the lowered query beneath them).
	var shared canon.Key
	for _, in := range ra.Solution.Inputs {
		if in.Name == "q3" && len(in.MemoNodes) == 1 {
			shared = in.MemoNodes[0].Key
		}
	}
	tokens := shared
	if tokens != keyOf(t, `unigrams(lower(col("query")))`) && tokens != keyOf(t, `lower(col("query"))`) {
		t.Fatalf("q3's memo node %s is not the shared subexpression: %+v", tokens.Short(), ra.Solution.Inputs)
	}
	// One task per block left to compute, the shared node's, requested by
	// both pipelines: a task of a's first cover, if it had one, is no
	// longer needed (sigd describes it as nothing to compute).
	want := []string{tokens.String() + "/b000", tokens.String() + "/b001", tokens.String() + "/b002"}
	var got []string
	for k := range sched.tasks {
		key, _, _ := strings.Cut(k, "/")
		ck, err := canon.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		needed, err := f.Needed(ck)
		if err != nil {
			t.Fatal(err)
		}
		if needed {
			got = append(got, k)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("tasks needed %v, want the shared node's per block %v", got, want)
	}
	requesters := map[string]bool{}
	for _, c := range sched.calls {
		if c.comp == tokens {
			requesters[c.client+"/"+c.pipeline] = true
		}
	}
	if len(requesters) != 2 {
		t.Fatalf("requesters %v, want both pipelines", requesters)
	}
	for _, in := range append(ra.Solution.Inputs, rb.Solution.Inputs...) {
		if !in.Computed || in.Reason == "" || len(in.Blocks) != 3 {
			t.Fatalf("input %s: computed %v, reason %q, %d blocks", in.Name, in.Computed, in.Reason, len(in.Blocks))
		}
		switch in.Name {
		case "price":
			if len(in.MemoNodes) != 0 || !strings.HasPrefix(in.Reason, "readers compute it from raw columns") {
				t.Fatalf("price: %d memo nodes, reason %q; want none, computed by readers", len(in.MemoNodes), in.Reason)
			}
			if in.Blocks[0].State != MemoReady {
				t.Fatalf("price: block state %v, want ready (nothing to wait for)", in.Blocks[0].State)
			}
		default:
			if len(in.MemoNodes) != 1 || in.MemoNodes[0].Key != tokens || !strings.Contains(in.Residual, `memo("`+tokens.Short()+`")`) {
				t.Fatalf("%s: memo nodes %+v, residual %q", in.Name, in.MemoNodes, in.Residual)
			}
			if in.Blocks[1].State != MemoPending || in.MemoNodes[0].Blocks[1].Object == "" || in.Blocks[1].Object != "" {
				t.Fatalf("%s: block %+v, memo node block %+v", in.Name, in.Blocks[1], in.MemoNodes[0].Blocks[1])
			}
		}
	}
	// The tokens' node is a component: its record, its users, its DSL.
	rec, err := f.Cache().Component(tokens)
	if err != nil || rec.DSL != ra.Solution.Inputs[0].MemoNodes[0].DSL || !strings.Contains(rec.DSL, `lower(col("query"))`) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	users, err := f.Cache().Users(tokens)
	if err != nil || len(users) != 2 {
		t.Fatalf("users of the tokens %v, %v; want both pipelines", users, err)
	}
	// Ready for one block: that block of both models is ready, the others
	// pending.
	gen, _, err := f.Begin(tokens, blockref.ParseMemo("b001"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.MarkReady(tokens, blockref.ParseMemo("b001"), gen, 100_000, 6_400_000); err != nil {
		t.Fatal(err)
	}
	sol, err := f.ReadSolution("c2", "b", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := sol.Inputs[0].Blocks; b[1].State != MemoReady || b[0].State != MemoPending || sol.Ready != 1 || sol.Pending != 2 {
		t.Fatalf("after one block: %+v (ready %d, pending %d)", b, sol.Ready, sol.Pending)
	}
	// Its measured size is kept for the policy.
	st, err := f.Cache().CostStats(tokens)
	if err != nil || st.Nodes[tokens].BytesPerRow() != 64 || len(st.Nodes) != 1 {
		t.Fatalf("size statistics %+v, %v", st.Nodes, err)
	}
}

// TestMemoizeOverride: an owner's override is honoured (always: the whole
// component, however cheap; never: nothing, however shared), recorded in
// the cover, and an override naming no model input is refused naming the
// field.
func TestMemoizeOverride(t *testing.T) {
	f, sched := newCoverFrontend(t, 2)
	if _, err := f.Submit(SubmitRequest{Client: "c2", Pipeline: "b", Priority: 7, Graph: mustParse(t, graphNestedB), From: 0, To: 200}); err != nil {
		t.Fatal(err)
	}
	r, err := f.Submit(SubmitRequest{Client: "c1", Pipeline: "a", Priority: 5, Graph: mustParse(t, graphNestedA), From: 0, To: 200,
		Memoize: map[string]insertion.Override{"price": insertion.Always, "q3": insertion.Never}})
	if err != nil {
		t.Fatal(err)
	}
	price := keyOf(t, `bucketize(col("bid_price"), boundaries=[1, 2])`)
	for _, in := range r.Solution.Inputs {
		switch in.Name {
		case "price":
			if in.Computed || in.Component != price || in.Blocks[0].Object == "" || !strings.Contains(in.Reason, "override") {
				t.Fatalf("price under always: %+v", in)
			}
		case "q3":
			if !in.Computed || len(in.MemoNodes) != 0 || !strings.Contains(in.Reason, "override") {
				t.Fatalf("q3 under never: %+v", in)
			}
		}
	}
	if !sched.tasks[price.String()+"/b000"] {
		t.Fatalf("no task of the always-memoized price: %v", sched.tasks)
	}
	p, err := f.Cache().Pipeline("c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if o := p.Inputs[1].Cover.Override; p.Inputs[1].Name != "price" || o != "always" {
		t.Fatalf("stored override %q of %s", o, p.Inputs[1].Name)
	}
	_, err = f.Submit(SubmitRequest{Client: "c1", Pipeline: "a", Priority: 5, Graph: mustParse(t, graphNestedA), From: 0, To: 200,
		Memoize: map[string]insertion.Override{"nope": insertion.Always}})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != "memoize" || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("override of no input: %v", err)
	}
}

// TestCoversPaperPolicy: under MemoizeAll every input is its whole
// component, the paper's SIG, whatever it costs.
func TestCoversPaperPolicy(t *testing.T) {
	f, sched := newCoverFrontend(t, 2)
	f.cfg.Insertion.MemoizeAll = true
	r, err := f.Submit(SubmitRequest{Client: "c1", Pipeline: "a", Priority: 5, Graph: mustParse(t, graphNestedA), From: 0, To: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range r.Solution.Inputs {
		if in.Computed || in.Blocks[0].Object == "" {
			t.Fatalf("%s: %+v", in.Name, in)
		}
	}
	if len(sched.tasks) != 4 {
		t.Fatalf("%d tasks, want 2 components x 2 blocks", len(sched.tasks))
	}
}

// TestCoverNeverNamesBareColumn (issue 27): a bare column is memoized only
// as a model input's whole component (here by the owner's override), and
// no cover names it as a memo node — not even once its objects exist and
// their size is measured, under inputs readers compute (cheap ones) and
// inputs that read it twice: readers read it from the raw block, where
// fetching it costs what its memo object would and computing it nothing.
func TestCoverNeverNamesBareColumn(t *testing.T) {
	f, _ := newCoverFrontend(t, 2)
	price := keyOf(t, `col("bid_price")`)
	r, err := f.Submit(SubmitRequest{Client: "c1", Pipeline: "bp", Priority: 5, Graph: mustParse(t, `input bp = col("bid_price")`),
		From: 0, To: 200, Memoize: map[string]insertion.Override{"bp": insertion.Always}})
	if err != nil {
		t.Fatal(err)
	}
	if in := r.Solution.Inputs[0]; in.Computed || in.Component != price {
		t.Fatalf("bp under always: %+v, want the bare column memoized whole", in)
	}
	if err := f.Cache().AddSize(price, 800_000, 100_000); err != nil {
		t.Fatal(err)
	}
	computed := 0
	for _, p := range []string{"a", "b", "c"} {
		r, err := f.Submit(SubmitRequest{Client: "c2", Pipeline: p, Priority: 5, From: 0, To: 200, Graph: mustParse(t, `
input b = bucketize(col("bid_price"), boundaries=[1, 2])
input c = clip(col("bid_price"), lo=0, hi=10)
input both = cross(bucketize(col("bid_price"), boundaries=[1, 2]), bucketize(clip(col("bid_price"), lo=0, hi=10), boundaries=[3]), buckets=16)
`)})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range r.Solution.Inputs {
			if in.Computed {
				computed++
			}
			for _, mn := range in.MemoNodes {
				if mn.Key == price {
					t.Fatalf("pipeline %s input %s: a cover names the bare column as a memo node (%s)", p, in.Name, in.Reason)
				}
			}
		}
	}
	if computed == 0 {
		t.Fatal("every input was memoized whole: no cover could have named the column")
	}
}
