package eviction_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
)

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want %s", what, err, code)
	}
}

func keyStrings(ks ...canon.Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	sort.Strings(out)
	return out
}

// TestEvictSubgraphGRPC drives subgraph eviction over the gRPC API: only
// operators may evict or read the audit log, a reason is required, a dry
// run lists the impact and changes nothing, a confirmed eviction removes
// exactly the memo entries and objects of the components containing the
// subgraph, records an audit entry, turns the affected read solutions
// pending, and the next reads recompute the data.
func TestEvictSubgraphGRPC(t *testing.T) {
	e := newEnv(t, evictiontest.Config{})
	e.Pipelines()
	ctrSol, cvrSol, expSol := e.Solution("ctr", "ctr-small"), e.Solution("cvr", evictiontest.XSSPipeline), e.Solution("explore", "explore")
	qa, qids, price := sigdtest.InputKey(t, ctrSol, "qa_overlap"), sigdtest.InputKey(t, ctrSol, "query_ids"), sigdtest.InputKey(t, ctrSol, "price_bin")
	qsmall, logp := sigdtest.InputKey(t, cvrSol, "q_small"), sigdtest.InputKey(t, cvrSol, "log_price")
	adv := sigdtest.InputKey(t, expSol, "adv")
	affected := []canon.Key{qa, qids, qsmall}
	untouched := []canon.Key{price, logp, adv}
	op := e.SIG(evictiontest.Operator)
	req := &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: evictiontest.FaultySubgraph}, Reason: "tokenizer bug"}

	// Who may evict.
	for _, p := range []string{"ctr", "worker"} {
		_, err := e.SIG(p).Evict(e.Ctx, req)
		wantCode(t, p+" evicts", err, codes.PermissionDenied)
		_, err = e.SIG(p).Evict(e.Ctx, &sigv1.EvictRequest{Target: req.Target, DryRun: true})
		wantCode(t, p+" dry-runs", err, codes.PermissionDenied)
		_, err = e.SIG(p).ListAudit(e.Ctx, &sigv1.ListAuditRequest{})
		wantCode(t, p+" lists the audit log", err, codes.PermissionDenied)
	}
	_, err := e.SIG("").Evict(e.Ctx, req)
	wantCode(t, "evict without a token", err, codes.Unauthenticated)

	// Bad requests.
	for name, r := range map[string]*sigv1.EvictRequest{
		"no reason":          {Target: req.Target},
		"blank reason":       {Target: req.Target, Reason: " \t\n"},
		"long reason":        {Target: req.Target, Reason: strings.Repeat("x", 4097)},
		"no target":          {Reason: "r"},
		"bad DSL":            {Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: `unigrams(lower(col("nope")))`}, Reason: "r"},
		"bad node key":       {Target: &sigv1.EvictRequest_NodeKey{NodeKey: "zz"}, Reason: "r"},
		"unknown source":     {Target: req.Target, RawSource: "nope", Reason: "r"},
		"dry run, no DSL":    {Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: "lower("}, DryRun: true},
		"oversized subgraph": {Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: strings.Repeat(" ", 2<<20)}, Reason: "r"},
	} {
		_, err := op.Evict(e.Ctx, r)
		wantCode(t, name, err, codes.InvalidArgument)
	}

	// A dry run lists the impact and changes nothing.
	dry, err := op.Evict(e.Ctx, &sigv1.EvictRequest{Target: req.Target, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(slices.Values(dry.Components)), keyStrings(affected...); !slices.Equal(got, want) {
		t.Errorf("dry run components %v, want %v", got, want)
	}
	if want := []string{"ctr/ctr-small", "cvr/" + evictiontest.XSSPipeline}; !slices.Equal(dry.Pipelines, want) {
		t.Errorf("dry run pipelines %q, want %q", dry.Pipelines, want)
	}
	if !dry.DryRun || dry.Blocks != uint32(3*len(e.Blocks)) || dry.Bytes <= 0 || dry.ObjectsDeleted != 0 || dry.AuditId != "" {
		t.Errorf("dry run: %v", dry)
	}
	for _, k := range append(affected, untouched...) {
		e.CheckMemoized(k)
	}
	if a, err := op.ListAudit(e.Ctx, &sigv1.ListAuditRequest{}); err != nil || len(a.Entries) != 0 {
		t.Errorf("audit after a dry run: %v, %v", a, err)
	}
	if !e.Solution("ctr", "ctr-small").Complete || !e.Solution("cvr", evictiontest.XSSPipeline).Complete {
		t.Error("a dry run made a solution incomplete")
	}

	// The eviction: it deletes the objects only the affected components
	// hold (a pack of a block's columns, issue 28, stays while an
	// untouched component's entry names it).
	doomed := e.ObjectsOnlyOf(affected...)
	done, err := op.Evict(e.Ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if done.DryRun || done.Blocks != dry.Blocks || done.Bytes != dry.Bytes || done.ObjectsDeleted != uint32(len(doomed)) || done.AuditId == "" {
		t.Errorf("eviction: %v (dry run said %v)", done, dry)
	}
	for _, k := range affected {
		e.CheckEvicted(k)
	}
	for _, k := range untouched {
		e.CheckMemoized(k)
	}
	a, err := op.ListAudit(e.Ctx, &sigv1.ListAuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Entries) != 1 {
		t.Fatalf("audit: %v", a)
	}
	ae := a.Entries[0]
	if ae.Id != done.AuditId || ae.Who != evictiontest.Operator || ae.Why != "tokenizer bug" || !strings.Contains(ae.What, evictiontest.FaultySubgraph) ||
		!slices.Equal(slices.Sorted(slices.Values(ae.Components)), keyStrings(affected...)) || ae.Blocks != done.Blocks || ae.When == nil {
		t.Errorf("audit entry %v", ae)
	}

	// The affected read solutions are pending, the others untouched; reading
	// them schedules the recomputation.
	ctrSol = e.Solution("ctr", "ctr-small")
	if ctrSol.Complete || evictiontest.PendingBlocks(ctrSol, qa, qids) != 2*len(e.Blocks) || evictiontest.PendingBlocks(ctrSol, price) != 0 {
		t.Errorf("ctr solution after eviction: complete=%v, %d pending", ctrSol.Complete, ctrSol.BlocksPending)
	}
	if sol := e.Solution("cvr", evictiontest.XSSPipeline); sol.Complete || evictiontest.PendingBlocks(sol, qsmall) != len(e.Blocks) {
		t.Errorf("cvr solution after eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	if !e.Solution("explore", "explore").Complete {
		t.Error("explore's solution is incomplete; it does not use the subgraph")
	}
	e.WaitComplete("ctr", "ctr-small")
	e.WaitComplete("cvr", evictiontest.XSSPipeline)
	for _, k := range append(affected, untouched...) {
		e.CheckMemoized(k)
	}
}
