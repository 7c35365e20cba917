package sigd_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
)

// Two models sharing a nested subexpression (the query's tokens), each
// truncating them its own way, and a cheap bucketized price.
const (
	coverGraphA = `
input q3 = truncate(unigrams(lower(col("query"))), max=3)
input price = bucketize(col("bid_price"), boundaries=[1, 2])
`
	coverGraphB = `
input q5 = truncate(unigrams(lower(col("query"))), max=5)
`
)

// TestCoversEndToEnd runs issue 20 through sigd under --insertion=cost with
// real workers and readers: two models sharing a nested subexpression, one
// re-submitted as fleets do, compute it once per block — the only memo
// objects written are one memo node's, one per block — the cheap input is
// computed by readers with the policy's reason in the solution, workers'
// op costs reach the cache, and every unit read over the covers is byte
// for byte the unit computed from raw (LIG).
func TestCoversEndToEnd(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 5000, Seed: 11})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1, Insertion: sigd.InsertionCost}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	for _, s := range []struct{ pipeline, graph string }{{"a", coverGraphA}, {"b", coverGraphB}, {"a", coverGraphA}} {
		if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", s.pipeline, 500, s.graph, w.All())); err != nil {
			t.Fatal(err)
		}
	}
	solA := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "a")
	solB := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "b")

	var shared string
	for _, in := range append(solA.GetInputs(), solB.GetInputs()...) {
		if !in.GetComputed() || in.GetReason() == "" {
			t.Fatalf("input %s: computed %v, reason %q", in.GetInput(), in.GetComputed(), in.GetReason())
		}
		switch in.GetInput() {
		case "price":
			if len(in.GetMemoNodes()) != 0 || !strings.HasPrefix(in.GetReason(), "readers compute it from raw columns") {
				t.Fatalf("price: %d memo nodes, reason %q", len(in.GetMemoNodes()), in.GetReason())
			}
		default:
			if len(in.GetMemoNodes()) != 1 || (shared != "" && in.GetMemoNodes()[0].GetKey() != shared) {
				t.Fatalf("%s: memo nodes %v, want the one node both share", in.GetInput(), in.GetMemoNodes())
			}
			shared = in.GetMemoNodes()[0].GetKey()
			if !strings.Contains(in.GetResidualDsl(), `memo("`+shared[:12]+`")`) {
				t.Fatalf("%s: residual %q", in.GetInput(), in.GetResidualDsl())
			}
		}
	}
	// One task per block: the memo objects are packs of the shared node's
	// column, one per block (issue 28), and nothing else.
	var blocks []string
	for info, err := range srv.Store().List(ctx, "memo/") {
		if err != nil {
			t.Fatal(err)
		}
		meta, err := block.ReadFooter(ctx, srv.Store(), info.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !meta.Pack || len(meta.Columns) != 2 || meta.Columns[1].Name != shared {
			t.Fatalf("memo object %s holds %v, want a pack of the shared node's column", info.Key, meta.Columns)
		}
		blocks = append(blocks, meta.ID)
	}
	want := []string{w.Blocks[0].ID, w.Blocks[1].ID}
	slices.Sort(want)
	slices.Sort(blocks)
	if !slices.Equal(blocks, want) {
		t.Fatalf("memo objects of blocks %v, want the shared node's per block %v", blocks, want)
	}
	// The workers' measurements are kept for the policy.
	k, _ := canon.ParseKey(shared)
	st, err := srv.Frontend().Cache().CostStats(k)
	if err != nil || len(st.Ops) == 0 || st.Ops["lower"].NsPerRow() <= 0 || st.Nodes[k].BytesPerRow() <= 0 {
		t.Fatalf("statistics %+v, %v", st, err)
	}
	// Units over the covers read what local input generation computes.
	rs, err := reader.NewServer(reader.Config{Store: srv.Store()})
	if err != nil {
		t.Fatal(err)
	}
	for _, sol := range []*sigv1.ReadSolution{solA, solB} {
		sig, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		lig, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 1000,
			Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
				return readerv1.InputMode_INPUT_MODE_LOCAL
			}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range sig {
			nodes := 0
			for _, in := range sig[i].GetInputs() {
				nodes += len(in.GetMemoNodes())
			}
			if nodes == 0 && sol == solB {
				t.Fatalf("unit %s reads no memo node", sig[i].GetUnitId())
			}
			a, b := serveBytes(ctx, t, rs, sig[i]), serveBytes(ctx, t, rs, lig[i])
			if !bytes.Equal(a, b) || len(a) == 0 {
				t.Fatalf("unit %s: %d bytes over the cover, %d computed from raw, not identical", sig[i].GetUnitId(), len(a), len(b))
			}
		}
	}
	if st := rs.Stats(); st.MemoNodes == 0 {
		t.Fatalf("reader stats %+v: no memo node read", st)
	}
}

// serveBytes serves one unit in process and returns its responses' bytes.
func serveBytes(ctx context.Context, t *testing.T, s *reader.Server, u *readerv1.WorkUnit) []byte {
	t.Helper()
	var out []byte
	if err := s.Serve(ctx, &readerv1.ReadRequest{Unit: u}, func(r *readerv1.ReadResponse) error {
		out = append(out, r.GetArrowIpc()...)
		return nil
	}); err != nil {
		t.Fatalf("unit %s: %v", u.GetUnitId(), err)
	}
	return out
}
