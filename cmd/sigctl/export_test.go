package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// exportGraph has an input of every type a memo object holds:
// list<int64>, list<string>, string and float64.
const exportGraph = `let q = unigrams(lower(col("query")))
input q_ids = hash(q, buckets=1000)
input title = unigrams(col("ad_title"))
input cat = fill_missing(col("ad_category"), default="none")
input price = fill_missing(col("bid_price"), default=0)
`

// TestExport: sigctl export writes a pipeline's inputs (against a real
// sigd, MinIO and a reader) and a memo object as Parquet and as Arrow IPC
// files, and Arrow Go's own Parquet and IPC readers read back exactly the
// values the Go client reads from the readers for the same units (the
// pipeline) and block.ReadBlock reads from the object (the memo object):
// every column, every row, nulls included. The pipeline is exported both
// through the readers (--readers) and by a reader in sigctl's process.
// With SIG_EXPORT_INTEROP_DIR set (python/tests/test_formats_interop.py
// sets it), the files, the memo object's bytes and the Go side's values as
// JSON are left there for pyarrow to check.
func TestExport(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 700, Seed: 5})
	// Memo objects LZ4-compressed over uncompressed raw blocks: pyarrow
	// reads their compressed segments (test_formats_interop.py).
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1, SegmentCompression: "lz4"}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "exp", 5, exportGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "exp")

	rs, err := reader.NewServer(reader.Config{Store: w.Store})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := rs.GRPCServer()
	go gs.Serve(lis)
	defer gs.Stop()

	// The Go client's values: every unit of the solution, in event order.
	units, err := reader.UnitsFromSolution(sol, reader.UnitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{lis.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var recs []arrow.Record
	firstUnit := 0 // records of the first unit
	for ui, u := range units {
		if ui == 1 {
			firstUnit = len(recs)
		}
		for rec, err := range rc.Read(ctx, u) {
			if err != nil {
				t.Fatal(err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
	}
	want := array.NewTableFromRecords(recs[0].Schema(), recs)
	defer want.Release()
	if want.NumRows() != 1400 || want.NumCols() != 7 { // event_id, click, conversion, the four inputs
		t.Fatalf("the readers sent %d rows x %d columns, want 1400 x 7", want.NumRows(), want.NumCols())
	}

	dir := t.TempDir()
	conn := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["ctr"]}
	export := func(args ...string) {
		t.Helper()
		code, out, errs := sigctl(t, append(append([]string{"export"}, conn...), args...)...)
		if code != 0 || !strings.HasPrefix(out, "wrote ") {
			t.Fatalf("export %q: exit %d: %s%s", args, code, out, errs)
		}
	}
	pipeParquet, pipeArrow := filepath.Join(dir, "pipeline.parquet"), filepath.Join(dir, "pipeline.arrow")
	export(append([]string{"--client", "ctr", "--pipeline", "exp", "--out", pipeParquet}, w.S3Args()...)...)
	export("--client", "ctr", "--pipeline", "exp", "--readers", lis.Addr().String(), "--out", pipeArrow)
	checkTable(t, pipeParquet, readParquet(t, pipeParquet), want)
	checkTable(t, pipeArrow, readArrow(t, pipeArrow), want)

	// --range: the second block's window only, its rows as the readers
	// sent them.
	r := w.Range(1, 2)
	second := array.NewTableFromRecords(recs[0].Schema(), recs[firstUnit:])
	defer second.Release()
	rangeFile := filepath.Join(dir, "second.arrow")
	export("--client", "ctr", "--pipeline", "exp", "--readers", lis.Addr().String(), "--out", rangeFile,
		"--range", fmt.Sprintf("%d:%d", r.StartMicros, r.EndMicros))
	checkTable(t, rangeFile, readArrow(t, rangeFile), second)

	// --range cutting both blocks (issue 29): from the middle of the
	// first block's events to the middle of the second's, exactly the
	// rows whose event_time is in [FROM, TO), through the readers and by
	// the reader in sigctl alike: the Go client's rows of those events.
	ev0, ev1 := sol.RawBlocks[0].Events, sol.RawBlocks[1].Events
	cut := fmt.Sprintf("%d:%d", (ev0.StartMicros+ev0.EndMicros)/2, (ev1.StartMicros+ev1.EndMicros)/2)
	inRange := map[int64]bool{}
	for _, b := range w.Blocks {
		_, raw, err := block.ReadBlock(ctx, w.Store, b.Key)
		if err != nil {
			t.Fatal(err)
		}
		ids := raw.Column(raw.Schema().FieldIndices("event_id")[0]).(*array.Int64)
		times := raw.Column(raw.Schema().FieldIndices("event_time")[0]).(*array.Int64)
		for r := range int(raw.NumRows()) {
			if v := times.Value(r); v >= (ev0.StartMicros+ev0.EndMicros)/2 && v < (ev1.StartMicros+ev1.EndMicros)/2 {
				inRange[ids.Value(r)] = true
			}
		}
		raw.Release()
	}
	var cutRecs []arrow.Record
	for _, rec := range recs {
		ids := rec.Column(0).(*array.Int64)
		for r := range int(rec.NumRows()) {
			if inRange[ids.Value(r)] {
				cutRecs = append(cutRecs, rec.NewSlice(int64(r), int64(r)+1))
			}
		}
	}
	if len(cutRecs) == 0 || len(cutRecs) >= 1400 || len(cutRecs) != len(inRange) {
		t.Fatalf("range %s: %d of the Go client's rows, %d events; want some rows of both blocks, not all", cut, len(cutRecs), len(inRange))
	}
	cutWant := array.NewTableFromRecords(recs[0].Schema(), cutRecs)
	defer cutWant.Release()
	for _, r := range cutRecs {
		r.Release()
	}
	cutReaders, cutLocal := filepath.Join(dir, "cut.arrow"), filepath.Join(dir, "cut.parquet")
	export("--client", "ctr", "--pipeline", "exp", "--readers", lis.Addr().String(), "--out", cutReaders, "--range", cut)
	export(append([]string{"--client", "ctr", "--pipeline", "exp", "--out", cutLocal, "--range", cut}, w.S3Args()...)...)
	checkTable(t, cutReaders, readArrow(t, cutReaders), cutWant)
	checkTable(t, cutLocal, readParquet(t, cutLocal), cutWant)

	// A memo object of list<string> values: the pack its worker wrote
	// (issue 28), with the input's column.
	memoKey, memoColumn := sol.Inputs[1].Blocks[1].MemoObject, sol.Inputs[1].Blocks[1].MemoColumn
	memoMeta, memoRec, err := block.ReadBlock(ctx, w.Store, memoKey)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := memoMeta.Column(memoColumn); !memoMeta.Pack || c.Compression != block.LZ4Frame {
		t.Fatalf("memo object %s (pack %t): column %s compression %q, want a pack's lz4_frame column", memoKey, memoMeta.Pack, memoColumn, c.Compression)
	}
	defer memoRec.Release()
	memoWant := array.NewTableFromRecords(memoRec.Schema(), []arrow.Record{memoRec})
	defer memoWant.Release()
	memoParquet, memoArrow := filepath.Join(dir, "memo.parquet"), filepath.Join(dir, "memo.arrow")
	export(append([]string{"--object", memoKey, "--out", memoParquet}, w.S3Args()...)...)
	export(append([]string{"--object", memoKey, "--out", memoArrow}, w.S3Args()...)...)
	checkTable(t, memoParquet, readParquet(t, memoParquet), memoWant)
	checkTable(t, memoArrow, readArrow(t, memoArrow), memoWant)

	// A pack of two members: whole, every member's column; with
	// --column, one member's, as block.ReadColumns reads it.
	var members []block.PackMember
	for _, in := range sol.Inputs[1:3] {
		k, err := canon.ParseKey(in.ComponentKey)
		if err != nil {
			t.Fatal(err)
		}
		b := in.Blocks[1]
		m, err := block.ReadFooter(ctx, w.Store, b.MemoObject)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := block.ReadColumns(ctx, w.Store, m, []string{b.MemoColumn})
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		members = append(members, block.PackMember{Component: k, Block: blockref.ParseMemo(b.BlockId), Value: rec.Column(1)})
	}
	two, _, err := block.WritePacks(ctx, w.Store, w.Blocks[1], memoRec.Column(0), members, block.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, twoRec, err := block.ReadBlock(ctx, w.Store, two[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	defer twoRec.Release()
	twoWant := array.NewTableFromRecords(twoRec.Schema(), []arrow.Record{twoRec})
	defer twoWant.Release()
	oneRec, err := block.ReadColumns(ctx, w.Store, two[0], []string{block.MemberColumn(members[1].Component)})
	if err != nil {
		t.Fatal(err)
	}
	defer oneRec.Release()
	oneWant := array.NewTableFromRecords(oneRec.Schema(), []arrow.Record{oneRec})
	defer oneWant.Release()
	packWhole, packOne := filepath.Join(dir, "pack.arrow"), filepath.Join(dir, "member.parquet")
	export(append([]string{"--object", two[0].Key, "--out", packWhole}, w.S3Args()...)...)
	export(append([]string{"--object", two[0].Key, "--column", block.MemberColumn(members[1].Component), "--out", packOne}, w.S3Args()...)...)
	if twoWant.NumCols() != 3 || oneWant.NumCols() != 2 {
		t.Fatalf("pack of two members read as %d columns, one member as %d", twoWant.NumCols(), oneWant.NumCols())
	}
	checkTable(t, packWhole, readArrow(t, packWhole), twoWant)
	checkTable(t, packOne, readParquet(t, packOne), oneWant)

	// A memo object stored narrow (issue 28): q_ids hashes into 1000
	// buckets, list<int64> stored as list<int16>; read and exported as
	// list<int64>.
	var narrowKey, narrowCol string
	for _, in := range sol.Inputs {
		if in.Input == "q_ids" {
			narrowKey, narrowCol = in.Blocks[1].MemoObject, in.Blocks[1].MemoColumn
		}
	}
	narrowMeta, narrowRec, err := block.ReadBlock(ctx, w.Store, narrowKey)
	if err != nil {
		t.Fatal(err)
	}
	defer narrowRec.Release()
	if c, _ := narrowMeta.Column(narrowCol); c.Type != "list<int64>" || c.Stored != "list<int16>" {
		t.Fatalf("q_ids memo value: type %s stored as %q, want list<int64> stored as list<int16>", c.Type, c.Stored)
	}
	narrowWant := array.NewTableFromRecords(narrowRec.Schema(), []arrow.Record{narrowRec})
	defer narrowWant.Release()
	// Its column by name: a block-batched worker's pack holds the
	// block's other columns too.
	narrowVal := narrowRec.Column(narrowRec.Schema().FieldIndices(narrowCol)[0])
	if !arrow.TypeEqual(narrowVal.DataType(), arrow.ListOf(arrow.PrimitiveTypes.Int64)) {
		t.Fatalf("q_ids memo value read as %s", narrowVal.DataType())
	}
	narrowArrow := filepath.Join(dir, "memo_narrow.arrow")
	export(append([]string{"--object", narrowKey, "--out", narrowArrow}, w.S3Args()...)...)
	checkTable(t, narrowArrow, readArrow(t, narrowArrow), narrowWant)

	for _, args := range [][]string{
		append([]string{"--object", two[0].Key, "--column", "value", "--out", "x.arrow"}, w.S3Args()...), // no such column
		{"--client", "ctr", "--pipeline", "exp", "--column", "value", "--out", "x.arrow"},                // --column without --object
		{"--client", "ctr", "--pipeline", "exp"},                                                         // no --out
		{"--client", "ctr", "--pipeline", "exp", "--out", "x.csv"},                                       // no format
		{"--object", memoKey, "--pipeline", "exp", "--out", "x.arrow"},                                   // both
		{"--client", "ctr", "--pipeline", "exp", "--out", "x.arrow", "--mode", "sig"},                    // bad mode
	} {
		if code, _, errs := sigctl(t, append(append([]string{"export"}, conn...), args...)...); code != 2 {
			t.Errorf("export %q: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, _, errs := sigctl(t, "export", "--sigd", srv.Addr(), "--token", srv.Tokens["cvr"], "--client", "ctr",
		"--pipeline", "exp", "--out", filepath.Join(dir, "x.arrow")); code != 1 || !strings.Contains(errs, "PermissionDenied") {
		t.Errorf("another client's token: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.arrow")); !os.IsNotExist(err) {
		t.Errorf("a failed export left %s (%v)", "x.arrow", err)
	}

	if out := os.Getenv("SIG_EXPORT_INTEROP_DIR"); out != "" {
		writeInterop(t, ctx, w, out, map[string]string{"pipeline.parquet": pipeParquet, "pipeline.arrow": pipeArrow,
			"memo.parquet": memoParquet, "memo.arrow": memoArrow}, want, memoWant, memoKey, narrowWant, narrowKey)
	}
}

func readParquet(t *testing.T, path string) arrow.Table {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tbl
}

func readArrow(t *testing.T, path string) arrow.Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer r.Close()
	var recs []arrow.Record
	for i := range r.NumRecords() {
		rec, err := r.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	return array.NewTableFromRecords(r.Schema(), recs)
}

// checkTable compares got with want column by column: names, types and
// every value (chunking aside).
func checkTable(t *testing.T, name string, got, want arrow.Table) {
	t.Helper()
	defer got.Release()
	if got.NumRows() != want.NumRows() || got.NumCols() != want.NumCols() {
		t.Fatalf("%s: %d rows x %d columns, want %d x %d", name, got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	for i := range int(want.NumCols()) {
		g, wc := got.Column(i), want.Column(i)
		if g.Name() != wc.Name() || !arrow.TypeEqual(g.DataType(), wc.DataType()) {
			t.Errorf("%s: column %d is %s %s, want %s %s", name, i, g.Name(), g.DataType(), wc.Name(), wc.DataType())
			continue
		}
		ga, err := array.Concatenate(g.Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		wa, err := array.Concatenate(wc.Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(ga, wa) {
			t.Errorf("%s: column %s differs", name, wc.Name())
		}
		ga.Release()
		wa.Release()
	}
}

// writeInterop leaves in dir what python/tests/test_formats_interop.py
// checks with pyarrow: the exported files, the memo objects as stored (one
// with a list<string> value, one with a list<int64> value stored narrow),
// and expected.json, the Go side's values ({"pipeline": {column:
// [values]}, "memo": ..., "memo_key": key, "memo_narrow": ...}).
func writeInterop(t *testing.T, ctx context.Context, w *sigdtest.Warehouse, dir string, files map[string]string,
	pipeline, memo arrow.Table, memoKey string, narrow arrow.Table, narrowKey string) {
	t.Helper()
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, key := range map[string]string{"memo_object.bin": memoKey, "memo_narrow_object.bin": narrowKey} {
		obj, _, err := w.Store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), obj, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	values := func(tbl arrow.Table) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for i := range int(tbl.NumCols()) {
			c := tbl.Column(i)
			a, err := array.Concatenate(c.Data().Chunks(), memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			b, err := a.MarshalJSON()
			a.Release()
			if err != nil {
				t.Fatal(err)
			}
			m[c.Name()] = b
		}
		return m
	}
	b, err := json.Marshal(map[string]any{"pipeline": values(pipeline), "memo": values(memo), "memo_key": memoKey,
		"pipeline_columns": columnNames(pipeline), "memo_columns": columnNames(memo),
		"memo_narrow": values(narrow), "memo_narrow_key": narrowKey, "memo_narrow_columns": columnNames(narrow)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func columnNames(tbl arrow.Table) []string {
	var names []string
	for i := range int(tbl.NumCols()) {
		names = append(names, tbl.Column(i).Name())
	}
	return names
}
