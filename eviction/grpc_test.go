package eviction_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/matching/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
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
	e := newEnv(t, envConfig{})
	e.pipelines()
	ctrSol, cvrSol, expSol := e.solution("ctr", "ctr-small"), e.solution("cvr", xssPipeline), e.solution("explore", "explore")
	qa, qids, price := inputKey(t, ctrSol, "qa_overlap"), inputKey(t, ctrSol, "query_ids"), inputKey(t, ctrSol, "price_bin")
	qsmall, logp := inputKey(t, cvrSol, "q_small"), inputKey(t, cvrSol, "log_price")
	adv := inputKey(t, expSol, "adv")
	affected := []canon.Key{qa, qids, qsmall}
	untouched := []canon.Key{price, logp, adv}
	op := e.sig(operator)
	req := &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: faultySubgraph}, Reason: "tokenizer bug"}

	// Who may evict.
	for _, p := range []string{"ctr", "worker-pool"} {
		_, err := e.sig(p).Evict(e.ctx, req)
		wantCode(t, p+" evicts", err, codes.PermissionDenied)
		_, err = e.sig(p).Evict(e.ctx, &sigv1.EvictRequest{Target: req.Target, DryRun: true})
		wantCode(t, p+" dry-runs", err, codes.PermissionDenied)
		_, err = e.sig(p).ListAudit(e.ctx, &sigv1.ListAuditRequest{})
		wantCode(t, p+" lists the audit log", err, codes.PermissionDenied)
	}
	_, err := e.sig("").Evict(e.ctx, req)
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
		_, err := op.Evict(e.ctx, r)
		wantCode(t, name, err, codes.InvalidArgument)
	}

	// A dry run lists the impact and changes nothing.
	dry, err := op.Evict(e.ctx, &sigv1.EvictRequest{Target: req.Target, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(slices.Values(dry.Components)), keyStrings(affected...); !slices.Equal(got, want) {
		t.Errorf("dry run components %v, want %v", got, want)
	}
	if want := []string{"ctr/ctr-small", "cvr/" + xssPipeline}; !slices.Equal(dry.Pipelines, want) {
		t.Errorf("dry run pipelines %q, want %q", dry.Pipelines, want)
	}
	if !dry.DryRun || dry.Blocks != uint32(3*len(e.blocks)) || dry.Bytes <= 0 || dry.ObjectsDeleted != 0 || dry.AuditId != "" {
		t.Errorf("dry run: %v", dry)
	}
	for _, k := range append(affected, untouched...) {
		e.checkMemoized(k)
	}
	if a, err := op.ListAudit(e.ctx, &sigv1.ListAuditRequest{}); err != nil || len(a.Entries) != 0 {
		t.Errorf("audit after a dry run: %v, %v", a, err)
	}
	if !e.solution("ctr", "ctr-small").Complete || !e.solution("cvr", xssPipeline).Complete {
		t.Error("a dry run made a solution incomplete")
	}

	// The eviction.
	done, err := op.Evict(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if done.DryRun || done.Blocks != dry.Blocks || done.Bytes != dry.Bytes || done.ObjectsDeleted != uint32(3*len(e.blocks)) || done.AuditId == "" {
		t.Errorf("eviction: %v (dry run said %v)", done, dry)
	}
	for _, k := range affected {
		e.checkEvicted(k)
	}
	for _, k := range untouched {
		e.checkMemoized(k)
	}
	a, err := op.ListAudit(e.ctx, &sigv1.ListAuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Entries) != 1 {
		t.Fatalf("audit: %v", a)
	}
	ae := a.Entries[0]
	if ae.Id != done.AuditId || ae.Who != operator || ae.Why != "tokenizer bug" || !strings.Contains(ae.What, faultySubgraph) ||
		!slices.Equal(slices.Sorted(slices.Values(ae.Components)), keyStrings(affected...)) || ae.Blocks != done.Blocks || ae.When == nil {
		t.Errorf("audit entry %v", ae)
	}

	// The affected read solutions are pending, the others untouched; reading
	// them schedules the recomputation.
	ctrSol = e.solution("ctr", "ctr-small")
	if ctrSol.Complete || pendingBlocks(ctrSol, qa, qids) != 2*len(e.blocks) || pendingBlocks(ctrSol, price) != 0 {
		t.Errorf("ctr solution after eviction: complete=%v, %d pending", ctrSol.Complete, ctrSol.BlocksPending)
	}
	if sol := e.solution("cvr", xssPipeline); sol.Complete || pendingBlocks(sol, qsmall) != len(e.blocks) {
		t.Errorf("cvr solution after eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	if !e.solution("explore", "explore").Complete {
		t.Error("explore's solution is incomplete; it does not use the subgraph")
	}
	e.waitComplete("ctr", "ctr-small")
	e.waitComplete("cvr", xssPipeline)
	for _, k := range append(affected, untouched...) {
		e.checkMemoized(k)
	}
}

// TestSearchAndComponentVisibility: operators search everything; a client
// searches its own pipelines' components only and cannot open another
// client's component.
func TestSearchAndComponentVisibility(t *testing.T) {
	e := newEnv(t, envConfig{Blocks: 1, Rows: 50})
	e.pipelines()
	cvrSol := e.solution("cvr", xssPipeline)
	qsmall := inputKey(t, cvrSol, "q_small")
	q := &sigv1.SearchComponentsRequest{SubgraphDsl: faultySubgraph}
	res, err := e.sig(operator).SearchComponents(e.ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Components) != 3 {
		t.Errorf("operator search: %d components, want 3", len(res.Components))
	}
	res, err = e.sig("ctr").SearchComponents(e.ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Components) != 2 {
		t.Errorf("ctr search: %d components, want its own 2", len(res.Components))
	}
	for _, c := range res.Components {
		if c.Key == qsmall.String() {
			t.Error("ctr sees cvr's component")
		}
	}
	_, err = e.sig("ctr").SearchComponents(e.ctx, &sigv1.SearchComponentsRequest{Client: "cvr"})
	wantCode(t, "ctr searches cvr", err, codes.PermissionDenied)
	_, err = e.sig("ctr").GetComponent(e.ctx, &sigv1.GetComponentRequest{Key: qsmall.String()})
	// NotFound, as for a key nobody uses: ctr does not learn that cvr
	// caches this graph.
	wantCode(t, "ctr opens cvr's component", err, codes.NotFound)
	got, err := e.sig("cvr").GetComponent(e.ctx, &sigv1.GetComponentRequest{Key: qsmall.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Blocks) != 1 || got.Component.Pipelines[0] != "cvr/"+xssPipeline {
		t.Errorf("component: %v", got)
	}
	_, err = e.sig(operator).SearchComponents(e.ctx, &sigv1.SearchComponentsRequest{SubgraphDsl: "lower("})
	wantCode(t, "search with bad DSL", err, codes.InvalidArgument)
	_, err = e.sig(operator).SearchComponents(e.ctx, &sigv1.SearchComponentsRequest{KeyPrefix: "xyz"})
	wantCode(t, "search with a non-hex prefix", err, codes.InvalidArgument)
}
