package sigd_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/workers"
)

// serverState is everything a refused request must leave unchanged.
type serverState struct {
	Pipelines  []matching.Pipeline
	Components []canon.Key
	Depths     []workers.Depth
	Queued     int
	Leased     int
	Quarantine int
}

func stateOf(t *testing.T, srv *sigdtest.Server) serverState {
	t.Helper()
	c := srv.Frontend().Cache()
	ps, err := c.Pipelines("")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := c.ComponentKeys()
	if err != nil {
		t.Fatal(err)
	}
	st := srv.Queue().Stats()
	return serverState{Pipelines: ps, Components: ks, Depths: srv.Queue().Depths(), Queued: st.Queued, Leased: st.Leased, Quarantine: st.Quarantined}
}

func checkUnchanged(t *testing.T, before, after serverState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("refused requests changed the server's state:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestAuth: a client can neither read, watch, submit to nor re-prioritize
// another client's pipeline (PermissionDenied); calls without a valid
// token are Unauthenticated; roles are enforced (workers cannot submit or
// read, clients cannot lease, complete, release quarantine or evict (a
// component or a block), trainers cannot re-prioritize, readers can only
// report corrupt memo objects). None of the refused calls changes any
// state; the owner and an operator then succeed.
func TestAuth(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, hashGraph(11), w.All())); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, srv)

	other := hashGraph(12)
	watch := func(c sigv1.SIGClient, client, pipeline string) error {
		st, err := c.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: client, Pipeline: pipeline})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	bad := sigv1.NewSIGClient(sigdtest.Dial(t, srv.Addr(), "not-a-token-of-this-server"))
	badW := sigv1.NewWorkersClient(sigdtest.Dial(t, srv.Addr(), "not-a-token-of-this-server"))
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		// Another client's pipeline.
		{"cvr reads ctr's solution", func() error {
			_, err := srv.SIG(t, "cvr").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
			return err
		}, codes.PermissionDenied},
		{"cvr watches ctr's solution", func() error { return watch(srv.SIG(t, "cvr"), "ctr", "p") }, codes.PermissionDenied},
		{"cvr submits to ctr's pipeline", func() error {
			_, err := srv.SIG(t, "cvr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 900, other, w.All()))
			return err
		}, codes.PermissionDenied},
		{"cvr creates a pipeline of ctr", func() error {
			_, err := srv.SIG(t, "cvr").SubmitGraph(ctx, sigdtest.Submit("ctr", "new", 900, other, w.All()))
			return err
		}, codes.PermissionDenied},
		{"cvr re-prioritizes ctr's pipeline", func() error {
			_, err := srv.SIG(t, "cvr").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: 900})
			return err
		}, codes.PermissionDenied},
		{"ctr's trainer reads cvr's solution", func() error {
			_, err := srv.SIG(t, "trainer").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "cvr", Pipeline: "p"})
			return err
		}, codes.PermissionDenied},
		// No or unknown token.
		{"no token: submit", func() error {
			_, err := srv.SIG(t, "").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 900, other, w.All()))
			return err
		}, codes.Unauthenticated},
		{"no token: read", func() error {
			_, err := srv.SIG(t, "").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
			return err
		}, codes.Unauthenticated},
		{"no token: watch", func() error { return watch(srv.SIG(t, ""), "ctr", "p") }, codes.Unauthenticated},
		{"no token: set priority", func() error {
			_, err := srv.SIG(t, "").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: 900})
			return err
		}, codes.Unauthenticated},
		{"no token: lease", func() error {
			_, err := srv.Workers(t, "").LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w"})
			return err
		}, codes.Unauthenticated},
		{"unknown token: submit", func() error {
			_, err := bad.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 900, other, w.All()))
			return err
		}, codes.Unauthenticated},
		{"unknown token: lease", func() error {
			_, err := badW.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w"})
			return err
		}, codes.Unauthenticated},
		// Wrong role.
		{"worker submits", func() error {
			_, err := srv.SIG(t, "worker").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 900, other, w.All()))
			return err
		}, codes.PermissionDenied},
		{"worker reads a solution", func() error {
			_, err := srv.SIG(t, "worker").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
			return err
		}, codes.PermissionDenied},
		{"worker re-prioritizes", func() error {
			_, err := srv.SIG(t, "worker").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: 900})
			return err
		}, codes.PermissionDenied},
		{"trainer re-prioritizes its client's pipeline", func() error {
			_, err := srv.SIG(t, "trainer").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: 900})
			return err
		}, codes.PermissionDenied},
		{"client leases a task", func() error {
			_, err := srv.Workers(t, "ctr").LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w"})
			return err
		}, codes.PermissionDenied},
		{"client completes a task", func() error {
			_, err := srv.Workers(t, "ctr").CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: "x"})
			return err
		}, codes.PermissionDenied},
		{"client fails a task", func() error {
			_, err := srv.Workers(t, "ctr").FailTask(ctx, &sigv1.FailTaskRequest{LeaseId: "x", Error: "no"})
			return err
		}, codes.PermissionDenied},
		{"client releases a quarantined task", func() error {
			_, err := srv.SIG(t, "ctr").ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{ComponentKey: strings.Repeat("a", 64), BlockId: w.Blocks[0].ID})
			return err
		}, codes.PermissionDenied},
		{"client evicts", func() error {
			_, err := srv.SIG(t, "ctr").Evict(ctx, &sigv1.EvictRequest{Reason: "test"})
			return err
		}, codes.PermissionDenied},
		{"client evicts a block", func() error {
			_, err := srv.SIG(t, "ctr").EvictBlock(ctx, &sigv1.EvictBlockRequest{ComponentKey: strings.Repeat("a", 64), BlockId: w.Blocks[0].ID, Reason: "test"})
			return err
		}, codes.PermissionDenied},
		{"trainer recomputes a block", func() error {
			_, err := srv.SIG(t, "trainer").EvictBlock(ctx, &sigv1.EvictBlockRequest{ComponentKey: strings.Repeat("a", 64), BlockId: w.Blocks[0].ID, Reason: "test", Recompute: true})
			return err
		}, codes.PermissionDenied},
		// A reader's token only reports corrupt memo objects.
		{"reader submits", func() error {
			_, err := srv.SIG(t, "reader").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 900, other, w.All()))
			return err
		}, codes.PermissionDenied},
		{"reader reads a solution", func() error {
			_, err := srv.SIG(t, "reader").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
			return err
		}, codes.PermissionDenied},
		{"reader leases a task", func() error {
			_, err := srv.Workers(t, "reader").LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w"})
			return err
		}, codes.PermissionDenied},
		{"reader evicts a block", func() error {
			_, err := srv.SIG(t, "reader").EvictBlock(ctx, &sigv1.EvictBlockRequest{ComponentKey: strings.Repeat("a", 64), BlockId: w.Blocks[0].ID, Reason: "test"})
			return err
		}, codes.PermissionDenied},
		{"no token: report a corrupt memo", func() error {
			_, err := srv.SIG(t, "").ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: strings.Repeat("a", 64), BlockId: w.Blocks[0].ID})
			return err
		}, codes.Unauthenticated},
	}
	for _, c := range cases {
		err := c.call()
		if status.Code(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	checkUnchanged(t, before, stateOf(t, srv))

	// Queue listings show a client its own queues only.
	qs, err := srv.SIG(t, "cvr").ListQueues(ctx, &sigv1.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs.Queues) != 0 {
		t.Errorf("cvr sees queues %v, want none (only ctr has work)", qs.Queues)
	}
	if qs, err = srv.SIG(t, "ctr").ListQueues(ctx, &sigv1.ListQueuesRequest{}); err != nil || len(qs.Queues) != 1 || qs.Queues[0].Client != "ctr" {
		t.Errorf("ctr sees queues %v (%v), want its own", qs.GetQueues(), err)
	}

	// The owner, its trainer and an operator may.
	if _, err := srv.SIG(t, "ctr").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"}); err != nil {
		t.Errorf("owner reads: %v", err)
	}
	if _, err := srv.SIG(t, "trainer").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"}); err != nil {
		t.Errorf("trainer of the client reads: %v", err)
	}
	if r, err := srv.SIG(t, "operator").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: 7}); err != nil || r.TasksReprioritized != 4 {
		t.Errorf("operator re-prioritizes: %v, %v; want 4 tasks moved", r, err)
	}
	if r, err := srv.SIG(t, "ctr").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "p", Priority: 8}); err != nil || r.TasksReprioritized != 4 {
		t.Errorf("owner re-prioritizes: %v, %v; want 4 tasks moved", r, err)
	}
}
