package sigd_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	"github.com/sigdata/sig/workers/memo"
)

// faultyRunner is a deliberately faulty worker: its first run of each task
// in bad computes the block with the real runner, then writes the memo
// column again through the memo writers (sigdtest.RewriteMemo) with every
// row holding the next row's value: valid Arrow, valid
// checksums, the event ids of the raw block, wrong values. Later runs are
// the real runner's, unless always (a misbuilt binary: every run wrong).
type faultyRunner struct {
	inner  workers.Runner
	store  *objstore.Store
	always bool

	mu  sync.Mutex
	bad map[workers.TaskID]bool
}

func (f *faultyRunner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	res, err := f.inner.Run(ctx, t)
	f.mu.Lock()
	perturb := f.bad[t.ID]
	if err == nil && !f.always {
		delete(f.bad, t.ID)
	}
	f.mu.Unlock()
	if err != nil || !perturb {
		return res, err
	}
	// The task's data where the worker wrote it: its pack's column (issue
	// 28), or its own object (a worker that predates packs).
	key, column := res.Object, block.MemberColumn(t.ID.Component)
	if key == "" {
		key, column = t.Spec.GetMemoObject(), ""
	}
	n, err := sigdtest.RewriteMemo(ctx, f.store, key, column, sigdtest.Rotate)
	if err != nil {
		return res, err
	}
	res.Bytes = n
	return res, nil
}

