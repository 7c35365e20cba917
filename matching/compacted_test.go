package matching

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// compactedFixture is packFixture with a third component, every part's
// entry of the first two components ready, and compacted block c of parts
// b000 and b001 replacing them in the catalog's range.
func compactedFixture(t *testing.T) (*packFixture, Block, []Block) {
	t.Helper()
	px := newPackFixture(t)
	ctx := context.Background()
	res, err := px.f.Submit(SubmitRequest{Client: "c", Pipeline: "q", From: 0, To: 200,
		Graph: mustParse(t, "input p = bucketize(col(\"bid_price\"), boundaries=[1, 2])")})
	if err != nil {
		t.Fatal(err)
	}
	px.keys = append(px.keys, res.Solution.Inputs[0].Component)
	fb := px.f.cfg.Blocks.(*fakeBlocks)
	parts := slices.Clone(fb.blocks[:2])
	for _, id := range []string{"b000", "b001"} {
		ms := px.members(t, id)[:2] // the third stays pending
		pack := block.PackKey("ads", blockref.New(id, 1), "w")
		px.objects[pack] = true
		if _, err := px.l.CompletePack(ctx, pack, ms); err != nil {
			t.Fatal(err)
		}
	}
	c := Block{Ref: blockref.New("c", 1), RawObject: "raw/ads/c.arrow", MinEvent: 0, MaxEvent: 199, Rows: 200,
		Parts: []block.Part{{ID: "b000", Version: 1, Rows: 100}, {ID: "b001", Version: 1, Rows: 100}}}
	fb.blocks = []Block{c}
	px.l.Versions.(catalogVersions)["c"] = []block.Meta{{ID: "c", Source: "ads", Key: c.RawObject, Rows: 200, Parts: c.Parts}}
	return px, c, parts
}

// TestCompactedCandidates: the candidates of a compacted block are the
// components the pipelines covering it memoize, with their parts' entries
// when every part's is ready, and why not otherwise.
func TestCompactedCandidates(t *testing.T) {
	px, c, parts := compactedFixture(t)
	cands, err := px.f.Compacted("ads", c, c, parts)
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 3 {
		t.Fatalf("%d candidates, want 3", len(cands))
	}
	byKey := map[string]ConcatCandidate{}
	for _, cd := range cands {
		byKey[cd.Component.String()] = cd
	}
	for i, k := range px.keys {
		cd := byKey[k.String()]
		if cd.Block != blockref.NewMemo("c", 1) {
			t.Errorf("component %d: block %s", i, cd.Block)
		}
		if i < 2 && (cd.Left != "" || len(cd.Parts) != 2 || cd.Parts[1].Block != blockref.NewMemo("b001", 1) || cd.Parts[0].State != MemoReady) {
			t.Errorf("component %d, ready on both parts: %+v", i, cd)
		}
		if i == 2 && (cd.Left != "a part's entry is pending" || cd.Parts != nil) {
			t.Errorf("component %d, pending on the parts: %+v", i, cd)
		}
	}
	// Not a compacted block's version 1, or the parts mislabelled.
	if _, err := px.f.Compacted("ads", parts[0], parts[0], nil); err == nil {
		t.Error("a block without parts has candidates")
	}
	if _, err := px.f.Compacted("ads", c, c, []Block{parts[1], parts[0]}); err == nil {
		t.Error("parts out of order accepted")
	}
	// No pipeline of another source, or over another range, asks.
	other := c
	other.MinEvent, other.MaxEvent = 1000, 1099
	if cands, err := px.f.Compacted("ads", other, other, parts); err != nil || len(cands) != 0 {
		t.Errorf("a compacted block no pipeline covers: %d candidates, %v", len(cands), err)
	}
}

