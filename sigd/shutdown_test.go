package sigd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestShutdownEndsWaits: stopping sigd ends open watch streams and
// long-polling LeaseTask calls with Unavailable "shutting down" (callers
// retry), instead of the graceful stop waiting for them until its timeout
// cuts the connections.
func TestShutdownEndsWaits(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := srv.SIG(t, "ctr")
	if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, hashGraph(11), w.All())); err != nil {
		t.Fatal(err)
	}
	wc := srv.Workers(t, "worker")
	for range 2 { // lease both tasks: the solution stays pending, the queue empty
		if r, err := wc.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w"}); err != nil || r.Task == nil {
			t.Fatalf("lease: %v, %v", r, err)
		}
	}
	st, err := c.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: "ctr", Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if up, err := st.Recv(); err != nil || up.Solution == nil || up.Solution.Complete {
		t.Fatalf("first watch update: %v, %v", up, err)
	}
	leaseErr := make(chan error, 1)
	go func() {
		_, err := wc.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w", Wait: durationpb.New(time.Minute)})
		leaseErr <- err
	}()
	// Nothing observable says the call has reached the server; a second is
	// ample on a loopback connection.
	time.Sleep(time.Second)
	srv.Stop(t)
	for name, err := range map[string]error{"watch": recvErr(st), "lease": <-leaseErr} {
		if s, _ := status.FromError(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "shutting down") {
			t.Errorf("%s ended with %v, want Unavailable: shutting down", name, err)
		}
	}
}

func recvErr(st sigv1.SIG_WatchReadSolutionClient) error {
	for {
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
}
