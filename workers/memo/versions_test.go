package memo_test

import (
	"context"
	"encoding/json"
	"strings"
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

// TestRunnerBlockVersions (issue 21): a task's block is a memo block ref.
// Over version 3 of a block whose advertiser_id changed at version 2 (and
// click at 3), the task "<id>.v2" of a component reading advertiser_id
// reads the version 3 object (from its footer, as `sigd worker` does) and
// writes a memo object whose footer names the block and input version 2; a
// task whose ref is not the raw version's input version for its columns
// fails naming both, writing nothing.
func TestRunnerBlockVersions(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 200})
	ctx := context.Background()
	schemaJSON, _ := json.Marshal(transform.AdsSchema())
	base := w.Blocks[0]
	_, rec, err := block.ReadBlock(ctx, w.Store, base.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	v3 := base.Clone()
	v3.Key, v3.Version, v3.ColumnVersions = block.RawKey("ads", blockref.New(base.ID, 3)), 3, map[string]int64{"advertiser_id": 2, "click": 3}
	v3.Changes = []block.Change{{Version: 2, Topic: "raw.ads", First: 1 << 20, Last: 1 << 20, UpdatedRows: 1, Columns: []string{"advertiser_id"}},
		{Version: 3, Topic: "raw.ads", First: 1<<20 + 1, Last: 1<<20 + 1, UpdatedRows: 1, Columns: []string{"click"}}}
	if _, err := block.Write(ctx, w.Store, v3, rec); err != nil {
		t.Fatal(err)
	}
	r := &memo.Runner{Store: w.Store}
	task := func(ref string) workers.Task {
		return workers.Task{ID: workers.TaskID{Component: canon.Key{'c'}, Block: blockref.ParseMemo(ref)}, Spec: &sigv1.Task{
			ComponentKey: testKey.String(), BlockId: ref, RawSource: "ads", RawObject: v3.Key, MemoObject: "memo/test/" + ref + ".arrow",
			CanonicalDsl: `input out = hash(col("advertiser_id"), buckets=100)`, Columns: []string{"advertiser_id"},
			SchemaJson: string(schemaJSON), MemoGeneration: 1,
		}}
	}
	ref := blockref.New(base.ID, 2).String()
	res, err := r.Run(ctx, task(ref))
	if err != nil {
		t.Fatal(err)
	}
	// A pack of raw version 3 (what it was computed from), its member at
	// input version 2.
	meta, _ := packed(t, w.Store, res, testKey, blockref.ParseMemo(ref))
	if c, _ := meta.Column(block.MemberColumn(testKey)); meta.Ref() != v3.Ref() || meta.Member(c) != blockref.ParseMemo(ref) || meta.Rows != 200 {
		t.Fatalf("pack footer %+v; want block %s version 3, its member at input version 2", meta, base.ID)
	}
	before := packs(t, w.Store)
	for _, bad := range []string{base.ID, blockref.New(base.ID, 3).String()} {
		_, err := r.Run(ctx, task(bad))
		if err == nil || !strings.Contains(err.Error(), "input version for [advertiser_id] is 2") {
			t.Fatalf("task %s over version 3: %v; want an error naming input version 2", bad, err)
		}
		if packs(t, w.Store) != before {
			t.Fatalf("task %s wrote a memo object", bad)
		}
	}
}
