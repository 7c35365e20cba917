package sigd_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
	"github.com/sigdata/sig/workers"
)

// versionsGraph reads the query, the bid price and the advertiser: a label
// update touches none of them, a bid price update exactly one.
const versionsGraph = `input qid = hash(unigrams(lower(col("query"))), buckets=1000)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
input adv = hash(col("advertiser_id"), buckets=100)
`

// produceUpdate sends an update of row's column col to value in raw block
// id, as a producer of change records does (warehouse/gen.UpdateRecord:
// kind update, keyed as the event was), and waits until ingestion has
// catalogued version v of the block.
func produceUpdate(ctx context.Context, t *testing.T, w *sigdtest.Warehouse, srv *sigdtest.Server, id string, row int, col string, value any, v int64) block.Meta {
	t.Helper()
	return produceChange(ctx, t, w, srv, id, row, v, func(ev gen.Event) (*kgo.Record, error) {
		return gen.UpdateRecord(ingest.TopicFor("ads"), ev, map[string]any{col: value})
	})
}

// produceDelete sends the deletion of row's event of raw block id
// (warehouse/gen.DeleteRecord) and waits for version v of the block.
func produceDelete(ctx context.Context, t *testing.T, w *sigdtest.Warehouse, srv *sigdtest.Server, id string, row int, v int64) block.Meta {
	t.Helper()
	return produceChange(ctx, t, w, srv, id, row, v, func(ev gen.Event) (*kgo.Record, error) {
		return gen.DeleteRecord(ingest.TopicFor("ads"), ev), nil
	})
}

// produceChange sends the change record change makes of row's event of raw
// block id and waits until ingestion has catalogued version v of the block.
func produceChange(ctx context.Context, t *testing.T, w *sigdtest.Warehouse, srv *sigdtest.Server, id string, row int, v int64,
	change func(gen.Event) (*kgo.Record, error)) block.Meta {
	t.Helper()
	cur, err := srv.Catalog().Get("ads", id)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := block.ReadColumns(ctx, srv.Store(), cur, []string{transform.ColEventTime})
	if err != nil {
		t.Fatal(err)
	}
	ev := gen.Event{EventID: rec.Column(0).(*array.Int64).Value(row), EventTime: rec.Column(1).(*array.Int64).Value(row)}
	rec.Release()
	r, err := change(ev)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := w.Kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var m block.Meta
	waitFor(t, 30*time.Second, fmt.Sprintf("ingestion to catalogue version %d of %s", v, id), func() bool {
		m, err = srv.Catalog().Get("ads", id)
		return err == nil && m.Ref().Version() == v
	})
	return m
}