func errorReason(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// TestGuardMismatchRepaired (issue 21, the shared-fate guard): a faulty
// worker writes a memo object that is valid Arrow with valid checksums but
// wrong values. The block is ready and every check readers made before
// passes, so models would train on it. A cmd/reader process (default
// guard, 16 rows) recomputes sampled rows from the raw block, fails the
// unit with DataLoss MEMO_MISMATCH and reports it to sigd; sigd recomputes
// the block itself, finds the rows differ, quarantines that one entry
// (pending, new generation, the reason on the entry), counts it by
// component, audits it and schedules the recomputation; the read solution
// turns pending, then ready, and the unit then reads the bytes a LIG read
// of it gives. Nothing else is touched. A MEMO_MISMATCH report about the
// repaired object changes nothing, and the same incarnation is not
// recomputed for a second one.
func TestGuardMismatchRepaired(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 1000, Seed: 5})
	gate, _ := newGate()
	faulty := &faultyRunner{bad: map[workers.TaskID]bool{}}
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WrapRunner: func(r workers.Runner) workers.Runner {
		faulty.inner, gate.inner = r, faulty
		return gate
	}})
	faulty.store = srv.Store()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")

	// The faulty run: the component of input q, block 0. Its key is known
	// once the graph is submitted; the worker is held until then.
	gate.close()
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 700, repairGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sol, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	q := sigdtest.InputKey(t, sol, "q")
	b0 := w.Blocks[0].ID
	faulty.mu.Lock()
	faulty.bad[workers.TaskID{Component: q, Block: blockref.ParseMemo(b0)}] = true
	faulty.mu.Unlock()
	gate.release()
	sol = sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	faulty.mu.Lock()
	if len(faulty.bad) != 0 {
		t.Fatalf("the faulty run did not happen: %v", faulty.bad)
	}
	faulty.mu.Unlock()
	bad := memoOf(t, srv, q, b0)
	other := memoOf(t, srv, sigdtest.InputKey(t, sol, "price"), b0)
	otherBlock := memoOf(t, srv, q, w.Blocks[1].ID)

	rp, addr := startReaderProcess(t, w, srv)
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"],
		InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	units := unitsOf(t, sol)
	ligUnits, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 256,
		Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}})
	if err != nil {
		t.Fatal(err)
	}
	var lig []byte
	for _, u := range ligUnits {
		if u.BlockId == b0 {
			if lig, err = readUnit(ctx, rc, u); err != nil {
				t.Fatalf("LIG read of block %s: %v", b0, err)
			}
		}
	}
	if got, err := readUnit(ctx, rc, units[w.Blocks[1].ID]); err != nil {
		t.Fatalf("the honest block: %v (%d bytes)", err, len(got))
	}

	gate.close() // hold the recomputation, to see the block pending
	_, err = readUnit(ctx, rc, units[b0])
	if status.Code(err) != codes.DataLoss || errorReason(err) != reader.ReasonMemoMismatch {
		t.Fatalf("reading the block of wrong values: %v (reason %q), want DataLoss %s", err, errorReason(err), reader.ReasonMemoMismatch)
	}
	for _, want := range []string{`input "q"`, q.String(), b0, "row "} {
		if !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("the error %q does not name %s", status.Convert(err).Message(), want)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	var m matching.MemoEntry
	for m = memoOf(t, srv, q, b0); m.State == matching.MemoReady; m = memoOf(t, srv, q, b0) {
		if time.Now().After(deadline) {
			t.Fatalf("the block of wrong values is still ready 20s after the guard caught it:\n%s", rp.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m.State != matching.MemoPending || m.Gen == bad.Gen || !strings.Contains(m.Error, "quarantined (MEMO_MISMATCH)") ||
		!strings.Contains(m.Error, "wrong values") {
		t.Fatalf("after the report: %+v, want pending, quarantined with the reason, a new generation (old %d)", m, bad.Gen)
	}
	if s, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"}); err != nil || s.Complete || s.BlocksPending != 1 {
		t.Errorf("read solution after the quarantine: %v (complete %v, %d pending), want the one block pending", err, s.GetComplete(), s.GetBlocksPending())
	}
	if o := memoOf(t, srv, other.Component, b0); o.State != matching.MemoReady || o.Gen != other.Gen {
		t.Errorf("another component of the block changed: %+v", o)
	}
	if o := memoOf(t, srv, q, w.Blocks[1].ID); o.State != matching.MemoReady || o.Gen != otherBlock.Gen {
		t.Errorf("another block of the component changed: %+v", o)
	}
	task, ok := srv.Queue().Get(workers.TaskID{Component: q, Block: blockref.ParseMemo(b0)})
	if !ok || task.Priority() != 700 {
		t.Errorf("recomputation task %+v (queued %v), want one at the pipeline's priority 700", task, ok)
	}
	if c := metricByLabel(t, srv, sigd.MetricMemoMismatches, "component"); len(c) != 1 || c[q.String()].GetCounter().GetValue() != 1 {
		t.Errorf("%s = %v, want 1 for component %s", sigd.MetricMemoMismatches, c, q.Short())
	}
	entries := auditLog(t, ctx, srv)
	if len(entries) != 1 {
		t.Fatalf("audit log %v, want one entry", entries)
	}
	if e := entries[0]; e.Who != "reader" || !strings.Contains(e.What, "quarantine") || !strings.Contains(e.What, b0) ||
		len(e.Components) != 1 || e.Components[0] != q.String() || !strings.Contains(e.Why, "memo mismatch") || !strings.Contains(e.Why, "wrong values") {
		t.Errorf("audit entry %+v, want the reader's report and what sigd's recomputation found", e)
	}

	gate.release()
	sol = sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	// A fresh unit names the block's new pack (issue 28) and reads LIG's
	// bytes.
	if got, err := readUnit(ctx, rc, unitsOf(t, sol)[b0]); err != nil || !bytes.Equal(got, lig) {
		t.Fatalf("block %s after the repair: %d bytes (%v), want the %d bytes of its LIG read", b0, len(got), err, len(lig))
	}
	if log := rp.Stderr.String(); !strings.Contains(log, "reason=MEMO_MISMATCH") || !strings.Contains(log, "corrupt=true") {
		t.Errorf("the reader did not log its report:\n%s", log)
	}

	// The repaired object: a report of a mismatch is checked and changes
	// nothing; an unknown reason is refused.
	op := srv.SIG(t, "operator")
	resp, err := op.ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: q.String(), BlockId: b0,
		Reason: reader.ReasonMemoMismatch, Detail: "a reader with a bad CPU"})
	if err != nil || resp.Corrupt || !strings.Contains(resp.Finding, "equal a recomputation") || resp.State != sigv1.BlockState_BLOCK_STATE_READY {
		t.Errorf("reporting the repaired object: %v %v, want healthy and still ready", resp, err)
	}
	// Reported again (a reader that computes wrong reports once a
	// minute): the same incarnation is not recomputed again.
	resp, err = op.ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: q.String(), BlockId: b0,
		Reason: reader.ReasonMemoMismatch, Detail: "a reader with a bad CPU"})
	if err != nil || resp.Corrupt || !strings.Contains(resp.Finding, "checked before") {
		t.Errorf("reporting the repaired object again: %v %v, want healthy as checked before", resp, err)
	}
	if _, err := op.ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: q.String(), BlockId: b0, Reason: "BOGUS"}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "reason") {
		t.Errorf("an unknown reason: %v, want InvalidArgument naming reason", err)
	}
	if n := len(auditLog(t, ctx, srv)); n != 1 {
		t.Errorf("%d audit entries after the healthy report, want 1", n)
	}
	// The reports by reason and outcome: the reader's, confirmed and
	// repaired; the operator's two, healthy (the refused one is not a
	// report).
	got := map[string]float64{}
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != sigd.MetricMemoReports {
			continue
		}
		for _, m := range mf.GetMetric() {
			var r, o string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "reason":
					r = l.GetValue()
				case "outcome":
					o = l.GetValue()
				}
			}
			got[r+"/"+o] = m.GetCounter().GetValue()
		}
	}
	if want := map[string]float64{"MEMO_MISMATCH/repaired": 1, "MEMO_MISMATCH/healthy": 2}; len(got) != len(want) ||
		got["MEMO_MISMATCH/repaired"] != 1 || got["MEMO_MISMATCH/healthy"] != 2 {
		t.Errorf("%s = %v, want %v", sigd.MetricMemoReports, got, want)
	}
}

