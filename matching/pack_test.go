package matching

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// packFixture is a frontend with two components over b000 and b001, their
// entries pending, and Memos whose Stat finds the objects in objects.
type packFixture struct {
	f       *Frontend
	l       *Memos
	keys    []canon.Key
	objects map[string]bool
}

func newPackFixture(t *testing.T) *packFixture {
	t.Helper()
	f, _, clk := newTestFrontend(t, 2)
	res, err := f.Submit(SubmitRequest{Client: "c", Pipeline: "p", From: 0, To: 200,
		Graph: mustParse(t, "input q = hash(col(\"query\"), buckets=7)\ninput n = length(unigrams(lower(col(\"query\"))))")})
	if err != nil {
		t.Fatal(err)
	}
	px := &packFixture{f: f, objects: map[string]bool{}}
	for _, in := range res.Solution.Inputs {
		px.keys = append(px.keys, in.Component)
	}
	px.l = &Memos{Frontend: f, Clock: clk,
		Versions: catalogVersions{"b000": blockVersions("b000")[:1], "b001": blockVersions("b001")[:1]},
		Stat: func(_ context.Context, key string) error {
			if !px.objects[key] {
				return errors.New("no such object")
			}
			return nil
		}}
	return px
}

// members are the pending entries of every component over id, as one
// batch's completion names them.
func (px *packFixture) members(t *testing.T, id string) []Member {
	t.Helper()
	var out []Member
	for _, k := range px.keys {
		m := blockref.NewMemo(id, 1)
		spec, err := px.l.Describe(k, m)
		if err != nil || spec.Gen == 0 {
			t.Fatalf("Describe(%s, %s): gen %d, %v", k.Short(), m, spec.Gen, err)
		}
		out = append(out, Member{Component: k, Block: m, Gen: spec.Gen, Completion: Completion{Rows: 100, Bytes: 800}})
	}
	return out
}

// TestCompletePack: the members of one pack are switched to it in one
// batch, each naming the pack and its column, only for the incarnation
// it was computed for; the pack index lists them; a pack that does not
// exist, is another block's or source's, or holds another component's
// column marks nothing.
func TestCompletePack(t *testing.T) {
	px := newPackFixture(t)
	ctx := context.Background()
	cache := px.f.Cache()
	pack := block.PackKey("ads", blockref.New("b000", 1), "p1")
	ms := px.members(t, "b000")

	// Refused before anything is marked.
	if _, err := px.l.CompletePack(ctx, pack, ms); err == nil {
		t.Fatal("a pack that does not exist was switched to")
	}
	px.objects[pack] = true
	bad := slices.Clone(ms)
	bad[1].Column = block.MemberColumn(px.keys[0])
	for name, c := range map[string]struct {
		object  string
		members []Member
	}{
		"a component's own object": {block.MemoKey(px.keys[0], ms[0].Block), ms},
		"another block's pack":     {block.PackKey("ads", blockref.New("b001", 1), "p1"), ms},
		"another source's pack":    {block.PackKey("web", blockref.New("b000", 1), "p1"), ms},
		"another member's column":  {pack, bad},
	} {
		px.objects[c.object] = true
		if _, err := px.l.CompletePack(ctx, c.object, c.members); !errors.Is(err, ErrInvalidCompletion) {
			t.Errorf("%s: %v, want ErrInvalidCompletion", name, err)
		}
	}
	for _, m := range ms {
		if e, _ := cache.Memo(m.Component, m.Block); e.State != MemoPending {
			t.Fatalf("entry %s marked by a refused completion: %+v", m.Component.Short(), e)
		}
	}

	// One member's entry was recomputed meanwhile: only the other is
	// marked.
	stale := slices.Clone(ms)
	stale[0].Gen++
	marked, err := px.l.CompletePack(ctx, pack, stale)
	if err != nil || !slices.Equal(marked, []bool{false, true}) {
		t.Fatalf("CompletePack with a stale member: %v, %v", marked, err)
	}
	e, _ := cache.Memo(ms[1].Component, ms[1].Block)
	if e.State != MemoReady || e.Object != pack || e.Column != block.MemberColumn(ms[1].Component) || e.Bytes != 800 || !e.Packed() {
		t.Fatalf("switched entry %+v", e)
	}
	if e, _ := cache.Memo(ms[0].Component, ms[0].Block); e.State != MemoPending || e.Object != block.MemoKey(ms[0].Component, ms[0].Block) {
		t.Fatalf("stale member's entry %+v", e)
	}
	if got, err := cache.PackEntries(pack); err != nil || len(got) != 1 || got[0].Component != ms[1].Component {
		t.Fatalf("PackEntries = %+v, %v", got, err)
	}
	// The first member into a pack of its own; a remote completion (gen
	// 0) marks whatever incarnation is pending.
	pack2 := block.PackKey("ads", blockref.New("b000", 1), "p2")
	px.objects[pack2] = true
	remote := ms[:1:1]
	remote[0].Gen = 0
	if marked, err := px.l.CompletePack(ctx, pack2, remote); err != nil || !marked[0] {
		t.Fatalf("remote completion: %v, %v", marked, err)
	}
	// A completion none of whose members is still wanted deletes its
	// pack (Memos.Delete); a retried one of a pack its entries name does
	// not.
	var deleted []string
	px.l.Delete = func(_ context.Context, key string) error {
		deleted = append(deleted, key)
		return nil
	}
	pack9 := block.PackKey("ads", blockref.New("b000", 1), "p9")
	px.objects[pack9] = true
	if marked, err := px.l.CompletePack(ctx, pack9, stale[:1]); err != nil || marked[0] {
		t.Fatalf("stale completion: %v, %v", marked, err)
	}
	if marked, err := px.l.CompletePack(ctx, pack, ms[1:]); err != nil || marked[0] {
		t.Fatalf("retried completion: %v, %v", marked, err)
	}
	if !slices.Equal(deleted, []string{pack9}) {
		t.Fatalf("deleted %v, want the pack no entry took", deleted)
	}
	px.l.Delete = nil
	// Complete of a single member is CompletePack of one.
	m1 := px.members(t, "b001")
	pack3 := block.PackKey("ads", blockref.New("b001", 1), "p3")
	px.objects[pack3] = true
	if err := px.l.Complete(ctx, m1[0].Component, m1[0].Block, m1[0].Gen+1, Completion{Object: pack3, Rows: 1}); !errors.Is(err, ErrStale) {
		t.Fatalf("Complete of another incarnation into a pack: %v, want ErrStale", err)
	}
	if err := px.l.Complete(ctx, m1[0].Component, m1[0].Block, m1[0].Gen, Completion{Object: pack3, Rows: 1}); err != nil {
		t.Fatal(err)
	}
	if e, _ := cache.Memo(m1[0].Component, m1[0].Block); e.Object != pack3 || e.Column != block.MemberColumn(m1[0].Component) {
		t.Fatalf("completed entry %+v", e)
	}
}

