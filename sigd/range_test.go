package sigd_test

import (
	"context"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
)

// TestWidestRangeReadsEveryBlock: a pipeline submitted for every event
// time SIG stores, [transform.MinEventTime, transform.EndEventTime), gets
// every raw block, pending until memoized and then complete. Before the
// catalog's walk was clamped, a range ending in the year 10000 got no block
// and a solution marked complete at once (TestBadRequests shows ranges
// beyond these bounds refused).
func TestWidestRangeReadsEveryBlock(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 3, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 2}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	widest := &sigv1.EventRange{StartMicros: transform.MinEventTime, EndMicros: transform.EndEventTime}
	res, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "all", 5, hashGraph(17), widest))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.GetSolution().GetRawBlocks()); n != 3 || res.GetSolution().GetComplete() {
		t.Fatalf("submitted for all event time: %d raw blocks, complete %v; want 3, not complete yet", n, res.GetSolution().GetComplete())
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "all")
	if n := len(sol.GetRawBlocks()); n != 3 {
		t.Fatalf("complete solution: %d raw blocks, want 3", n)
	}
}
