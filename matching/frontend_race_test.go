package matching

import (
	"testing"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// pausingSched runs hook (once) at the first Enqueue, in the middle of a
// resolve: between creating the entry of one block and the next.
type pausingSched struct {
	fakeSched
	hook func()
}

func (p *pausingSched) Enqueue(k canon.Key, block blockref.Memo, client, pipeline string, prio int32) error {
	if h := p.hook; h != nil {
		p.hook = nil
		h()
	}
	return p.fakeSched.Enqueue(k, block, client, pipeline, prio)
}

// TestConcurrentResolveKeepsOtherRequestsEntries: two pipelines resolve the
// same component at once. The first has read the component's entries (all
// missing) and is creating them block by block when the second creates the
// entry of a later block, a worker computes it and marks it ready. The
// first must then keep that entry, not overwrite it with a pending one of
// its own generation: overwriting would recompute a ready block (and make
// the worker's MarkReady of an entry it was described fail as stale).
func TestConcurrentResolveKeepsOtherRequestsEntries(t *testing.T) {
	f, _, _ := newTestFrontend(t, 2)
	sched := &pausingSched{}
	f.cfg.Scheduler = sched
	const graph = `input qid = hash(unigrams(lower(col("query"))), buckets=1000)`
	var k canon.Key
	sched.hook = func() {
		// The first submit has created b000's entry and is enqueueing it;
		// b001's entry is not created yet. A second pipeline resolves now.
		r, err := f.Submit(SubmitRequest{Client: "c2", Pipeline: "p2", Priority: 1, Graph: mustParse(t, graph), From: 0, To: 200})
		if err != nil {
			t.Fatal(err)
		}
		k = r.Solution.Inputs[0].Component
		e, err := f.cfg.Cache.Memo(k, blockref.ParseMemo("b001"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.MarkReady(k, blockref.ParseMemo("b001"), e.Gen, 100, 1000); err != nil {
			t.Fatalf("mark b001 ready: %v", err)
		}
	}
	r, err := f.Submit(SubmitRequest{Client: "c1", Pipeline: "p1", Priority: 1, Graph: mustParse(t, graph), From: 0, To: 200})
	if err != nil {
		t.Fatal(err)
	}
	if sched.hook != nil {
		t.Fatal("the submit enqueued nothing")
	}
	e, err := f.cfg.Cache.Memo(k, blockref.ParseMemo("b001"))
	if err != nil {
		t.Fatal(err)
	}
	if e.State != MemoReady {
		t.Errorf("b001 is %s after the first submit finished, want ready (another request's entry was overwritten)", e.State)
	}
	if st := r.Solution.Inputs[0].Blocks[1].State; st != MemoReady {
		t.Errorf("the first submit's solution shows b001 %s, want ready", st)
	}
}
