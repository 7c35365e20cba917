package sigd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
)

// gateRunner holds memoization runs while it is closed.
type gateRunner struct {
	inner workers.Runner
	mu    sync.Mutex
	open  chan struct{}
}

func newGate() (*gateRunner, func(workers.Runner) workers.Runner) {
	g := &gateRunner{open: make(chan struct{})}
	close(g.open)
	return g, func(r workers.Runner) workers.Runner { g.inner = r; return g }
}

func (g *gateRunner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return workers.Result{}, ctx.Err()
	}
	return g.inner.Run(ctx, t)
}

func (g *gateRunner) close() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateRunner) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

// flipValueByte rots one byte in the middle of a memo entry's column (the
// column of its pack, issue 28; the value of an object of one component
// when column is ""), keeping the checksum stored with the object: what a
// disk or a faulty copy does, and what readers answer DataLoss to.
func flipValueByte(t *testing.T, st *objstore.Store, key, column string) {
	t.Helper()
	ctx := context.Background()
	data, info, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	meta, rec, err := block.Decode(key, data)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if column == "" {
		column = block.MemoColumn
	}
	c, _ := meta.Column(column)
	data[c.Offset+c.Length/2] ^= 0x5a
	if _, err := st.PutChecksummed(ctx, key, data, info.Checksum, map[string]string{"Sig-Block": meta.ID}); err != nil {
		t.Fatal(err)
	}
}

// serveReader serves a reader with sigd's tokens over gRPC and returns its
// address.
func serveReader(t *testing.T, srv *sigdtest.Server, cfg reader.Config) string {
	t.Helper()
	cfg.Store, cfg.Tokens = srv.Store(), srv.Server.Tokens()
	r, err := reader.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := r.GRPCServer()
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func readUnit(ctx context.Context, c *reader.Client, u *readerv1.WorkUnit) ([]byte, error) {
	var out []byte
	for b, err := range c.ReadBatches(ctx, u) {
		if err != nil {
			return out, err
		}
		out = append(out, b.IPC...)
	}
	return out, nil
}

// readUnits reads every unit of units (by block id), as readUnit, and
// returns their bytes by block id.
func readUnits(ctx context.Context, t *testing.T, c *reader.Client, units map[string]*readerv1.WorkUnit) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for id, u := range units {
		b, err := readUnit(ctx, c, u)
		if err != nil {
			t.Fatalf("unit of block %s: %v", id, err)
		}
		out[id] = b
	}
	return out
}

func unitsOf(t *testing.T, sol *sigv1.ReadSolution) map[string]*readerv1.WorkUnit {
	t.Helper()
	us, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 256})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*readerv1.WorkUnit{}
	for _, u := range us {
		out[u.BlockId] = u
	}
	return out
}

// unitNow is block id's unit of the pipeline's read solution now: a block
// recomputed after a repair is in a new pack (issue 28), which a unit taken
// before does not name.
func unitNow(ctx context.Context, t *testing.T, c sigv1.SIGClient, client, pipeline, id string) *readerv1.WorkUnit {
	t.Helper()
	sol, err := c.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: client, Pipeline: pipeline})
	if err != nil {
		t.Fatal(err)
	}
	return unitsOf(t, sol)[id]
}

