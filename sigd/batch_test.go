package sigd_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// batchGraph is six components of the Ads schema sharing the lowercased
// query and title and their tokens, as the fleet's components share them.
const batchGraph = `let q = lower(col("query"))
let t = lower(col("ad_title"))
input q_uni = hash(unigrams(q), buckets=1000003)
input q_bi = hash(truncate(ngrams(q, n=2), max=32), buckets=1000003)
input t_uni = hash(unigrams(t), buckets=1000003)
input t_bi = hash(truncate(ngrams(t), max=32), buckets=1000003)
input overlap = length(intersect(unigrams(q), unigrams(t)))
input overlap_cat = concat(intersect(unigrams(t), unigrams(q)), col("ad_category"))
`

// TestBlockBatchOnePack (issue 28, block-batched tasks): a worker started
// once the pipeline's tasks are queued (over the lease protocol, as `sigd
// worker`) leases a block's six tasks as one batch and runs them through
// memo.Runner.RunBatch, which writes one pack of the block; sigd completes
// each task on its own, each completion naming that pack (CompleteTask's
// memo_object: each checks that the pack exists and switches its entry
// alone). Every entry of a block
// ends ready naming the block's one pack, each its own column; the bucket
// holds one pack per block and nothing else under memo/; every column
// equals LIG's, and a reader serving the pipeline's units from the packs
// returns the bytes it returns computing every input from raw columns.
func TestBlockBatchOnePack(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 600, Seed: 28})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	keys := componentKeys(t, batchGraph)
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, batchGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	if q := srv.Queue().Stats(); q.Queued != len(keys)*len(w.Blocks) {
		t.Fatalf("queue after the submission: %+v, want the %d tasks of each block", q, len(keys))
	}
	pool := workers.NewPool(workers.NewRemoteLeaser(srv.Workers(t, "worker"), time.Second, "test"),
		&memo.Runner{Store: w.Store}, workers.PoolOptions{Name: "w", BatchTasks: 32})
	pool.Resize(1)
	defer pool.Close(context.Background())
	sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, batchGraph, map[string]*sigdtest.LIGOutput{})
	for _, b := range w.Blocks {
		pack, columns := "", map[string]bool{}
		for input, k := range keys {
			m := memoOf(t, srv, k, b.ID)
			if !m.Packed() || m.Column != block.MemberColumn(k) {
				t.Fatalf("input %s block %s: entry %+v, want a pack's column named by the component", input, b.ID, m)
			}
			if pack == "" {
				pack = m.Object
			}
			if m.Object != pack {
				t.Errorf("block %s: input %s names pack %s, another input %s: want the block's tasks in one pack", b.ID, input, m.Object, pack)
			}
			columns[m.Column] = true
		}
		if len(columns) != len(keys) {
			t.Errorf("block %s: %d distinct columns for %d entries", b.ID, len(columns), len(keys))
		}
	}
	objects := 0
	for _, err := range w.Store.List(ctx, block.MemoPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		objects++
	}
	if objects != len(w.Blocks) {
		t.Errorf("%d memo objects in the bucket, want one pack per block (%d)", objects, len(w.Blocks))
	}
	rs, err := reader.NewServer(reader.Config{Store: srv.Store()})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 256})
	if err != nil {
		t.Fatal(err)
	}
	lig, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 256,
		Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range sig {
		a, b := serveBytes(ctx, t, rs, sig[i]), serveBytes(ctx, t, rs, lig[i])
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Fatalf("unit %s: %d bytes from the pack, %d computed from raw, not identical", sig[i].GetUnitId(), len(a), len(b))
		}
	}
}
