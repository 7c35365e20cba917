package sigd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/workers"
)

// TestExplainPending: with the one worker held at a gate, a low-priority
// pipeline's first task is running and its other entries queued behind a high-priority client's tasks, and sigd says
// so naming that client, its priority and how many; raised above it, the
// pipeline's entries are behind nothing of another client's; leased, they
// are running. Bad input is InvalidArgument naming the field, another
// client's pipeline PermissionDenied.
func TestExplainPending(t *testing.T) {
	gate := make(chan struct{})
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 3, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WrapRunner: func(r workers.Runner) workers.Runner {
		return workers.RunnerFunc(func(ctx context.Context, tk workers.Task) (workers.Result, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return workers.Result{}, ctx.Err()
			}
			return r.Run(ctx, tk)
		})
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer close(gate)
	ctr, ranking := srv.SIG(t, "ctr"), srv.SIG(t, "ranking")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "low", 100, sigdtest.DSL(t, "ctr_small"), w.All())); err != nil {
		t.Fatal(err)
	}
	explain := func(req *sigv1.ExplainPendingRequest) *sigv1.ExplainPendingResponse {
		t.Helper()
		r, err := ctr.ExplainPending(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The one worker takes ctr's first task and waits at the gate: running.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := explain(&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low"})
		running := 0
		for _, e := range r.Entries {
			if e.Kind == sigv1.PendingKind_PENDING_KIND_RUNNING && e.Worker != "" {
				running++
			}
		}
		if running > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no entry running: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// ranking's pipeline at 900 comes after: its tasks go ahead of ctr's.
	if _, err := ranking.SubmitGraph(ctx, sigdtest.Submit("ranking", "top", 900, sigdtest.DSL(t, "ranking"), w.All())); err != nil {
		t.Fatal(err)
	}
	last := w.Blocks[2].ID
	r := explain(&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", BlockIds: []string{last}})
	if len(r.Entries) == 0 || r.NotReady == 0 {
		t.Fatalf("no pending entries explained: %v", r)
	}
	for _, e := range r.Entries {
		if e.BlockId != last || len(e.Inputs) == 0 || e.ComponentDsl == "" {
			t.Fatalf("entry %v: want block %s with its inputs and DSL", e, last)
		}
		if e.Kind == sigv1.PendingKind_PENDING_KIND_RUNNING {
			t.Fatalf("entry %v running: the one worker holds a task of the first block", e)
		}
		var behind *sigv1.QueuedAhead
		for _, a := range e.Ahead {
			if a.Client == "ranking" {
				behind = a
			}
		}
		if e.Kind != sigv1.PendingKind_PENDING_KIND_QUEUED || behind == nil || behind.Priority != 900 || behind.Tasks == 0 || e.TasksAhead < behind.Tasks {
			t.Fatalf("entry %s %s: %v, want queued behind ranking's tasks at 900", e.ComponentDsl, e.BlockId, e)
		}
	}
	// Raised above ranking: nothing of ranking's is ahead any more.
	if _, err := ctr.SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "low", Priority: 1000}); err != nil {
		t.Fatal(err)
	}
	r = explain(&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", BlockIds: []string{last}})
	for _, e := range r.Entries {
		for _, a := range e.Ahead {
			if a.Client != "ctr" || a.Priority != 1000 {
				t.Fatalf("after the raise, entry %s is behind %v", e.ComponentDsl, a)
			}
		}
	}
	// A block not in the catalog: waiting for ingestion.
	r = explain(&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", BlockIds: []string{"ads-p9-nosuch"}})
	if len(r.Entries) != 1 || r.Entries[0].Kind != sigv1.PendingKind_PENDING_KIND_INGESTION {
		t.Fatalf("unknown block: %v", r)
	}
	// Asked again and again, an unknown block is one entry, and the
	// entries stay within the limit.
	r = explain(&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", Limit: 2,
		BlockIds: []string{"ads-p9-a", "ads-p9-a", "ads-p9-b", "ads-p9-c"}})
	if len(r.Entries) != 2 || r.Entries[0].BlockId != "ads-p9-a" || r.Entries[1].BlockId != "ads-p9-b" {
		t.Fatalf("unknown blocks, limit 2: %v", r)
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf("ads-p9-%d", i)
	}

	for _, tc := range []struct {
		req   *sigv1.ExplainPendingRequest
		field string
	}{
		{&sigv1.ExplainPendingRequest{Pipeline: "low"}, "client"},
		{&sigv1.ExplainPendingRequest{Client: "ctr"}, "pipeline"},
		{&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", Limit: 5000}, "limit"},
		{&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", BlockIds: []string{"a/b"}}, "block_ids[0]"},
		{&sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low", BlockIds: many}, "block_ids"},
	} {
		_, err := ctr.ExplainPending(ctx, tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%v: %v, want InvalidArgument naming %s", tc.req, err, tc.field)
		}
	}
	// A trainer's stall ledger is checked like the rest of its report.
	for _, tc := range []struct {
		c     *sigv1.StallCause
		field string
	}{
		{&sigv1.StallCause{Kind: "queued", Seconds: -1}, "stall[0].seconds"},
		{&sigv1.StallCause{Kind: "no such kind!", Seconds: 1}, "stall[0].kind"},
	} {
		_, err := srv.SIG(t, "trainer").ReportTrainerStatus(ctx, &sigv1.TrainerStatus{Job: "j", Client: "ctr", Stall: []*sigv1.StallCause{tc.c}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("stall %v: %v, want InvalidArgument naming %s", tc.c, err, tc.field)
		}
	}
	if _, err := srv.SIG(t, "cvr").ExplainPending(ctx, &sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("cvr asking about ctr's pipeline: %v, want PermissionDenied", err)
	}
	if _, err := ctr.ExplainPending(ctx, &sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "nosuch"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown pipeline: %v, want NotFound", err)
	}
}
