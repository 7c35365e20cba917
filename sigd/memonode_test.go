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
)

// Issue 27, item 1: a bare column memoized as a pipeline's whole
// component, then another pipeline's component over the same column; and
// the other node kinds a task may find memoized inside its cone, a node
// constant folding made (truncate of a truncate is one truncate) and a
// node with two users.
const (
	bareColumnGraph = "input dev = col(\"device\")\n"
	overColumnGraph = "input ok = hash(col(\"device\"), buckets=16)\n"
	nodesGraph      = `
input tok3 = truncate(truncate(unigrams(lower(col("query"))), max=8), max=3)
input low = lower(col("ad_title"))
`
	overNodesGraph = `
input h = hash(truncate(truncate(unigrams(lower(col("query"))), max=8), max=3), buckets=16)
input twice = concat(unigrams(lower(col("ad_title"))), ngrams(lower(col("ad_title")), n=2))
`
)

// TestComponentOverMemoizedColumn is issue 27's item 1 against real
// workers, in process and a `sigd worker` process: once `input dev =
// col("device")` is memoized, `input ok = hash(col("device"), buckets=16)`
// is memoized too, its objects equal to LIG's and read MEMO byte for byte
// as a LOCAL read computes them. Before (the code the issue was filed
// against) every one of its tasks failed three times with `record has no
// column "device"` and its entries were quarantined. Then the same for
// components over a node constant folding made and a node with two users,
// memoized first as components of their own: their tasks compute over them
// (no worker lowercases again) and their objects are LIG's too.
func TestComponentOverMemoizedColumn(t *testing.T) {
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "in-process", true: "sigd worker"}[remote]
		t.Run(name, func(t *testing.T) {
			w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 2000, Seed: 27})
			cfg := sigd.Config{WorkersMin: 1, WorkersMax: 1}
			if remote {
				cfg = sigd.Config{RemoteWorkers: true, Lease: 30 * time.Second}
			}
			srv := sigdtest.Start(t, w, cfg, sigd.Options{})
			if remote {
				bin := sigdtest.BuildCommand(t, "cmd/sigd")
				sigdtest.StartProcess(t, bin, append([]string{"worker", "--sigd", srv.Addr(), "--token", srv.Tokens["worker"],
					"--concurrency", "1", "--name", "w1"}, w.S3Args()...))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ctr := srv.SIG(t, "ctr")
			submit := func(pipeline, dsl string) {
				t.Helper()
				if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", pipeline, 1, dsl, w.All())); err != nil {
					t.Fatal(err)
				}
			}
			rs, err := reader.NewServer(reader.Config{Store: srv.Store()})
			if err != nil {
				t.Fatal(err)
			}

			// The reproduction, as the issue gives it.
			submit("dev", bareColumnGraph)
			sigdtest.WaitComplete(ctx, t, ctr, "ctr", "dev")
			submit("ok", overColumnGraph)
			checkMemoized(ctx, t, srv, rs, waitSettled(ctx, t, ctr, "ctr", "ok"), w, overColumnGraph)

			// The other node kinds.
			submit("nodes", nodesGraph)
			sigdtest.WaitComplete(ctx, t, ctr, "ctr", "nodes")
			waitFor(t, 30*time.Second, "the tasks to leave the queue", func() bool {
				st := srv.Queue().Stats()
				return st.Queued == 0 && st.Leased == 0
			})
			lowered := opRows(t, srv, "lower")
			submit("over", overNodesGraph)
			checkMemoized(ctx, t, srv, rs, waitSettled(ctx, t, ctr, "ctr", "over"), w, overNodesGraph)
			// A task's measurements are kept before it leaves the queue.
			waitFor(t, 30*time.Second, "the tasks to leave the queue", func() bool {
				st := srv.Queue().Stats()
				return st.Queued == 0 && st.Leased == 0
			})
			if got := opRows(t, srv, "lower"); got != lowered {
				t.Errorf("workers lowercased %d more rows: the tasks over the memoized nodes did not read them", got-lowered)
			}
		})
	}
}

// checkMemoized fails unless every block of a settled read solution is
// ready (naming the reason of each failed one), each memo object equals
// LIG's over its raw block, and every unit read MEMO is byte for byte the
// unit read LOCAL.
func checkMemoized(ctx context.Context, t *testing.T, srv *sigdtest.Server, rs *reader.Server, sol *sigv1.ReadSolution, w *sigdtest.Warehouse, dsl string) {
	t.Helper()
	if sol.GetBlocksFailed() != 0 || !sol.GetComplete() {
		for _, in := range sol.GetInputs() {
			for _, b := range in.GetBlocks() {
				if b.GetState() == sigv1.BlockState_BLOCK_STATE_FAILED {
					t.Errorf("%s: input %s block %s failed: %s", sol.GetPipeline(), in.GetInput(), b.GetBlockId(), b.GetReason())
				}
			}
		}
		t.Fatalf("%s: %d blocks failed, %d ready: the components were not memoized", sol.GetPipeline(), sol.GetBlocksFailed(), sol.GetBlocksReady())
	}
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
	memo, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 500})
	if err != nil {
		t.Fatal(err)
	}
	local, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 500,
		Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range memo {
		a, b := serveBytes(ctx, t, rs, memo[i]), serveBytes(ctx, t, rs, local[i])
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Fatalf("%s: unit %s: %d bytes read MEMO, %d LOCAL, not identical", sol.GetPipeline(), memo[i].GetUnitId(), len(a), len(b))
		}
	}
}

// opRows is how many rows the workers' measurements of an op class count.
func opRows(t *testing.T, srv *sigdtest.Server, class string) int64 {
	t.Helper()
	st, err := srv.Frontend().Cache().CostStats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Ops[class].Rows
}

// waitSettled polls a pipeline's read solution until no block is pending
// (each is ready or failed) and returns it; WaitComplete would wait for
// failed blocks for ever.
func waitSettled(ctx context.Context, t *testing.T, c sigv1.SIGClient, client, pipeline string) *sigv1.ReadSolution {
	t.Helper()
	for {
		sol, err := c.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: client, Pipeline: pipeline})
		if err != nil {
			t.Fatalf("read solution %s/%s: %v", client, pipeline, err)
		}
		if sol.GetBlocksPending() == 0 {
			return sol
		}
		select {
		case <-ctx.Done():
			t.Fatalf("read solution %s/%s: %d blocks still pending: %v", client, pipeline, sol.GetBlocksPending(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