// writeVersion writes the next version of raw block cur, its values
// unchanged but column col's version bumped (what tests of versions follow
// is the version), and commits it to cat as ingestion does.
func writeVersion(ctx context.Context, t *testing.T, st *objstore.Store, cat *catalog.Catalog, cur block.Meta, col string) block.Meta {
	t.Helper()
	_, rec, err := block.ReadBlock(ctx, st, cur.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	v := cur.Ref().Version() + 1
	next := cur.Clone()
	if next.ColumnVersions == nil {
		next.ColumnVersions = map[string]int64{}
	}
	next.Key, next.Version, next.ColumnVersions[col] = block.RawKey(cur.Source, blockref.New(cur.ID, v)), v, v
	next.Changes = append(next.Changes, block.Change{Version: v, Topic: "raw.ads", First: 1<<20 + v, Last: 1<<20 + v,
		UpdatedRows: 1, Columns: []string{col}})
	written, err := block.Write(ctx, st, next, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Commit([]block.Meta{written}); err != nil {
		t.Fatal(err)
	}
	return written
}

// unitBytes reads every unit of a solution in process, SIG (memo objects
// where the solution has them) or LIG (every input computed from the raw
// block), and returns each unit's response bytes by block.
func unitBytes(ctx context.Context, t *testing.T, rs *reader.Server, sol *sigv1.ReadSolution, lig bool) map[string][]byte {
	t.Helper()
	opts := reader.UnitOptions{BatchRows: 256}
	if lig {
		opts.Mode = func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}
	}
	units, err := reader.UnitsFromSolution(sol, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, u := range units {
		out[u.GetBlockId()] = serveBytes(ctx, t, rs, u)
	}
	return out
}

// TestVersionsEndToEnd (issue 21, items 2 and 3): memo entries are per
// block version of the columns each component reads. Three components are
// memoized over two blocks of events sigd ingested from Kafka; then change
// records are produced and ingestion makes new versions: a label update of
// an event of block 0 recomputes no memo task; a bid price update exactly
// one (the price bucket of block 0), at the pipeline's priority; a
// deletion in block 1 all three of block 1 (its row set changed). A read
// solution at the snapshot a trainer pinned before the changes still names
// version 1 and serves its bytes; the current one names the new versions,
// and SIG and LIG readers stream identical bytes for every unit of either.
// Version GC keeps what the pin and "now" see, and once unpinned removes
// the version 1s with the memo entries no kept version reads, and their
// objects.
func TestVersionsEndToEnd(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{})
	runs, wrap := newCounter()
	gc := make(chan struct{})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1, Ingest: []string{"ads"}, RowsPerBlock: 1000,
		SealAfter: time.Second, VersionGCGrace: -1}, sigd.Options{WrapRunner: wrap, GCTrigger: gc})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := w.Kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := gen.New(gen.Config{Seed: 21, LateFraction: -1}).Produce(ctx, cl, ingest.TopicFor("ads"), 2000, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
	start := gen.Config{}
	start.EnsureDefaults()
	r := &sigv1.EventRange{StartMicros: start.Start.UnixMicro(), EndMicros: start.Start.Add(time.Hour).UnixMicro()}
	var blocks []block.Meta
	waitFor(t, time.Minute, "ingestion to seal 2 blocks of 1000 events", func() bool {
		blocks, err = srv.Catalog().Range("ads", r.StartMicros, r.EndMicros)
		return err == nil && len(blocks) == 2 && blocks[0].Rows+blocks[1].Rows == 2000
	})
	ctr, trainer := srv.SIG(t, "ctr"), srv.SIG(t, "trainer")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 700, versionsGraph, r)); err != nil {
		t.Fatal(err)
	}
	v1 := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	if n := total(runs.snapshot()); n != 6 {
		t.Fatalf("%d memo tasks ran for 3 components over 2 blocks, want 6", n)
	}
	rs, err := reader.NewServer(reader.Config{Store: srv.Store()})
	if err != nil {
		t.Fatal(err)
	}
	before := unitBytes(ctx, t, rs, v1, false)

	// The trainer pins the snapshot its epoch reads; bad pins are refused
	// naming the field.
	pin, err := trainer.PinSnapshot(ctx, &sigv1.PinSnapshotRequest{Name: "ctr:epoch-1"})
	if err != nil || pin.GetSnapshot() != v1.GetSnapshot() {
		t.Fatalf("pin: %v, %v; want the solution's snapshot %d", pin, err, v1.GetSnapshot())
	}
	for _, bad := range []*sigv1.PinSnapshotRequest{{Name: ""}, {Name: "ctr:a/b"}, {Name: "ctr:x", Snapshot: -1}, {Name: "ctr:x", Snapshot: 1 << 40}} {
		_, err := trainer.PinSnapshot(ctx, bad)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("pin %v: %v, want InvalidArgument", bad, err)
		}
	}
	if _, err := trainer.PinSnapshot(ctx, &sigv1.PinSnapshotRequest{Name: "cvr:epoch-1"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a ctr trainer pinning cvr's name: %v, want PermissionDenied", err)
	}
	if _, err := ctr.PinSnapshot(ctx, &sigv1.PinSnapshotRequest{Name: "ctr:x"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a client pinning: %v, want PermissionDenied", err)
	}

	b0, b1 := blocks[0].ID, blocks[1].ID
	settle := func(versions int) *sigv1.ReadSolution {
		t.Helper()
		// sigd follows the catalog's versions every 250 ms.
		waitFor(t, 10*time.Second, fmt.Sprintf("sigd to follow %d versions", versions), func() bool {
			return metricValue(t, srv, "sig_block_versions_total") >= float64(versions)
		})
		return sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	}
	// A label update (a conversion arriving late): no component reads it,
	// nothing is recomputed.
	produceUpdate(ctx, t, w, srv, b0, 3, "conversion", 1, 2)
	sol := settle(1)
	if n := total(runs.snapshot()); n != 6 {
		t.Fatalf("after a label update %d memo tasks ran in all, want the 6 of before", n)
	}
	if got := metricValue(t, srv, "sig_version_memo_tasks_total"); got != 0 {
		t.Fatalf("a label update made %v memo tasks", got)
	}
	checkVersions(t, sol, b0, 2, map[string]int64{"qid": 1, "price": 1, "adv": 1})

	// A bid price update: exactly the price bucket of block 0.
	produceUpdate(ctx, t, w, srv, b0, 5, "bid_price", 7.5, 3)
	sol = settle(2)
	got := runs.snapshot()
	price := sigdtest.InputKey(t, sol, "price")
	if n := total(got); n != 7 || got[workers.TaskID{Component: price, Block: blockref.NewMemo(b0, 3)}] != 1 {
		t.Fatalf("after a bid price update: runs %v; want one more, price over %s", got, blockref.NewMemo(b0, 3).String())
	}
	if got := metricValue(t, srv, "sig_version_memo_tasks_total"); got != 1 {
		t.Fatalf("the bid price update made %v memo tasks, want 1", got)
	}
	checkVersions(t, sol, b0, 3, map[string]int64{"qid": 1, "price": 3, "adv": 1})
	// A reader's report of the new entry is checked against the version it
	// was computed from: sound, not recomputed.
	rep, err := srv.SIG(t, "reader").ReportCorruptMemo(ctx, &sigv1.ReportCorruptMemoRequest{ComponentKey: price.String(),
		BlockId: blockref.NewMemo(b0, 3).String(), Detail: "test"})
	if err != nil || rep.GetCorrupt() || rep.GetState() != sigv1.BlockState_BLOCK_STATE_READY {
		t.Fatalf("report of price over %s: %v, %v; want sound and ready", blockref.NewMemo(b0, 3).String(), rep, err)
	}

	// SIG and LIG stream identical bytes for every unit at version 3, and
	// block 0's differ from version 1's (its price changed).
	now := unitBytes(ctx, t, rs, sol, false)
	for id, b := range unitBytes(ctx, t, rs, sol, true) {
		if !bytes.Equal(b, now[id]) || len(b) == 0 {
			t.Fatalf("block %s at version 3: SIG and LIG bytes differ", id)
		}
	}
	if bytes.Equal(now[b0], before[b0]) || !bytes.Equal(now[b1], before[b1]) {
		t.Fatal("version 3 of block 0 reads as version 1, or block 1 changed")
	}
	// At the pinned snapshot the solution names version 1 and its units
	// serve the bytes they served before the changes, both ways.
	old, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p", Snapshot: pin.GetSnapshot()})
	if err != nil {
		t.Fatal(err)
	}
	checkVersions(t, old, b0, 1, map[string]int64{"qid": 1, "price": 1, "adv": 1})
	for _, lig := range []bool{false, true} {
		for id, b := range unitBytes(ctx, t, rs, old, lig) {
			if !bytes.Equal(b, before[id]) {
				t.Fatalf("block %s at the pinned snapshot (LIG %v): not the bytes read before the changes", id, lig)
			}
		}
	}
	if _, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p", Snapshot: 1 << 40}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a snapshot after the current one: %v, want InvalidArgument", err)
	}

	// A deletion (an event flagged as spam) changes block 1's row set, so
	// every column: each component is recomputed over version 2, and SIG
	// and LIG still stream identical bytes (the memo objects are
	// row-aligned with the version).
	produceDelete(ctx, t, w, srv, b1, 7, 2)
	sol = settle(3)
	got = runs.snapshot()
	for _, in := range []string{"qid", "price", "adv"} {
		if got[workers.TaskID{Component: sigdtest.InputKey(t, sol, in), Block: blockref.NewMemo(b1, 2)}] != 1 {
			t.Fatalf("after a deletion: runs %v; want %s over %s", got, in, blockref.NewMemo(b1, 2).String())
		}
	}
	if n := total(got); n != 10 {
		t.Fatalf("after a deletion %d memo tasks ran in all, want 10", n)
	}
	checkVersions(t, sol, b1, 2, map[string]int64{"qid": 2, "price": 2, "adv": 2})
	now = unitBytes(ctx, t, rs, sol, false)
	for id, b := range unitBytes(ctx, t, rs, sol, true) {
		if !bytes.Equal(b, now[id]) || len(b) == 0 {
			t.Fatalf("block %s after the deletion: SIG and LIG bytes differ", id)
		}
	}
	if m, err := srv.Catalog().Get("ads", b1); err != nil || m.Rows != blocks[1].Rows-1 {
		t.Fatalf("block 1 after the deletion: %+v, %v", m, err)
	}

	// GC with the pin: version 2 (seen by nobody) goes; its entries were
	// version 1's, which the pin keeps.
	exists := func(key string) bool {
		_, err := srv.Store().Stat(ctx, key)
		return err == nil
	}
	oldPrice := memoOf(t, srv, price, b0).Object // its pack (issue 28)
	qid := sigdtest.InputKey(t, sol, "qid")
	qid0, qid1 := memoOf(t, srv, qid, b0).Object, memoOf(t, srv, qid, b1).Object
	collect := func() versions.GCResult {
		t.Helper()
		r, err := srv.Versions().Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := collect(); r.Versions != 1 || r.MemoEntries != 0 || r.Objects != 1 || exists(block.RawKey("ads", blockref.New(b0, 2))) {
		t.Fatalf("GC with the pin: %+v", r)
	}
	if !exists(blocks[0].Key) || !exists(oldPrice) {
		t.Fatal("GC removed what the pinned snapshot reads")
	}
	if _, err := trainer.UnpinSnapshot(ctx, &sigv1.UnpinSnapshotRequest{Name: "ctr:epoch-1"}); err != nil {
		t.Fatal(err)
	}
	// The periodic GC, triggered: version 1 of both blocks goes, with
	// price's version 1 entry of block 0 (qid's and adv's are version 3's
	// too and stay) and every version 1 entry of block 1 (its rows
	// changed), and their objects.
	gc <- struct{}{}
	waitFor(t, 10*time.Second, "the triggered GC", func() bool { return metricValue(t, srv, "sig_version_gc_versions_total") == 3 })
	if exists(blocks[0].Key) || exists(oldPrice) || exists(blocks[1].Key) || exists(qid1) ||
		!exists(qid0) || metricValue(t, srv, "sig_version_gc_memo_entries_total") != 4 {
		t.Fatal("GC without a pin: version 1 of a block or an entry only it had survived, or qid's entry of block 0 went")
	}
	sol, err = ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p"})
	if err != nil || !sol.GetComplete() {
		t.Fatalf("after GC: %v, %v", sol, err)
	}
	for id, b := range unitBytes(ctx, t, rs, sol, false) {
		if !bytes.Equal(b, now[id]) {
			t.Fatalf("block %s after GC: not the bytes of the current versions", id)
		}
	}
	if n := total(runs.snapshot()); n != 10 {
		t.Fatalf("%d memo tasks ran in all, want 10", n)
	}
}

