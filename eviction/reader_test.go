package eviction_test

import (
	"bytes"
	"context"
	"iter"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd/evictiontest"
	"github.com/sigdata/sig/workers"
)

// readerServer is a stateless reader serving in the test process.
type readerServer struct {
	srv  *reader.Server
	gs   *grpc.Server
	addr string
}

func (e *env) reader(t *testing.T) *readerServer {
	t.Helper()
	srv, err := reader.NewServer(reader.Config{Store: e.Srv.Store()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.GRPCServer()
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return &readerServer{srv: srv, gs: gs, addr: lis.Addr().String()}
}

// readAll reads a unit and returns its batches' bytes.
func readAll(ctx context.Context, c *reader.Client, u *readerv1.WorkUnit) ([][]byte, error) {
	var out [][]byte
	for b, err := range c.ReadBatches(ctx, u) {
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(b.IPC))
	}
	return out, nil
}

func (e *env) units(t *testing.T, client, pipeline string) []*readerv1.WorkUnit {
	t.Helper()
	us, err := reader.UnitsFromSolution(e.Solution(client, pipeline), reader.UnitOptions{BatchRows: 256})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// TestEvictionDuringRead: evicting the data of a read solution never
// breaks a reader. A unit whose memo objects were evicted after its read
// solution was taken fails with the retryable pending error before a byte
// is sent; a stream under way when the objects went, cut mid-way (its
// reader lost), fails so too when another reader resumes it, after
// delivering only correct batches. The next read of the solution turns the
// blocks pending, workers recompute them, and the same units read the same
// bytes as before.
//
// Its workers run a block's tasks one by one, each into a pack of its own,
// so that evicting a component deletes its objects. A block-batched worker
// (issue 28) packs the block's columns together, and a pack an untouched
// component's entry still names stays, the evicted columns in it dead
// (TestEvictOneMemberOfAPack): a unit taken before the eviction then still
// reads them, the bytes its solution named, until the pack goes.
func TestEvictionDuringRead(t *testing.T) {
	e := newEnv(t, evictiontest.Config{Blocks: 3, Rows: 3000,
		WrapRunner: func(r workers.Runner) workers.Runner { return workers.RunnerFunc(r.Run) }})
	e.Pipelines()
	ra, rb := e.reader(t), e.reader(t)
	ctx, cancel := context.WithTimeout(e.Ctx, 60*time.Second)
	defer cancel()
	// Small flow-control windows, so a reader cannot send a whole block
	// ahead of the consumer: a stream is really under way while it is cut.
	client, err := reader.NewClient(reader.ClientConfig{Addresses: []string{ra.addr, rb.addr},
		InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		DialOptions: []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	units := e.units(t, "ctr", "ctr-small")
	want := make([][][]byte, len(units))
	for i, u := range units {
		if want[i], err = readAll(ctx, client, u); err != nil {
			t.Fatalf("unit %s before eviction: %v", u.UnitId, err)
		}
		if len(want[i]) < 8 {
			t.Fatalf("unit %s has %d batches; the test needs long streams", u.UnitId, len(want[i]))
		}
	}

	// A stream under way: take its first batch, then evict.
	next, stop := iter.Pull2(client.ReadBatches(ctx, units[1]))
	defer stop()
	first, err, ok := next()
	if !ok || err != nil || !bytes.Equal(first.IPC, want[1][0]) {
		t.Fatalf("first batch of unit %s: %v %v", units[1].UnitId, ok, err)
	}
	if _, err := e.SIG(evictiontest.Operator).Evict(e.Ctx, &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: evictiontest.FaultySubgraph},
		Reason: "tokenizer bug"}); err != nil {
		t.Fatal(err)
	}
	// The unit not yet started fails at once, pending: retryable.
	got, err := readAll(ctx, client, units[0])
	if !reader.IsMemoPending(err) || len(got) != 0 {
		t.Errorf("unit %s after eviction: %d batches, err %v; want none and a pending error", units[0].UnitId, len(got), err)
	}
	// The stream under way loses its reader; the other reader resumes it
	// and finds the objects gone.
	serving := ra
	if rb.srv.Stats().Batches > 0 {
		serving = rb
	}
	serving.gs.Stop()
	n := 1
	for {
		b, err, ok := next()
		if !ok {
			t.Fatalf("unit %s ended after %d batches without an error", units[1].UnitId, n)
		}
		if err != nil {
			if !reader.IsMemoPending(err) {
				t.Errorf("resumed unit %s: %v, want a pending error", units[1].UnitId, err)
			}
			break
		}
		if !bytes.Equal(b.IPC, want[1][n]) {
			t.Fatalf("batch %d of unit %s differs", n, units[1].UnitId)
		}
		n++
	}
	if n >= len(want[1]) {
		t.Errorf("unit %s delivered all %d batches; the stream was not cut", units[1].UnitId, n)
	}
	if st := client.Stats(); st.Resumes == 0 {
		t.Errorf("client stats %+v: no resume", st)
	}

	// Recomputation on demand: the solution turns pending, then complete,
	// and the units read the same bytes again from the surviving reader.
	sol := e.Solution("ctr", "ctr-small")
	if sol.Complete || sol.BlocksPending == 0 {
		t.Errorf("solution after eviction: complete=%v, %d pending", sol.Complete, sol.BlocksPending)
	}
	e.WaitComplete("ctr", "ctr-small")
	for i, u := range e.units(t, "ctr", "ctr-small") {
		got, err := readAll(ctx, client, u)
		if err != nil {
			t.Fatalf("unit %s after recomputation: %v", u.UnitId, err)
		}
		if len(got) != len(want[i]) {
			t.Fatalf("unit %s: %d batches after recomputation, %d before", u.UnitId, len(got), len(want[i]))
		}
		for j := range got {
			if !bytes.Equal(got[j], want[i][j]) {
				t.Fatalf("unit %s batch %d differs after recomputation", u.UnitId, j)
			}
		}
	}
}
