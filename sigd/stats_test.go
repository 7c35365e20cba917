package sigd_test

import (
	"context"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/workers"
)

// gatedRunner holds every memoization run until open is closed.
type gatedRunner struct {
	inner workers.Runner
	open  chan struct{}
}

func (g *gatedRunner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return workers.Result{}, ctx.Err()
	}
	return g.inner.Run(ctx, t)
}

// TestStatsSeeBlocksReadyAtOnce: Stats' reuse figures (memo blocks, their
// pipelines) count a memo block from the moment it is ready, not up to two
// seconds later. sigd caches the reuse scan between changes; a block
// becoming ready is a change, as a submit is. Before, a Stats taken while
// the blocks were pending was answered again after they were ready (the
// fleet run's final reuse check failed now and then: 186 ready blocks
// against the Ledger's 190).
func TestStatsSeeBlocksReadyAtOnce(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 4})
	gate := &gatedRunner{open: make(chan struct{})}
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{
		WrapRunner: func(r workers.Runner) workers.Runner { gate.inner = r; return gate }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dsl := sigdtest.DSL(t, "ctr_small")
	c := srv.SIG(t, "ctr")
	resp, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 10, dsl, w.All()))
	if err != nil {
		t.Fatal(err)
	}
	op := srv.SIG(t, "operator")
	st, err := op.Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoBlocks != 0 {
		t.Fatalf("%d memo blocks ready before any run", st.MemoBlocks)
	}
	close(gate.open)
	sigdtest.WaitComplete(ctx, t, c, "ctr", "p")
	st, err = op.Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(resp.BlockMisses)
	if st.MemoBlocks != want || st.PipelinesPerBlockMean != 1 || len(st.MemoBlocksByPipelines) != 2 || st.MemoBlocksByPipelines[1] != want {
		t.Errorf("Stats once every block is ready: %d memo blocks, reuse mean %v, histogram %v; want %d blocks each used by 1 pipeline",
			st.MemoBlocks, st.PipelinesPerBlockMean, st.MemoBlocksByPipelines, want)
	}
}
