package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
)

// The demo's covers step (issue 20): two models sharing a nested
// subexpression, the query's tokens, each truncating them its own way, and
// a cheap clipped price (no model of the fleet memoized it), under sigd's
// cost-aware insertion policy.
const (
	demoCoverA = `input q3 = truncate(unigrams(lower(col("query"))), max=3)
input price = clip(col("bid_price"), lo=0, hi=50)
`
	demoCoverB = `input q5 = truncate(unigrams(lower(col("query"))), max=5)
`
)

// demoCovers submits the two models (the first again after the second
// arrived, as a fleet re-submits each epoch), waits for their solutions,
// prints each input's cover and the policy's reason, counts the memo
// objects written for them, and reads one unit over the covers and from
// raw columns, which must be identical.
func demoCovers(ctx context.Context, env *demoEnv, op sigv1.SIGClient, from, to int64, w io.Writer) error {
	ctr, err := env.client("ctr")
	if err != nil {
		return err
	}
	cvr, err := env.client("cvr")
	if err != nil {
		return err
	}
	pipes := []demoPipe{{client: "ctr", name: "subgraph-a", sc: ctr}, {client: "cvr", name: "subgraph-b", sc: cvr}}
	for _, s := range []struct {
		p   demoPipe
		dsl string
	}{{pipes[0], demoCoverA}, {pipes[1], demoCoverB}, {pipes[0], demoCoverA}} {
		if _, err := s.p.sc.SubmitGraph(ctx, &sigv1.SubmitGraphRequest{Client: s.p.client, Pipeline: s.p.name, Priority: 40,
			Range: &sigv1.EventRange{StartMicros: from, EndMicros: to},
			Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: s.dsl}}}); err != nil {
			return fmt.Errorf("submit %s: %w", s.p.name, err)
		}
	}
	if err := waitComplete(ctx, op, pipes, w); err != nil {
		return err
	}
	memoNodes := map[canon.Key]bool{}
	rawBlocks := 0
	var units []*readerv1.WorkUnit
	var lig []*readerv1.WorkUnit
	for _, p := range pipes {
		sol, err := p.sc.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: p.client, Pipeline: p.name})
		if err != nil {
			return err
		}
		for _, in := range sol.GetInputs() {
			fmt.Fprintf(w, "%s/%s input %s:\n", p.client, p.name, in.GetInput())
			switch {
			case !in.GetComputed():
				fmt.Fprintf(w, "  memoized whole (component %s)\n", in.GetComponentKey()[:12])
			case len(in.GetMemoNodes()) == 0:
				fmt.Fprintf(w, "  computed by readers from raw columns: %s\n", strings.TrimPrefix(in.GetCanonicalDsl(), "input out = "))
			default:
				fmt.Fprintf(w, "  readers compute %s\n", in.GetResidualDsl())
				for _, n := range in.GetMemoNodes() {
					k, err := canon.ParseKey(n.GetKey())
					if err != nil {
						return fmt.Errorf("memo node key: %w", err)
					}
					fmt.Fprintf(w, "  over memo node %s = %s\n", k.Short(), strings.TrimPrefix(n.GetCanonicalDsl(), "input out = "))
					memoNodes[k] = true
				}
			}
			fmt.Fprintf(w, "  why: %s\n", in.GetReason())
		}
		us, err := reader.UnitsFromSolution(sol, reader.UnitOptions{})
		if err != nil {
			return err
		}
		ls, err := reader.UnitsFromSolution(sol, reader.UnitOptions{Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}})
		if err != nil {
			return err
		}
		units, lig = append(units, us[0]), append(lig, ls[0])
		rawBlocks = len(sol.GetRawBlocks())
	}
	store := env.srv.Store()
	blocks := rawBlocks
	for k := range memoNodes {
		// Its ready memo blocks, each a column of a pack (issue 28).
		ms, err := env.srv.Frontend().Cache().Memos(k)
		if err != nil {
			return err
		}
		n := 0
		for _, m := range ms {
			if m.State == matching.MemoReady {
				n++
			}
		}
		fmt.Fprintf(w, "memo node %s: %d memo blocks for the %d raw blocks of the range: computed once per block for both models\n", k.Short(), n, blocks)
	}
	rs, err := reader.NewServer(reader.Config{Store: store})
	if err != nil {
		return err
	}
	for i := range units {
		a, err := serveUnit(ctx, rs, units[i])
		if err != nil {
			return err
		}
		b, err := serveUnit(ctx, rs, lig[i])
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("unit %s: the cover's batches differ from local input generation's", units[i].GetUnitId())
		}
		fmt.Fprintf(w, "unit %s: %d bytes of batches over the cover, identical to computing every input from raw columns\n", units[i].GetUnitId(), len(a))
	}
	return nil
}

// serveUnit reads one unit through an in-process reader.
func serveUnit(ctx context.Context, rs *reader.Server, u *readerv1.WorkUnit) ([]byte, error) {
	var out []byte
	err := rs.Serve(ctx, &readerv1.ReadRequest{Unit: u}, func(r *readerv1.ReadResponse) error {
		out = append(out, r.GetArrowIpc()...)
		return nil
	})
	return out, err
}