// TestPackFreedWithItsLastEntry: a pack stays while an entry names it —
// invalidating or deleting one member leaves the others ready in it — and
// Unnamed gives it to the caller to delete once the last goes; an object of
// one component is freed with its entry.
func TestPackFreedWithItsLastEntry(t *testing.T) {
	px := newPackFixture(t)
	ctx := context.Background()
	cache := px.f.Cache()
	pack := block.PackKey("ads", blockref.New("b000", 1), "p1")
	px.objects[pack] = true
	ms := px.members(t, "b000")
	if _, err := px.l.CompletePack(ctx, pack, ms); err != nil {
		t.Fatal(err)
	}
	a, _ := cache.Memo(ms[0].Component, ms[0].Block)
	b, _ := cache.Memo(ms[1].Component, ms[1].Block)

	// Recomputing a: its entry names no pack, b is still ready in it.
	after, err := px.f.Invalidate(a.Component, a.Block, a.Gen, "recompute")
	if err != nil || after.Packed() || after.Object != block.MemoKey(a.Component, a.Block) {
		t.Fatalf("invalidated %+v, %v", after, err)
	}
	if got, err := cache.Unnamed([]MemoEntry{a}); err != nil || len(got) != 0 {
		t.Fatalf("Unnamed after one member left: %v, %v", got, err)
	}
	if e, _ := cache.Memo(b.Component, b.Block); e.State != MemoReady || e.Object != pack {
		t.Fatalf("the other member after the first was recomputed: %+v", e)
	}
	// Evicting b: the pack is unnamed.
	if err := cache.DeleteMemo(b.Component, b.Block); err != nil {
		t.Fatal(err)
	}
	if got, err := cache.Unnamed([]MemoEntry{a, b}); err != nil || !slices.Equal(got, []string{pack}) {
		t.Fatalf("Unnamed after the last member left: %v, %v", got, err)
	}
	// An object of one component goes with its ready entry; a pending
	// or failed entry's key names no object.
	legacy := MemoEntry{Component: a.Component, Block: a.Block, State: MemoReady, Object: block.MemoKey(a.Component, a.Block)}
	if got, _ := cache.Unnamed([]MemoEntry{legacy}); !slices.Equal(got, []string{legacy.Object}) {
		t.Fatalf("Unnamed of an object of one component: %v", got)
	}
	for _, st := range []MemoState{MemoPending, MemoFailed} {
		legacy.State = st
		if got, _ := cache.Unnamed([]MemoEntry{legacy}); len(got) != 0 {
			t.Fatalf("Unnamed of a %s entry without a pack: %v, want none", st, got)
		}
	}
	// DeleteMemos takes the index keys with the entries.
	m1 := px.members(t, "b001")
	pack1 := block.PackKey("ads", blockref.New("b001", 1), "p1")
	px.objects[pack1] = true
	if _, err := px.l.CompletePack(ctx, pack1, m1); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.DeleteMemos(m1[0].Component); err != nil {
		t.Fatal(err)
	}
	if named, _ := cache.PackNamed(pack1); !named {
		t.Fatal("pack unnamed while its second member is ready")
	}
	if _, err := cache.DeleteMemos(m1[1].Component); err != nil {
		t.Fatal(err)
	}
	if named, _ := cache.PackNamed(pack1); named {
		t.Fatal("pack named after all its entries were deleted")
	}
}

// TestSweepingPacksExcludesCompletion: a completion that found its pack
// does not switch entries to it while the sweep of unnamed packs runs,
// so the sweep never deletes a pack an entry is about to name.
func TestSweepingPacksExcludesCompletion(t *testing.T) {
	px := newPackFixture(t)
	ctx := context.Background()
	pack := block.PackKey("ads", blockref.New("b000", 1), "p1")
	px.objects[pack] = true
	ms := px.members(t, "b000")
	done := make(chan error, 1)
	var early error
	ranEarly := false
	err := px.f.SweepingPacks(func() error {
		go func() {
			_, err := px.l.CompletePack(ctx, pack, ms)
			done <- err
		}()
		select {
		case early = <-done:
			ranEarly = true
			t.Errorf("completion ran during the sweep: %v", early)
		case <-time.After(200 * time.Millisecond):
		}
		if named, _ := px.f.Cache().PackNamed(pack); named {
			t.Error("pack named during the sweep")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ranEarly {
		early = <-done
	}
	if early != nil {
		t.Fatal(early)
	}
	if named, _ := px.f.Cache().PackNamed(pack); !named {
		t.Fatal("pack not named after the sweep")
	}
}
