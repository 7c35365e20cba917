package memo_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// TestRunBatchRepacks (issue 28, "reclaim at the next pack"): a batch
// whose tasks list ready columns in older packs of their raw block
// (Task.repack) writes them into its own pack beside the tasks' columns,
// byte for byte the segments they had, and reports each moved with a task
// of that pack (Result.Moved: where it was copied from, its bytes now). A
// listed column of a component the batch computes, of another block's
// pack, or that its pack does not hold, is not copied.
func TestRunBatchRepacks(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 7})
	h := &batchHarness{t: t, w: w, raws: map[string]block.Meta{"v1": w.Blocks[0]}, reg: batchRegistry(),
		done: map[string]workers.Result{}, keys: map[string]canon.Key{}}
	ctx := context.Background()
	r := &memo.Runner{Store: w.Store}
	run := func(tasks ...workers.Task) []workers.Outcome {
		t.Helper()
		out := r.RunBatch(ctx, tasks)
		for i, o := range out {
			if o.Err != nil {
				t.Fatalf("task %d: %v", i, o.Err)
			}
		}
		return out
	}
	_, a := h.task(t, `a v1 hash(unigrams(lower(col("query"))), buckets=1000)`)
	_, b := h.task(t, `b v1 bucketize(col("bid_price"), boundaries=[0.5, 1, 5])`)
	first := run(a, b)
	old := first[0].Result.Object
	ka, kb := a.ID.Component, b.ID.Component
	listed := func(k canon.Key, object string) *sigv1.PackedMember {
		return &sigv1.PackedMember{ComponentKey: k.String(), BlockId: w.Blocks[0].ID, InputVersion: 1, MemoObject: object, MemoColumn: block.MemberColumn(k)}
	}
	// Another block's pack, to be ignored.
	h.raws["other"] = w.Blocks[1]
	_, x := h.task(t, `x other hash(col("ad_category"), buckets=50)`)
	otherPack := run(x)[0].Result.Object

	_, c := h.task(t, `c v1 length(unigrams(lower(col("query"))))`)
	_, d := h.task(t, `d v1 hash(col("device"), buckets=16)`)
	ghost := listed(canon.Key{9}, old) // a column the pack does not hold
	c.Spec.Repack = []*sigv1.PackedMember{listed(ka, old), listed(kb, old), listed(c.ID.Component, old), ghost,
		{ComponentKey: x.ID.Component.String(), BlockId: w.Blocks[1].ID, InputVersion: 1, MemoObject: otherPack, MemoColumn: block.MemberColumn(x.ID.Component)}}
	d.Spec.Repack = []*sigv1.PackedMember{listed(ka, old)}
	second := run(c, d)
	next := second[0].Result.Object
	if next == old || second[1].Result.Object != next {
		t.Fatalf("second batch's packs %s, %s (first %s)", next, second[1].Result.Object, old)
	}
	moved := second[0].Result.Moved
	if len(second[1].Result.Moved) != 0 || len(moved) != 2 {
		t.Fatalf("moved %v and %v, want a's and b's with the first task", moved, second[1].Result.Moved)
	}
	oldMeta, err := block.ReadFooter(ctx, w.Store, old)
	if err != nil {
		t.Fatal(err)
	}
	newMeta, err := block.ReadFooter(ctx, w.Store, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(newMeta.Columns) != 5 { // event_id, c, d, a, b
		t.Fatalf("the new pack holds %d columns, want event_id and four members", len(newMeta.Columns))
	}
	for _, mv := range moved {
		k, _ := canon.ParseKey(mv.ComponentKey)
		if k != ka && k != kb || mv.MemoObject != old {
			t.Fatalf("moved %+v", mv)
		}
		oc, _ := oldMeta.Column(mv.MemoColumn)
		nc, err := block.CheckMember(newMeta, mv.MemoColumn, k, blockref.NewMemo(mv.BlockId, mv.InputVersion), oc.Type, w.Blocks[0].Rows)
		if err != nil {
			t.Fatalf("moved column %s in the new pack: %v", k.Short(), err)
		}
		if mv.Bytes != nc.Length || nc.Stored != oc.Stored {
			t.Errorf("moved %s: %d bytes reported, %d in the pack; stored %q, was %q", k.Short(), mv.Bytes, nc.Length, nc.Stored, oc.Stored)
		}
		was, err := block.FetchSegments(ctx, w.Store, oldMeta, []string{mv.MemoColumn})
		if err != nil {
			t.Fatal(err)
		}
		now, err := block.FetchSegments(ctx, w.Store, newMeta, []string{mv.MemoColumn, transform.ColEventID})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(was[0], now[0]) {
			t.Errorf("moved %s: its segment differs from the one it was copied from", k.Short())
		}
	}
}