// TestGuardBansWrongBuild (issue 27): a misbuilt worker build computes a
// block wrong every time. Before, the readers' guard caught it, sigd
// confirmed and recomputed it, the same build computed it wrong again, and
// so on for ever. Now: a cmd/reader process catches the block and sigd
// recomputes it once, as a fault of the moment (the entry records the
// build that computed it, from its lease); a second reader catches the
// recomputation, computed wrong by the same build: sigd bans the build
// (its in-process workers are refused leases), quarantines the block's
// task and fails its entry, the read solution shows it failed, the audit
// log and sig_banned_worker_builds say so, ListWorkerBuildBans lists the
// ban, and nothing runs again. An operator releases the block: a worker
// of a correct build (remote, over the Workers API) computes it, and the
// unit reads the bytes of its LIG read. Only an operator lifts the ban,
// audited.
func TestGuardBansWrongBuild(t *testing.T) {
	const misbuilt, good = "0badc0ffee00 go1.26 linux/amd64 v3 (test)", "900d900d900d go1.26 linux/amd64 v1 (test)"
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 1000, Seed: 5})
	gate, _ := newGate()
	faulty := &faultyRunner{bad: map[workers.TaskID]bool{}, always: true}
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WorkerBuild: misbuilt,
		WrapRunner: func(r workers.Runner) workers.Runner {
			faulty.inner, gate.inner = r, faulty
			return gate
		}})
	faulty.store = srv.Store()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctr, op := srv.SIG(t, "ctr"), srv.SIG(t, "operator")
	gate.close()
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 700, repairGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sol, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	q, b0 := sigdtest.InputKey(t, sol, "q"), w.Blocks[0].ID
	id := workers.TaskID{Component: q, Block: blockref.ParseMemo(b0)}
	faulty.mu.Lock()
	faulty.bad[id] = true
	faulty.mu.Unlock()
	gate.release()
	sol = sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	first := memoOf(t, srv, q, b0)
	if first.Build != misbuilt {
		t.Fatalf("entry %+v, want it computed by the in-process build %q", first, misbuilt)
	}
	ligUnits, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 256,
		Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}})
	if err != nil {
		t.Fatal(err)
	}
	catch := func(what string) {
		t.Helper()
		_, addr := startReaderProcess(t, w, srv)
		rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"],
			InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		// The block as it is now: a recomputation writes a new pack
		// (issue 28).
		if _, err := readUnit(ctx, rc, unitNow(ctx, t, ctr, "ctr", "p", b0)); status.Code(err) != codes.DataLoss || errorReason(err) != reader.ReasonMemoMismatch {
			t.Fatalf("%s: %v, want DataLoss %s", what, err, reader.ReasonMemoMismatch)
		}
	}
	waitEntry := func(what string, done func(matching.MemoEntry) bool) matching.MemoEntry {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			m := memoOf(t, srv, q, b0)
			if done(m) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: entry %+v after 30s", what, m)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Caught once: recomputed, by the same build, wrong again.
	catch("the first reader")
	second := waitEntry("the recomputation", func(m matching.MemoEntry) bool { return m.State == matching.MemoReady && m.Gen != first.Gen })
	if second.Build != misbuilt {
		t.Fatalf("recomputed entry %+v, want it computed by %q", second, misbuilt)
	}
	if _, banned := srv.Queue().Banned(misbuilt); banned {
		t.Fatal("the build was banned for one wrong object")
	}

	// Caught again (another reader: one reports a block once a minute).
	catch("the second reader")
	failed := waitEntry("the ban", func(m matching.MemoEntry) bool { return m.State == matching.MemoFailed })
	for _, want := range []string{"quarantined (MEMO_MISMATCH)", misbuilt, "banned", "wrong values"} {
		if !strings.Contains(failed.Error, want) {
			t.Errorf("failed entry's reason %q does not say %q", failed.Error, want)
		}
	}
	if _, _, err := srv.Queue().TryLeaseAs("sigd-1", misbuilt); !errors.Is(err, workers.ErrBanned) {
		t.Errorf("a lease of the banned build: %v, want ErrBanned", err)
	}
	if task, ok := srv.Queue().Get(id); !ok || task.State != workers.StateQuarantined {
		t.Errorf("the block's task: %+v (%v), want quarantined", task, ok)
	}
	bans, err := ctr.ListWorkerBuildBans(ctx, &sigv1.ListWorkerBuildBansRequest{})
	if err != nil || len(bans.Bans) != 1 || bans.Bans[0].Build != misbuilt || !strings.Contains(bans.Bans[0].Reason, b0) {
		t.Fatalf("ListWorkerBuildBans: %v %v, want the ban naming the block", bans, err)
	}
	if s, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"}); err != nil || s.BlocksFailed != 1 {
		t.Errorf("read solution after the ban: %v (%d failed), want the block failed", err, s.GetBlocksFailed())
	}
	entries := auditLog(t, ctx, srv)
	if len(entries) != 2 || !strings.Contains(entries[0].What, "ban worker build") || !strings.Contains(entries[0].What, misbuilt) ||
		!strings.Contains(entries[0].Why, "banned from leasing") || !strings.Contains(entries[1].Why, misbuilt) {
		t.Errorf("audit %v, want the recomputation, then the ban, each naming the build", entries)
	}
	if got := metricByLabel(t, srv, sigd.MetricMemoReports, "outcome"); got["quarantined"].GetCounter().GetValue() != 1 || got["repaired"].GetCounter().GetValue() != 1 {
		t.Errorf("%s by outcome: %v, want one repaired, one quarantined", sigd.MetricMemoReports, got)
	}
	if n := gaugeOf(t, srv, "sig_banned_worker_builds"); n != 1 {
		t.Errorf("sig_banned_worker_builds = %v, want 1", n)
	}
	// Not looping: the block stays failed, its object gone, however long
	// the in-process workers of the banned build wait.
	time.Sleep(2 * time.Second)
	if m := memoOf(t, srv, q, b0); m.State != matching.MemoFailed || m.Gen != failed.Gen {
		t.Errorf("entry %+v two seconds after the ban, want it still failed", m)
	}

	// A correct build, remote: it computes the block once an operator
	// releases it.
	pool := workers.NewPool(workers.NewRemoteLeaser(sigv1.NewWorkersClient(srv.Dial(t, "worker")), time.Second, good),
		&memo.Runner{Store: srv.Store()}, workers.PoolOptions{Name: "good"})
	pool.Resize(1)
	defer pool.Close(context.Background())
	if _, err := ctr.ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{ComponentKey: q.String(), BlockId: b0}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a client releasing the block: %v, want PermissionDenied", err)
	}
	if r, err := op.ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{ComponentKey: q.String(), BlockId: b0}); err != nil || !r.Released {
		t.Fatalf("release: %v %v", r, err)
	}
	sol = sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	if m := memoOf(t, srv, q, b0); m.State != matching.MemoReady || m.Build != good {
		t.Fatalf("after the release: %+v, want ready, computed by %q", m, good)
	}
	_, addr := startReaderProcess(t, w, srv)
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"],
		InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	lig, err := readUnit(ctx, rc, ligUnits[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readUnit(ctx, rc, unitsOf(t, sol)[b0]); err != nil || !bytes.Equal(got, lig) {
		t.Fatalf("the block computed by the correct build: %d bytes (%v), want the %d bytes of its LIG read", len(got), err, len(lig))
	}

	// Only an operator lifts the ban, audited.
	if _, err := ctr.LiftWorkerBuildBan(ctx, &sigv1.LiftWorkerBuildBanRequest{Build: misbuilt}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a client lifting the ban: %v, want PermissionDenied", err)
	}
	if r, err := op.LiftWorkerBuildBan(ctx, &sigv1.LiftWorkerBuildBanRequest{Build: misbuilt}); err != nil || !r.Lifted {
		t.Fatalf("lift: %v %v", r, err)
	}
	if _, banned := srv.Queue().Banned(misbuilt); banned {
		t.Error("still banned after the lift")
	}
	if e := auditLog(t, ctx, srv)[0]; e.Who != "operator" || !strings.Contains(e.What, "lift the ban") || !strings.Contains(e.What, misbuilt) {
		t.Errorf("newest audit entry %+v, want the operator's lift", e)
	}
}

// gaugeOf is the value of the unlabelled gauge name on sigd's registry.
func gaugeOf(t *testing.T, srv *sigdtest.Server, name string) float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}