// checkVersions checks that sol names block id at version v and each
// input's memo entry of it at the given input version.
func checkVersions(t *testing.T, sol *sigv1.ReadSolution, id string, v int64, inputs map[string]int64) {
	t.Helper()
	for _, rb := range sol.GetRawBlocks() {
		if rb.GetBlockId() == id && (rb.GetVersion() != v || rb.GetRawObject() != block.RawKey("ads", blockref.New(id, v))) {
			t.Fatalf("snapshot %d: raw block %s at version %d (%s), want %d", sol.GetSnapshot(), id, rb.GetVersion(), rb.GetRawObject(), v)
		}
	}
	for _, in := range sol.GetInputs() {
		for _, b := range in.GetBlocks() {
			if b.GetBlockId() != id {
				continue
			}
			k := sigdtest.InputKey(t, sol, in.GetInput())
			// Its column of a pack of the block (issue 28).
			_, r, ok := block.ParsePackKey(b.GetMemoObject())
			if want := inputs[in.GetInput()]; b.GetVersion() != want || !ok || r.ID() != id || b.GetMemoColumn() != block.MemberColumn(k) {
				t.Fatalf("snapshot %d: input %s reads %s (input version %d), want input version %d", sol.GetSnapshot(), in.GetInput(), b.GetMemoObject(), b.GetVersion(), want)
			}
		}
	}
}

