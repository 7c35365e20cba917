package eviction_test

import (
	"slices"
	"testing"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestEvictNestedSubgraphReachesMemoNodes: under cost-aware covers a faulty
// nested subgraph (the lowered query) sits inside a whole memoized
// component of one pipeline and inside a memo node two others' covers
// share; evicting it removes the memo objects of both, whoever uses them,
// leaves a memo node not containing it alone, names every pipeline
// affected, and the solutions recompute to complete (issue 20).
func TestEvictNestedSubgraphReachesMemoNodes(t *testing.T) {
	e := newEnv(t, evictiontest.Config{Rows: 5000, Blocks: 2, Insertion: sigd.InsertionCost})
	submit := func(client, pipeline, dsl string, memoize map[string]string) {
		t.Helper()
		req := sigdtest.Submit(client, pipeline, 0, dsl, e.All())
		req.Memoize = memoize
		if _, err := e.SIG(client).SubmitGraph(e.Ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// ctr memoizes its hashed tokens whole; cvr and explore truncate the
	// tokens their own way and share a memo node beneath (cvr re-submits
	// once explore's arrival made the node shared); explore's advertiser
	// hash is memoized whole and has nothing of the query.
	submit("ctr", "whole", `input ids = hash(unigrams(lower(col("query"))), buckets=1000)`, map[string]string{"ids": "always"})
	submit("cvr", "t3", `input q3 = truncate(unigrams(lower(col("query"))), max=3)`, nil)
	submit("explore", "t5", `input q5 = truncate(unigrams(lower(col("query"))), max=5)
input adv = hash(col("advertiser_id"), buckets=100)`, map[string]string{"adv": "always"})
	submit("cvr", "t3", `input q3 = truncate(unigrams(lower(col("query"))), max=3)`, nil)
	whole := e.WaitComplete("ctr", "whole")
	t3 := e.WaitComplete("cvr", "t3")
	t5 := e.WaitComplete("explore", "t5")
	ids := sigdtest.InputKey(t, whole, "ids")
	var shared, adv canon.Key
	for _, in := range append(t3.GetInputs(), t5.GetInputs()...) {
		switch in.GetInput() {
		case "adv":
			adv = sigdtest.InputKey(t, t5, "adv")
		default:
			if len(in.GetMemoNodes()) != 1 {
				t.Fatalf("%s: memo nodes %v, want the shared one", in.GetInput(), in.GetMemoNodes())
			}
			k, err := canon.ParseKey(in.GetMemoNodes()[0].GetKey())
			if err != nil || (shared != (canon.Key{}) && k != shared) {
				t.Fatalf("%s: memo node %v (%v), want one both share", in.GetInput(), k, err)
			}
			shared = k
		}
	}
	for _, k := range []canon.Key{ids, shared, adv} {
		e.CheckMemoized(k)
	}

	done, err := e.SIG(evictiontest.Operator).Evict(e.Ctx, &sigv1.EvictRequest{
		Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: `lower(col("query"))`}, Reason: "lowercasing bug"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(done.Components, ids.String()) || !slices.Contains(done.Components, shared.String()) || slices.Contains(done.Components, adv.String()) {
		t.Errorf("evicted components %v: want the whole component %s and the memo node %s, not %s", done.Components, ids.Short(), shared.Short(), adv.Short())
	}
	if want := []string{"ctr/whole", "cvr/t3", "explore/t5"}; !slices.Equal(done.Pipelines, want) {
		t.Errorf("pipelines %v, want %v", done.Pipelines, want)
	}
	// At least the whole component's and the memo node's objects (and any
	// other memo node containing the subgraph: cvr's first cover, from
	// before explore shared the node, may have been computed); the only
	// memo objects left are the advertiser hash's.
	if done.ObjectsDeleted < uint32(2*len(e.Blocks)) {
		t.Errorf("%d objects deleted, want at least the whole component's and the memo node's (%d)", done.ObjectsDeleted, 2*len(e.Blocks))
	}
	advObjects := e.Objects(adv)
	for info, err := range e.Srv.Store().List(e.Ctx, "memo/") {
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(advObjects, info.Key) {
			t.Errorf("memo object %s survived the eviction", info.Key)
		}
	}
	for _, k := range []canon.Key{ids, shared} {
		if objs := e.Objects(k); len(objs) != 0 {
			t.Errorf("%s still has objects %v", k.Short(), objs)
		}
		if m := e.Memos(k); m[matching.MemoReady] != 0 {
			t.Errorf("%s still has ready entries: %v", k.Short(), m)
		}
	}
	e.CheckMemoized(adv)
	// Read again, the solutions recompute what was evicted.
	for _, p := range [][2]string{{"ctr", "whole"}, {"cvr", "t3"}, {"explore", "t5"}} {
		e.Solution(p[0], p[1])
		e.WaitComplete(p[0], p[1])
	}
	e.CheckMemoized(ids)
	e.CheckMemoized(shared)
}