func memoOf(t *testing.T, srv *sigdtest.Server, k canon.Key, id string) matching.MemoEntry {
	t.Helper()
	m, err := srv.Frontend().Cache().Memo(k, blockref.ParseMemo(id))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func auditLog(t *testing.T, ctx context.Context, srv *sigdtest.Server) []*sigv1.AuditEntry {
	t.Helper()
	resp, err := srv.SIG(t, "operator").ListAudit(ctx, &sigv1.ListAuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Entries
}

const repairGraph = `input q = hash(unigrams(lower(col("query"))), buckets=1000)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
`

// TestCorruptMemoRepaired: a memo object rots in the bucket after its
// block was ready. A reader serving it answers DataLoss and reports it to
// sigd (role reader); sigd reads the object itself, finds it corrupt,
// turns that one block pending with a new generation, audits who reported
// and what was found, and workers recompute it at the pipeline's priority:
// a watcher sees the block pending, then ready, and the reader serves the
// bytes it served before. Nothing else is evicted. Before, the solution
// stayed ready and complete and every read of the block failed.
func TestCorruptMemoRepaired(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 1000, Seed: 5})
	gate, wrap := newGate()
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WrapRunner: wrap})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 700, repairGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	q := sigdtest.InputKey(t, sol, "q")
	b0 := w.Blocks[0].ID

	rp, addr := startReaderProcess(t, w, srv)
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"],
		InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	units := unitsOf(t, sol)
	want := readUnits(ctx, t, rc, units)
	before := memoOf(t, srv, q, b0)
	other := memoOf(t, srv, sigdtest.InputKey(t, sol, "price"), b0)

	gate.close() // hold the recomputation, to see the block pending
	flipValueByte(t, srv.Store(), before.Object, before.Column)
	if _, err := readUnit(ctx, rc, units[b0]); status.Code(err) != codes.DataLoss {
		t.Fatalf("reading the corrupt block: %v, want DataLoss", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var m matching.MemoEntry
	for m = memoOf(t, srv, q, b0); m.State == matching.MemoReady; m = memoOf(t, srv, q, b0) {
		if time.Now().After(deadline) {
			t.Fatalf("the corrupt block is still ready 10s after a reader failed on it: nothing told sigd")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m.State != matching.MemoPending || m.Gen == before.Gen || !strings.Contains(m.Error, "corrupt") {
		t.Fatalf("after the report: %+v, want pending with a new generation and the reason (old generation %d)", m, before.Gen)
	}
	if o := memoOf(t, srv, other.Component, b0); o.State != matching.MemoReady || o.Gen != other.Gen {
		t.Errorf("another component of the block changed: %+v", o)
	}
	if o := memoOf(t, srv, q, w.Blocks[1].ID); o.State != matching.MemoReady {
		t.Errorf("another block of the component changed: %+v", o)
	}
	task, ok := srv.Queue().Get(workers.TaskID{Component: q, Block: blockref.ParseMemo(b0)})
	if !ok || len(task.Requesters) != 1 || task.Priority() != 700 {
		t.Errorf("recomputation task %+v (queued %v), want one at the pipeline's priority 700", task, ok)
	}
	entries := auditLog(t, ctx, srv)
	if len(entries) != 1 {
		t.Fatalf("audit log %v, want one entry", entries)
	}
	if e := entries[0]; e.Who != "reader" || !strings.Contains(e.What, b0) || len(e.Components) != 1 || e.Components[0] != q.String() ||
		e.Blocks != 1 || !strings.Contains(e.Why, "checksum") || !strings.Contains(e.Why, "sigd found") {
		t.Errorf("audit entry %+v, want the reader's report of block %s of %s with what sigd found", e, b0, q.Short())
	}

	// A watcher sees the block pending, then ready once the worker ran.
	st, err := ctr.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: "ctr", Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.Solution.Complete || first.Solution.BlocksPending != 1 {
		t.Fatalf("watched solution: complete=%v, %d pending; want the one block pending", first.Solution.Complete, first.Solution.BlocksPending)
	}
	gate.release()
	sawReady := false
	var last *sigv1.ReadSolution
	for {
		up, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range up.Changes {
			if c.ComponentKey == q.String() && c.Block.BlockId == b0 && c.Block.State == sigv1.BlockState_BLOCK_STATE_READY {
				sawReady = true
			}
		}
		if up.Solution != nil {
			last = up.Solution
		}
	}
	if !sawReady || !last.GetComplete() {
		t.Fatalf("watch ended: saw the block ready %v, last solution complete %v", sawReady, last.GetComplete())
	}
	// A fresh unit reads the same bytes as before. The unit taken before
	// the corruption names the pack the block was in (issue 28): the
	// recomputation wrote a new one, and the old one serves nothing good
	// (deleted with its last entry: MEMO_PENDING, which makes a trainer
	// read the solution again; or its column still rotten: DataLoss).
	if got, err := readUnit(ctx, rc, unitsOf(t, last)[b0]); err != nil || !bytes.Equal(got, want[b0]) {
		t.Fatalf("block %s after the repair: %d bytes (%v), want the %d bytes served before", b0, len(got), err, len(want[b0]))
	}
	if _, err := readUnit(ctx, rc, units[b0]); err == nil {
		t.Fatalf("block %s after the repair: the unit taken before it read the rotten pack's column", b0)
	}
	if log := rp.Stderr.String(); !strings.Contains(log, "reported a corrupt memo object to sigd") || !strings.Contains(log, "corrupt=true") {
		t.Errorf("the reader did not log its report:\n%s", log)
	}
}

// startReaderProcess runs cmd/reader against the warehouse with sigd's
// tokens, reporting to sigd with the reader token, and returns it and its
// address once it serves.
func startReaderProcess(t *testing.T, w *sigdtest.Warehouse, srv *sigdtest.Server) (*sigdtest.Process, string) {
	t.Helper()
	bin := sigdtest.BuildCommand(t, "cmd/reader")
	var f auth.File
	for _, p := range sigdtest.Principals {
		f.Tokens = append(f.Tokens, auth.Entry{Token: srv.Tokens[p.Name], Principal: p})
	}
	b, _ := json.Marshal(f)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, b, 0o600); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	args := append([]string{"--listen", addr, "--tokens", tokens, "--sigd", srv.Addr(), "--sigd-token", srv.Tokens["reader"]}, w.S3Args()...)
	p := sigdtest.StartProcess(t, bin, args)
	cc := sigdtest.Dial(t, addr, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return p, addr
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("cmd/reader is not serving: %v\n%s", err, p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReportCorruptMemoChecks: a report is a hint that sigd checks. A
// report about a healthy object changes nothing; a client reporting a
// block of a component only another client's pipelines use is NotFound,
// even when the object is corrupt, and changes nothing; nor may a client
// evict or recompute a block. The owner's trainer can report its own
// corrupt block (reported by several at once, it is repaired once), and an
// operator can recompute or evict one block, each audited; a lost object
// is repaired like a corrupt one; afterwards every block is recomputed and
// reads as before.
func TestReportCorruptMemoChecks(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 6})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr, cvr, op := srv.SIG(t, "ctr"), srv.SIG(t, "cvr"), srv.SIG(t, "operator")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, repairGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	if _, err := cvr.SubmitGraph(ctx, sigdtest.Submit("cvr", "p", 5, `input adv = hash(col("advertiser_id"), buckets=100)`, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	sigdtest.WaitComplete(ctx, t, cvr, "cvr", "p")
	q, price := sigdtest.InputKey(t, sol, "q"), sigdtest.InputKey(t, sol, "price")
	b0, b1 := w.Blocks[0].ID, w.Blocks[1].ID
	addr := serveReader(t, srv, reader.Config{})
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"]})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	units := unitsOf(t, sol)
	want := readUnits(ctx, t, rc, units)
	report := func(c sigv1.SIGClient, k canon.Key, id string) (*sigv1.ReportCorruptMemoResponse, error) {
		return c.ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: k.String(), BlockId: id, Detail: "DataLoss seen"})
	}
	unchanged := func(what string, k canon.Key, id string, was matching.MemoEntry) {
		t.Helper()
		if m := memoOf(t, srv, k, id); m.State != matching.MemoReady || m.Gen != was.Gen {
			t.Errorf("%s: entry %+v, want it ready as before (generation %d)", what, m, was.Gen)
		}
		if _, queued := srv.Queue().Get(workers.TaskID{Component: k, Block: blockref.ParseMemo(id)}); queued {
			t.Errorf("%s: a task was queued", what)
		}
		if n := len(auditLog(t, ctx, srv)); n != 0 {
			t.Errorf("%s: %d audit entries, want none", what, n)
		}
	}

	// A healthy object: nothing happens, whoever reports it.
	healthy := memoOf(t, srv, q, b1)
	for _, who := range []string{"trainer", "reader", "operator"} {
		resp, err := report(srv.SIG(t, who), q, b1)
		if err != nil || resp.Corrupt || !strings.Contains(resp.Finding, "healthy") || resp.State != sigv1.BlockState_BLOCK_STATE_READY || resp.AuditId != "" {
			t.Errorf("%s reports a healthy object: %v, %v", who, resp, err)
		}
	}
	unchanged("healthy object reported", q, b1, healthy)

	// Another client's block, even corrupt: NotFound, as for a key nobody
	// uses, and no eviction or recomputation by clients.
	flipValueByte(t, srv.Store(), healthy.Object, healthy.Column)
	if _, err := report(cvr, q, b1); status.Code(err) != codes.NotFound {
		t.Errorf("cvr reports ctr's block: %v, want NotFound", err)
	}
	for _, who := range []string{"cvr", "ctr", "trainer", "reader"} {
		for _, recompute := range []bool{false, true} {
			_, err := srv.SIG(t, who).EvictBlock(ctx, &sigv1.EvictBlockRequest{ComponentKey: q.String(), BlockId: b1, Reason: "mine", Recompute: recompute})
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s evicts a block (recompute %v): %v, want PermissionDenied", who, recompute, err)
			}
		}
	}
	unchanged("refused requests", q, b1, healthy)

	// Bad requests name the field.
	for _, tc := range []struct {
		req   *sigv1.EvictBlockRequest
		field string
		code  codes.Code
	}{
		{&sigv1.EvictBlockRequest{ComponentKey: "abc", BlockId: b1, Reason: "x"}, "component_key", codes.InvalidArgument},
		{&sigv1.EvictBlockRequest{ComponentKey: q.String(), BlockId: "../" + b1, Reason: "x"}, "block_id", codes.InvalidArgument},
		{&sigv1.EvictBlockRequest{ComponentKey: q.String(), BlockId: b1, Reason: " "}, "reason", codes.InvalidArgument},
		{&sigv1.EvictBlockRequest{ComponentKey: q.String(), BlockId: b1, Reason: " ", Recompute: true}, "reason", codes.InvalidArgument},
		{&sigv1.EvictBlockRequest{ComponentKey: q.String(), BlockId: "20990101T000000Z-p00000-1-2", Reason: "x"}, "not found", codes.NotFound},
	} {
		if _, err := op.EvictBlock(ctx, tc.req); status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("EvictBlock %v: %v, want %s naming %s", tc.req, err, tc.code, tc.field)
		}
	}
	// A quarantine release names its component by hex too, parsed once here.
	if _, err := op.ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{ComponentKey: "abc", BlockId: b1}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "component_key") {
		t.Errorf("release of a bad component key: %v, want InvalidArgument naming component_key", err)
	}
	if _, err := report(srv.SIG(t, "reader"), canon.Key{}, "../x"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "block_id") {
		t.Errorf("report of a bad block id: %v, want InvalidArgument naming block_id", err)
	}
	unchanged("bad requests", q, b1, healthy)

	// The owner's trainer reports it, with readers reporting it at the same
	// time: repaired once and audited once.
	var (
		mu      sync.Mutex
		repairs []*sigv1.ReportCorruptMemoResponse
		wg      sync.WaitGroup
	)
	for i := range 8 {
		who := []string{"trainer", "reader"}[i%2]
		c := srv.SIG(t, who)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := report(c, q, b1)
			if err != nil || resp.State != sigv1.BlockState_BLOCK_STATE_PENDING && resp.State != sigv1.BlockState_BLOCK_STATE_READY {
				t.Errorf("%s reports the corrupt block: %v, %v", who, resp, err)
				return
			}
			if resp.AuditId != "" {
				mu.Lock()
				repairs = append(repairs, resp)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(repairs) != 1 || !repairs[0].Corrupt {
		t.Fatalf("concurrent reports of one corrupt block repaired it %d times: %v", len(repairs), repairs)
	}
	if log := auditLog(t, ctx, srv); len(log) != 1 || log[0].Id != repairs[0].AuditId || !strings.Contains(log[0].Why, "DataLoss seen") {
		t.Errorf("audit log %v, want the one repair", log)
	}

	// An operator recomputes one healthy block, and evicts another.
	rec, err := op.EvictBlock(ctx, &sigv1.EvictBlockRequest{ComponentKey: price.String(), BlockId: b0, Reason: "suspect bucketize", Recompute: true})
	if err != nil || rec.State != sigv1.BlockState_BLOCK_STATE_PENDING || rec.ObjectsDeleted != 1 || rec.AuditId == "" ||
		len(rec.Pipelines) != 1 || rec.Pipelines[0] != "ctr/p" {
		t.Fatalf("operator recomputes a block: %v, %v", rec, err)
	}
	evicted := memoOf(t, srv, q, b0)
	ev, err := op.EvictBlock(ctx, &sigv1.EvictBlockRequest{ComponentKey: q.String(), BlockId: b0, Reason: "suspect tokenizer"})
	if err != nil || ev.State != sigv1.BlockState_BLOCK_STATE_UNSPECIFIED || ev.ObjectsDeleted != 1 || ev.AuditId == "" || ev.Bytes == 0 {
		t.Fatalf("operator evicts a block: %v, %v", ev, err)
	}
	if _, err := srv.Frontend().Cache().Memo(q, blockref.ParseMemo(b0)); err == nil {
		t.Errorf("evicted block still has a memo entry")
	}
	if _, err := srv.Store().Stat(ctx, evicted.Object); err == nil {
		t.Errorf("evicted block still has its object %s (its pack's only member)", evicted.Object)
	}
	log := auditLog(t, ctx, srv)
	if len(log) != 3 || log[0].Id != ev.AuditId || log[1].Id != rec.AuditId || log[0].Who != "operator" ||
		log[0].Why != "suspect tokenizer" || !strings.Contains(log[1].What, "recompute") || log[1].Components[0] != price.String() ||
		!strings.Contains(log[2].What, "corrupt") {
		t.Errorf("audit log %v, want the eviction, the recomputation and the report, newest first", log)
	}
	// An object lost from the bucket while its block is ready is repaired
	// too when a reader reports it.
	lost := memoOf(t, srv, price, b1)
	if err := srv.Store().Delete(ctx, lost.Object); err != nil {
		t.Fatal(err)
	}
	if resp, err := report(srv.SIG(t, "reader"), price, b1); err != nil || !resp.Corrupt || !strings.Contains(resp.Finding, "missing") || resp.AuditId == "" {
		t.Errorf("reader reports a lost object: %v, %v", resp, err)
	}
	// The next read re-creates the evicted block; everything is recomputed
	// and reads as before.
	if _, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"}); err != nil {
		t.Fatal(err)
	}
	fresh := unitsOf(t, sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p"))
	for id, u := range fresh {
		got, err := readUnit(ctx, rc, u)
		if err != nil || !bytes.Equal(got, want[id]) {
			t.Errorf("block %s after the repairs: %d bytes (%v), want the %d bytes served before", id, len(got), err, len(want[id]))
		}
	}
}
