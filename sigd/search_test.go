package sigd_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// wantCode fails t unless err has the gRPC status code.
func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want %s", what, err, code)
	}
}

// TestSearchAndComponentVisibility: operators search everything; a client
// searches its own pipelines' components only and cannot open another
// client's component. Only sigd's RPCs are checked (evict.go's
// SearchComponents and GetComponent), on eviction's end-to-end
// environment for its pipelines of three clients sharing a subgraph.
func TestSearchAndComponentVisibility(t *testing.T) {
	e := evictiontest.New(t, evictiontest.Config{Blocks: 1, Rows: 50})
	e.Pipelines()
	cvrSol := e.Solution("cvr", evictiontest.XSSPipeline)
	qsmall := sigdtest.InputKey(t, cvrSol, "q_small")
	q := &sigv1.SearchComponentsRequest{SubgraphDsl: evictiontest.FaultySubgraph}
	res, err := e.SIG(evictiontest.Operator).SearchComponents(e.Ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Components) != 3 {
		t.Errorf("operator search: %d components, want 3", len(res.Components))
	}
	res, err = e.SIG("ctr").SearchComponents(e.Ctx, q)
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
	_, err = e.SIG("ctr").SearchComponents(e.Ctx, &sigv1.SearchComponentsRequest{Client: "cvr"})
	wantCode(t, "ctr searches cvr", err, codes.PermissionDenied)
	_, err = e.SIG("ctr").GetComponent(e.Ctx, &sigv1.GetComponentRequest{Key: qsmall.String()})
	// NotFound, as for a key nobody uses: ctr does not learn that cvr
	// caches this graph.
	wantCode(t, "ctr opens cvr's component", err, codes.NotFound)
	got, err := e.SIG("cvr").GetComponent(e.Ctx, &sigv1.GetComponentRequest{Key: qsmall.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Blocks) != 1 || got.Component.Pipelines[0] != "cvr/"+evictiontest.XSSPipeline {
		t.Errorf("component: %v", got)
	}
	_, err = e.SIG(evictiontest.Operator).SearchComponents(e.Ctx, &sigv1.SearchComponentsRequest{SubgraphDsl: "lower("})
	wantCode(t, "search with bad DSL", err, codes.InvalidArgument)
	_, err = e.SIG(evictiontest.Operator).SearchComponents(e.Ctx, &sigv1.SearchComponentsRequest{KeyPrefix: "xyz"})
	wantCode(t, "search with a non-hex prefix", err, codes.InvalidArgument)
}
