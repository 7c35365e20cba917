package sigd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestComponentPipelinesPrivate: two clients share a component; each sees
// its own pipelines using it, not the other's, and a client none of whose
// pipelines uses a component is told it is not found (not that it exists
// and is another's). Operators see everything.
func TestComponentPipelinesPrivate(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 20})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []string{"ctr", "cvr"} {
		if _, err := srv.SIG(t, c).SubmitGraph(ctx, sigdtest.Submit(c, c+"-secret-pipeline", 5, hashGraph(11), w.All())); err != nil {
			t.Fatal(err)
		}
	}
	res, err := srv.SIG(t, "operator").SearchComponents(ctx, &sigv1.SearchComponentsRequest{})
	if err != nil || len(res.Components) == 0 {
		t.Fatalf("operator search: %v, %d components", err, len(res.GetComponents()))
	}
	key := res.Components[0].Key
	if got := strings.Join(res.Components[0].Pipelines, ","); got != "ctr/ctr-secret-pipeline,cvr/cvr-secret-pipeline" {
		t.Fatalf("operator sees pipelines %q", got)
	}
	for _, c := range []string{"ctr", "cvr"} {
		want := c + "/" + c + "-secret-pipeline"
		r, err := srv.SIG(t, c).SearchComponents(ctx, &sigv1.SearchComponentsRequest{})
		if err != nil || len(r.Components) == 0 {
			t.Fatalf("%s search: %v", c, err)
		}
		for _, cs := range r.Components {
			if got := strings.Join(cs.Pipelines, ","); got != want {
				t.Errorf("%s's search shows pipelines %q, want %q", c, got, want)
			}
		}
		g, err := srv.SIG(t, c).GetComponent(ctx, &sigv1.GetComponentRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(g.Component.Pipelines, ","); got != want {
			t.Errorf("%s's GetComponent shows pipelines %q, want %q", c, got, want)
		}
	}
	_, err = srv.SIG(t, "ranking").GetComponent(ctx, &sigv1.GetComponentRequest{Key: key})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a client that does not use the component: %v, want NotFound", err)
	}
	// Word for word what a key nobody uses gets, but for the key.
	unused := strings.Repeat("0", len(key))
	_, err2 := srv.SIG(t, "ranking").GetComponent(ctx, &sigv1.GetComponentRequest{Key: unused})
	if status.Code(err2) != codes.NotFound || strings.ReplaceAll(status.Convert(err).Message(), key, "K") != strings.ReplaceAll(status.Convert(err2).Message(), unused, "K") {
		t.Fatalf("another client's component: %q; an unused key: %q", status.Convert(err).Message(), status.Convert(err2).Message())
	}
}
