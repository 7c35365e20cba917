package reader

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// mixedUnit is the unit of block b with every other input LOCAL, each
// LOCAL input reading all its memo nodes (a cover), the rest MEMO.
func (f *fixture) mixedUnit(b int) *readerv1.WorkUnit {
	u := f.unit(b, 128, func(i int) readerv1.InputMode {
		if i%2 == 0 {
			return local
		}
		return memo
	})
	for i, in := range u.Inputs {
		if in.Mode != local {
			continue
		}
		for _, n := range f.inputs[i].nodes {
			in.MemoNodes = append(in.MemoNodes, &readerv1.MemoNodeRead{Key: n.key.String(), Type: n.typ.String(),
				MemoObject: block.MemoKey(n.key, blockref.ParseMemo(f.blocks[b].id)), MemoState: sigv1.BlockState_BLOCK_STATE_READY})
		}
	}
	return u
}

// TestPlanCacheReuse: units of one input set on other blocks share one
// plan: the first builds it (its LOCAL inputs' program and, as reads guard
// them, the guard's programs of its MEMO inputs and memo nodes), the
// others build nothing and compile nothing, and each streams exactly the
// bytes of a server that plans every unit from scratch, and of LIG (a
// plan bound to another block's objects would not). A unit's own fields
// are checked on every unit, cached plan or not; a unit whose input set
// differs in any field gets a plan of its own.
func TestPlanCacheReuse(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 3, RowsPerBlock: 300, Nulls: true, Graphs: fleetGraphs(t, "ctr_small", "cvr"), Nodes: true})
	ctx := context.Background()
	s := f.server(t, Config{GuardSampleRows: 1000}) // every row guarded
	scratch := f.server(t, Config{GuardSampleRows: 1000, PlanCacheEntries: -1})
	var sh *shape
	var compiled int64
	for b := range f.blocks {
		u := f.mixedUnit(b)
		got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
		if err != nil {
			t.Fatalf("block %d: %v", b, err)
		}
		want, err := collect(ctx, scratch, &readerv1.ReadRequest{Unit: f.mixedUnit(b)})
		if err != nil {
			t.Fatal(err)
		}
		lig, err := collect(ctx, scratch, &readerv1.ReadRequest{Unit: f.unit(b, 128, allMode(local))})
		if err != nil {
			t.Fatal(err)
		}
		sameResponses(t, "cached plan", got, "planned from scratch", want)
		sameResponses(t, "cached plan", got, "LIG", lig)
		p, err := s.plan(u)
		if err != nil {
			t.Fatal(err)
		}
		if b == 0 {
			sh, compiled = p.shape, p.shape.compiled.Load()
			if compiled == 0 || len(p.nodes) == 0 || p.local == nil {
				t.Fatalf("the unit guarded %d programs, read %d memo nodes: not the plan this test is about", compiled, len(p.nodes))
			}
			continue
		}
		if p.shape != sh || sh.compiled.Load() != compiled {
			t.Errorf("block %d: another plan (%v) or more guard programs compiled (%d, after the first unit %d)",
				b, p.shape != sh, sh.compiled.Load(), compiled)
		}
	}
	// One miss: the first unit; the rest, and s.plan above, hits.
	if st := s.Stats().Plans; st.Misses != 1 || st.Entries != 1 || st.Hits < 2 {
		t.Errorf("plan cache %+v: want one miss and one entry", st)
	}

	// A unit's own fields are checked on a cached plan as on a new one.
	u := f.mixedUnit(1)
	u.Inputs[1].MemoObject = "memo/" + u.Inputs[1].ComponentKey + "/other.arrow"
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); Status(err).Code() != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "inputs[1].memo_object") {
		t.Errorf("memo object of another block on a cached plan: %v", err)
	}
	u = f.mixedUnit(1)
	u.Inputs[0].MemoNodes[0].MemoState = sigv1.BlockState_BLOCK_STATE_UNSPECIFIED
	if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); Status(err).Code() != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "inputs[0].memo_nodes[0].memo_state") {
		t.Errorf("memo node without a state on a cached plan: %v", err)
	}
	// Any field of the input set differing: a plan of its own, checked.
	misses := s.Stats().Plans.Misses
	for name, edit := range map[string]func(u *readerv1.WorkUnit){
		"a MEMO input's DSL": func(u *readerv1.WorkUnit) { u.Inputs[1].CanonicalDsl = f.inputs[4].dsl },
		"an input's name":    func(u *readerv1.WorkUnit) { u.Inputs[1].Name += "x" },
		"the labels":         func(u *readerv1.WorkUnit) { u.LabelColumns = []string{"click"} },
		"a mode":             func(u *readerv1.WorkUnit) { u.Inputs[1].Mode = local },
	} {
		u := f.mixedUnit(1)
		edit(u)
		_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
		if name == "a MEMO input's DSL" {
			if !strings.Contains(fmt.Sprint(err), "inputs[1].canonical_dsl") {
				t.Errorf("%s: %v, want the DSL refused", name, err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if s.Stats().Plans.Misses != misses+1 {
			t.Errorf("%s: served from the cached plan", name)
		}
		misses = s.Stats().Plans.Misses
	}
}

// TestPlanCacheBounded: the cache keeps at most its entries, least
// recently used out first; an input set whose plan was evicted is planned
// again, and a server without a cache plans every unit.
func TestPlanCacheBounded(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 100, Graphs: fleetGraphs(t, "ctr_small")})
	ctx := context.Background()
	s := f.server(t, Config{PlanCacheEntries: 2})
	unit := func(n int) *readerv1.WorkUnit { // input sets: the first n inputs
		u := f.unit(0, 64, nil)
		u.Inputs = u.Inputs[:n]
		return u
	}
	read := func(n int) {
		t.Helper()
		if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit(n)}); err != nil {
			t.Fatal(err)
		}
	}
	misses := func() int64 { return s.Stats().Plans.Misses }
	read(1)
	read(2)
	read(1) // 2 is now the least recent
	read(3)
	if st := s.Stats().Plans; st.Entries != 2 || st.Misses != 3 {
		t.Fatalf("plan cache %+v: want 2 entries, 3 misses", st)
	}
	m := misses()
	read(1)
	if misses() != m {
		t.Error("input set 1, used last but one, was evicted")
	}
	read(2)
	if misses() != m+1 {
		t.Error("input set 2 was kept past the bound")
	}
	none := f.server(t, Config{PlanCacheEntries: -1})
	for range 2 {
		if _, err := collect(ctx, none, &readerv1.ReadRequest{Unit: unit(1)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := none.Stats().Plans; st.Entries != 0 || st.Hits != 0 {
		t.Errorf("no plan cache: %+v", st)
	}
}