func total(m map[workers.TaskID]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// metricValue is a counter or gauge of srv's registry without labels.
func metricValue(t *testing.T, srv *sigdtest.Server, name string) float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestWatchFollowsVersions: a watch of a solution that is not complete yet
// (the workers are held) sends a fresh solution as soon as a new version
// of one of its blocks makes an entry of another input version, rather
// than at its next periodic re-read, and completes at that version.
func TestWatchFollowsVersions(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 4})
	gate, wrap := newGate()
	gate.close()
	// The version is committed here, not by sigd's ingestion: sigd follows
	// the catalog, whoever commits.
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WrapRunner: wrap})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, versionsGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	st, err := ctr.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: "ctr", Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || first.GetSolution().GetComplete() {
		t.Fatalf("first update %v, %v; want the pending solution", first, err)
	}
	// Version 2 of block 0 with a new bid price column (same values: what
	// the test follows is the version).
	b0 := w.Blocks[0]
	writeVersion(ctx, t, srv.Store(), srv.Catalog(), b0, "bid_price")
	got := make(chan *sigv1.ReadSolution, 16)
	go func() {
		for {
			up, err := st.Recv()
			if err != nil {
				close(got)
				return
			}
			if up.GetSolution() != nil {
				got <- up.GetSolution()
			}
		}
	}()
	timeout := time.After(5 * time.Second) // the periodic re-read is every 10 s
	for named := false; !named; {
		select {
		case sol, ok := <-got:
			if !ok {
				t.Fatal("watch ended")
			}
			for _, rb := range sol.GetRawBlocks() {
				named = named || (rb.GetBlockId() == b0.ID && rb.GetVersion() == 2)
			}
		case <-timeout:
			t.Fatal("the watch did not send a solution naming version 2 within 5 s")
		}
	}
	gate.release()
	var last *sigv1.ReadSolution
	for sol := range got {
		last = sol
	}
	if !last.GetComplete() {
		t.Fatalf("watch ended at %v", last)
	}
	checkVersions(t, last, b0.ID, 2, map[string]int64{"qid": 1, "price": 2, "adv": 1})
}

