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
)

// TestSubmitQuota: a submission that would take a client past
// --max-queued-per-client queued tasks is refused whole with
// ResourceExhausted naming the quota, and registers nothing; tasks the
// client has queued already count once, and each client has its own
// quota. Before, any submission was queued whole (13,297 tasks from one).
func TestSubmitQuota(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 4, RowsPerBlock: 20})
	// No in-process workers: the queues only fill.
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, MaxQueuedPerClient: 5}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const one = "input q = hash(col(\"query\"), buckets=1000)\n"
	const two = one + "input c = hash(col(\"country\"), buckets=100)\n"
	const other = "input t = hash(col(\"ad_title\"), buckets=1000)\n"
	submit := func(client, pipeline, dsl string, r *sigv1.EventRange) (*sigv1.SubmitGraphResponse, error) {
		return srv.SIG(t, client).SubmitGraph(ctx, sigdtest.Submit(client, pipeline, 1, dsl, r))
	}
	refused := func(what string, err error, queued, adding int) {
		t.Helper()
		want := "quota of 5 queued tasks per client (sigd --max-queued-per-client)"
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d tasks queued and this would queue %d more", queued, adding)) {
			t.Fatalf("%s: %v; want ResourceExhausted: %d queued, %d more, %s", what, err, queued, adding, want)
		}
	}
	queued := func(client string) int {
		n := 0
		for _, d := range srv.Queue().Depths() {
			if d.Client == client {
				n += d.Queued
			}
		}
		return n
	}

	_, err := submit("ctr", "two", two, w.All())
	refused("2 components over 4 blocks", err, 0, 8)
	if _, err := srv.SIG(t, "ctr").GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "two"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused pipeline: %v, want NotFound (nothing registered)", err)
	}
	if n := queued("ctr"); n != 0 {
		t.Fatalf("%d tasks queued after a refused submission", n)
	}
	if resp, err := submit("ctr", "one", one, w.All()); err != nil || resp.TasksEnqueued != 4 {
		t.Fatalf("1 component over 4 blocks: %v, %v", resp, err)
	}
	// Submitted again: its queued tasks count once.
	if _, err := submit("ctr", "one", one, w.All()); err != nil {
		t.Fatalf("the same pipeline again: %v", err)
	}
	_, err = submit("ctr", "more", other, w.Range(0, 2))
	refused("2 more blocks", err, 4, 2)
	if _, err := submit("ctr", "more", other, w.Range(0, 1)); err != nil {
		t.Fatalf("up to the quota: %v", err)
	}
	// cvr has its own quota; sharing ctr's tasks puts them in its queue.
	_, err = submit("cvr", "two", two, w.All())
	refused("cvr, 2 components over 4 blocks", err, 0, 8)
	if _, err := submit("cvr", "one", one, w.All()); err != nil {
		t.Fatalf("cvr sharing ctr's tasks: %v", err)
	}
	if a, b := queued("ctr"), queued("cvr"); a != 5 || b != 4 {
		t.Fatalf("queued: ctr %d, cvr %d; want 5 and 4", a, b)
	}
}