// TestCompleteConcatenated: a compacted block's concatenated pack is named
// in one batch by its members' entries: a missing entry is created ready,
// a pending one (a read solution made it first) switched keeping its
// generation, so the worker computing it is refused (ErrStale) and its
// task then has nothing to compute; a ready or failed entry, or one of a
// component being evicted, is left; a pack no member took is deleted.
func TestCompleteConcatenated(t *testing.T) {
	px, _, _ := compactedFixture(t)
	ctx := context.Background()
	cache := px.f.Cache()
	cb := blockref.NewMemo("c", 1)
	member := func(i int) Member {
		return Member{Component: px.keys[i], Block: cb, Completion: Completion{Rows: 200, Bytes: 1600}}
	}
	pack := block.PackKey("ads", blockref.New("c", 1), "concat")
	if _, err := px.l.CompleteConcatenated(ctx, pack, []Member{member(0)}); err == nil {
		t.Fatal("named a pack that does not exist")
	}
	px.objects[pack] = true
	// A read solution over c creates the three entries pending first;
	// the worker of the second begins.
	for _, p := range []string{"p", "q"} {
		if _, err := px.f.ReadSolution("c", p, 0, 200); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := px.l.Describe(px.keys[1], cb)
	if err != nil || spec.Gen == 0 {
		t.Fatalf("Describe: %+v, %v", spec, err)
	}
	// The first is evicted meanwhile (its entry deleted), and is being
	// evicted still when the pack is named.
	if err := cache.DeleteMemo(px.keys[0], cb); err != nil {
		t.Fatal(err)
	}
	var marked []bool
	err = px.f.Evicting(px.keys[:1], func() error {
		var err error
		marked, err = px.l.CompleteConcatenated(ctx, pack, []Member{member(0), member(1)})
		return err
	})
	if err != nil || !slices.Equal(marked, []bool{false, true}) {
		t.Fatalf("CompleteConcatenated while the first component is evicted: %v, %v", marked, err)
	}
	if _, err := cache.Memo(px.keys[0], cb); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an entry was created for a component being evicted: %v", err)
	}
	e, _ := cache.Memo(px.keys[1], cb)
	if e.State != MemoReady || e.Object != pack || e.Column != block.MemberColumn(px.keys[1]) || e.Gen != spec.Gen || e.Rows != 200 || e.Bytes != 1600 {
		t.Fatalf("switched entry %+v (generation %d before)", e, spec.Gen)
	}
	// The worker's own pack is refused, and its task has nothing left.
	wpack := block.PackKey("ads", blockref.New("c", 1), "w")
	px.objects[wpack] = true
	if err := px.l.Complete(ctx, px.keys[1], cb, spec.Gen, Completion{Object: wpack, Rows: 200}); !errors.Is(err, ErrStale) {
		t.Fatalf("the worker's completion after the switch: %v, want ErrStale", err)
	}
	if spec, _ := px.l.Describe(px.keys[1], cb); spec.Gen != 0 {
		t.Fatalf("the task after the switch computes generation %d", spec.Gen)
	}
	// After the eviction the missing entry is created ready.
	pack2 := block.PackKey("ads", blockref.New("c", 1), "concat2")
	px.objects[pack2] = true
	if marked, err := px.l.CompleteConcatenated(ctx, pack2, []Member{member(0)}); err != nil || !marked[0] {
		t.Fatalf("CompleteConcatenated of a missing entry: %v, %v", marked, err)
	}
	if e, _ := cache.Memo(px.keys[0], cb); e.State != MemoReady || e.Object != pack2 || e.Gen == 0 {
		t.Fatalf("created entry %+v", e)
	}
	// Ready and failed entries are left; the pack nobody took goes.
	if err := px.f.MarkFailed(px.keys[2], cb, "quarantined"); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	px.l.Delete = func(_ context.Context, key string) error {
		deleted = append(deleted, key)
		return nil
	}
	pack3 := block.PackKey("ads", blockref.New("c", 1), "concat3")
	px.objects[pack3] = true
	if marked, err := px.l.CompleteConcatenated(ctx, pack3, []Member{member(0), member(1), member(2)}); err != nil || slices.Contains(marked, true) {
		t.Fatalf("CompleteConcatenated over ready and failed entries: %v, %v", marked, err)
	}
	if !slices.Equal(deleted, []string{pack3}) {
		t.Fatalf("deleted %v, want the pack no entry took", deleted)
	}
	if e, _ := cache.Memo(px.keys[2], cb); e.State != MemoFailed {
		t.Fatalf("failed entry after: %+v", e)
	}
	if got, _ := cache.PackEntries(pack); len(got) != 1 || got[0].Component != px.keys[1] {
		t.Fatalf("the first pack's entries: %+v", got)
	}
}