// TestVersionCommittedWhileDown: a block version catalogued while sigd is
// not running (a crash between a commit and its invalidation) is followed
// when sigd starts: its first pass, from the position it stopped at, makes
// the entry the version needs, and the solution completes at it.
func TestVersionCommittedWhileDown(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 6})
	dir := t.TempDir()
	w.Catalog(t, dir)
	srv := sigdtest.StartIn(t, w, dir, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, versionsGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	srv.Stop(t)

	cat, err := catalog.Open(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	writeVersion(ctx, t, w.Store, cat, w.Blocks[1], "advertiser_id")
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}
	srv = sigdtest.StartIn(t, w, dir, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	waitFor(t, 10*time.Second, "sigd to follow the version", func() bool {
		return metricValue(t, srv, "sig_version_memo_tasks_total") == 1
	})
	sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	checkVersions(t, sol, w.Blocks[1].ID, 2, map[string]int64{"qid": 1, "price": 1, "adv": 2})
}

// TestEvictedStaysEvictedAcrossRestart (issue 26): an operator evicts a
// component whose entries a block version made; sigd restarts and follows
// the catalog from where it stopped, so none of its entries is re-created
// (before, every start followed every versioned block again and made the
// evicted component's entry of the version anew, and counted the version
// again). A version catalogued after the restart is followed, once.
func TestEvictedStaysEvictedAcrossRestart(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 8})
	dir := t.TempDir()
	w.Catalog(t, dir)
	cfg := sigd.Config{WorkersMin: 1, WorkersMax: 1}
	srv := sigdtest.StartIn(t, w, dir, cfg, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, versionsGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	price, qid := sigdtest.InputKey(t, sol, "price"), sigdtest.InputKey(t, sol, "qid")
	b0, b1 := w.Blocks[0].ID, w.Blocks[1].ID

	// A bid price change to block 0 makes price's entry of version 2.
	writeVersion(ctx, t, srv.Store(), srv.Catalog(), w.Blocks[0], "bid_price")
	waitFor(t, 10*time.Second, "sigd to follow the version", func() bool {
		return metricValue(t, srv, "sig_version_memo_tasks_total") == 1
	})
	sol = sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	checkVersions(t, sol, b0, 2, map[string]int64{"qid": 1, "price": 2, "adv": 1})

	// The operator evicts price: its entries go, its pipeline stays.
	if _, err := srv.SIG(t, "operator").Evict(ctx, &sigv1.EvictRequest{
		Target: &sigv1.EvictRequest_NodeKey{NodeKey: price.String()}, Reason: "bucket boundaries bug"}); err != nil {
		t.Fatal(err)
	}
	entries := func(srv *sigdtest.Server) []blockref.Memo {
		t.Helper()
		es, err := srv.Frontend().Cache().Memos(price)
		if err != nil {
			t.Fatal(err)
		}
		var out []blockref.Memo
		for ref := range es {
			out = append(out, ref)
		}
		return out
	}
	if es := entries(srv); len(es) != 0 {
		t.Fatalf("after the eviction price has entries %v", es)
	}

	srv.Stop(t)
	srv = sigdtest.StartIn(t, w, dir, cfg, sigd.Options{})
	// A query change to block 1 after the restart (qid reads it, price
	// does not): once qid's entry of it exists, sigd has followed every
	// version catalogued before it.
	writeVersion(ctx, t, srv.Store(), srv.Catalog(), w.Blocks[1], "query")
	waitFor(t, 10*time.Second, "sigd to follow the version made after the restart", func() bool {
		_, err := srv.Frontend().Cache().Memo(qid, blockref.NewMemo(b1, 2))
		return err == nil
	})
	if es := entries(srv); len(es) != 0 {
		t.Fatalf("after a restart the evicted component has entries %v again", es)
	}
	if n := metricValue(t, srv, "sig_block_versions_total"); n != 1 {
		t.Fatalf("sigd followed %v block versions since the restart, want 1 (the one made after it)", n)
	}
}
