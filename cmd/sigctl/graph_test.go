package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/rowref"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/gen"
)

func runSigctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = runMain(args, &o, &e)
	return code, o.String(), e.String()
}

func fleetFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../examples/fleet/*.sig")
	if err != nil || len(files) < 5 {
		t.Fatalf("example fleet: %v %v", files, err)
	}
	return files
}

func TestCanonJSONIsOneObjectWithTheKeys(t *testing.T) {
	for _, f := range fleetFiles(t) {
		code, out, errOut := runSigctl(t, "canon", f, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", f, code, errOut)
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		var got CanonOutput
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v\n%s", f, err, out)
		}
		if dec.More() {
			t.Fatalf("%s: more than one JSON value", f)
		}
		c, err := loadCanonical(f, transform.AdsSchema())
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Inputs) != len(c.Components) {
			t.Fatalf("%s: %d inputs, want %d", f, len(got.Inputs), len(c.Components))
		}
		for _, comp := range c.Components {
			in, ok := got.Inputs[comp.Input]
			if !ok || in.Key != comp.Key.String() || in.Nodes != len(comp.Nodes) || strings.Join(in.Columns, ",") != strings.Join(comp.Columns, ",") {
				t.Errorf("%s: input %s: %+v, want key %s nodes %d columns %v", f, comp.Input, in, comp.Key, len(comp.Nodes), comp.Columns)
			}
			if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(in.Key) {
				t.Errorf("key %q is not 64 hex digits", in.Key)
			}
		}
	}
}

func TestFmtOutputCanonicalizesToTheSameKeys(t *testing.T) {
	for _, f := range fleetFiles(t) {
		code, out, errOut := runSigctl(t, "fmt", f)
		if code != 0 {
			t.Fatalf("%s: %s", f, errOut)
		}
		tmp := filepath.Join(t.TempDir(), "fmt.sig")
		if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := loadCanonical(f, transform.AdsSchema())
		if err != nil {
			t.Fatal(err)
		}
		b, err := loadCanonical(tmp, transform.AdsSchema())
		if err != nil {
			t.Fatalf("fmt output does not parse: %v\n%s", err, out)
		}
		for _, comp := range a.Components {
			bc, ok := b.Component(comp.Input)
			if !ok || bc.Key != comp.Key {
				t.Errorf("%s: input %s changed key through fmt", f, comp.Input)
			}
		}
	}
}

func TestBadInputExitCodesAndPositions(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"unknown_op.sig":     "input x = lowr(col(\"query\"))\n",
		"unknown_column.sig": "input x = lower(col(\"qury\"))\n",
		"type.sig":           "input x = unigrams(col(\"bid_price\"))\n",
		"syntax.sig":         "input x = lower(col(\"query\")\n",
		"cycle.sig":          "let a = lower(b)\nlet b = lower(a)\ninput x = a\n",
	}
	for name, src := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"canon", "fmt"} {
			code, out, errOut := runSigctl(t, cmd, p)
			if code != 1 || out != "" || !regexp.MustCompile(regexp.QuoteMeta(p)+`:\d+:\d+: `).MatchString(errOut) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 1 and FILE:line:col", cmd, name, code, out, errOut)
			}
		}
	}
	if code, _, _ := runSigctl(t, "canon"); code != 2 {
		t.Errorf("canon without a file: exit %d, want 2", code)
	}
	if code, _, errOut := runSigctl(t, "canon", filepath.Join(dir, "missing.sig")); code != 1 || !strings.Contains(errOut, "missing.sig") {
		t.Errorf("missing file: exit %d %q", code, errOut)
	}
	big := filepath.Join(dir, "big.sig")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# padding\n"), 200_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runSigctl(t, "canon", big); code != 1 || !strings.Contains(errOut, "limit") {
		t.Errorf("oversized file: exit %d %q", code, errOut)
	}
}

// TestRunMatchesRowReference checks `sigctl run` (local input generation,
// which runs the canonical graphs on Arrow kernels) cell by cell against an
// independent row-at-a-time evaluation of the graphs as written, with
// internal/rowref.
func TestRunMatchesRowReference(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.arrow")
	if err := gen.New(gen.Config{Seed: 7}).WriteFile(raw, 3000); err != nil {
		t.Fatal(err)
	}
	rawRec := readAll(t, raw)
	for _, f := range fleetFiles(t) {
		out := filepath.Join(dir, filepath.Base(f)+".arrow")
		code, _, errOut := runSigctl(t, "run", f, "--raw", raw, "--out", out)
		if code != 0 {
			t.Fatalf("run %s: %s", f, errOut)
		}
		got := readAll(t, out)
		src, _ := os.ReadFile(f)
		g, _, err := transform.ParseAndCheck(src, f, transform.AdsSchema(), transform.Default(), transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if d := rowref.Diff(rowref.FromArrow(rawRec[transform.ColEventID]), rowref.FromArrow(got[transform.ColEventID])); d != "" {
			t.Fatalf("%s: event_id: %s", f, d)
		}
		for _, in := range g.Inputs {
			want := evalRef(t, g, in.Node, rawRec)
			col, ok := got[in.Name]
			if !ok {
				t.Fatalf("%s: output has no column %s", f, in.Name)
			}
			if d := rowref.Diff(want, rowref.FromArrow(col)); d != "" {
				t.Errorf("%s: input %s: %s", f, in.Name, d)
			}
		}
	}
}

// readAll reads an Arrow IPC file and concatenates its batches per column.
func readAll(t *testing.T, path string) map[string]arrow.Array {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := ipc.NewFileReader(fh, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumRecords() != 1 {
		// The generator and `run` write one batch per input batch; the test
		// data is one batch.
		t.Fatalf("%s: %d batches, want 1", path, r.NumRecords())
	}
	rec, err := r.Record(0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]arrow.Array{}
	for i, fd := range rec.Schema().Fields() {
		c := rec.Column(i)
		c.Retain()
		out[fd.Name] = c
	}
	return out
}

// evalRef evaluates node n of g row by row with rowref.
func evalRef(t *testing.T, g *transform.Graph, n int, raw map[string]arrow.Array) rowref.Column {
	t.Helper()
	nd := &g.Nodes[n]
	param := func(name string) transform.Value { v, _ := nd.Param(name); return v }
	var in []rowref.Column
	for _, j := range nd.Inputs {
		in = append(in, evalRef(t, g, j, raw))
	}
	switch nd.Op {
	case "col":
		return rowref.FromArrow(raw[param("name").Str])
	case "lower":
		return rowref.Lower(in[0])
	case "strip_punct":
		return rowref.StripPunct(in[0])
	case "unigrams":
		return rowref.Unigrams(in[0])
	case "ngrams":
		return rowref.Ngrams(in[0], int(param("n").Int))
	case "intersect":
		return rowref.Intersect(in...)
	case "union":
		return rowref.Union(in...)
	case "concat":
		return rowref.Concat(in...)
	case "dedupe":
		return rowref.Dedupe(in[0])
	case "truncate":
		return rowref.Truncate(in[0], int(param("max").Int))
	case "hash":
		return rowref.Hash(in[0], param("buckets").Int, param("salt").Int)
	case "cross":
		c, err := rowref.Cross(in[0], in[1], param("buckets").Int)
		if err != nil {
			t.Fatal(err)
		}
		return c
	case "bucketize":
		return rowref.Bucketize(in[0], param("boundaries").Floats)
	case "log1p":
		return rowref.Log1p(in[0])
	case "clip":
		return rowref.Clip(in[0], param("lo").Float, param("hi").Float)
	case "fill_missing":
		v := param("default")
		var def any
		switch v.Kind {
		case transform.KindString:
			def = v.Str
		case transform.KindInt:
			def = v.Int
		default:
			def = v.Float
		}
		return rowref.FillMissing(in[0], def)
	case "length":
		return rowref.Length(in[0])
	}
	t.Fatalf("no reference for op %s", nd.Op)
	return rowref.Column{}
}

// TestRunForeignTypes runs `sigctl run` over raw files whose columns have
// Arrow types other than the schema's, as files written by other tools do:
// lossless integer types are converted (the output equals the run over the
// int64 file), every other type is refused with the file, the column and
// its type named, and nothing panics (event_id int32 panicked in
// array.NewRecord before transform.Conform).
func TestRunForeignTypes(t *testing.T) {
	dir := t.TempDir()
	graph := filepath.Join(dir, "g.sig")
	src := "input adv = hash(col(\"advertiser_id\"), buckets=1000)\ninput q = unigrams(lower(col(\"query\")))\n"
	if err := os.WriteFile(graph, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	recs := gen.New(gen.Config{Seed: 3}).Records(500, 500)
	base := recs[0]
	defer base.Release()
	ids := base.Column(base.Schema().FieldIndices(transform.ColEventID)[0]).(*array.Int64).Int64Values()
	advs := base.Column(base.Schema().FieldIndices("advertiser_id")[0]).(*array.Int64).Int64Values()

	want := filepath.Join(dir, "want.arrow")
	writeRaw(t, filepath.Join(dir, "raw.arrow"), base)
	if code, _, errOut := runSigctl(t, "run", graph, "--raw", filepath.Join(dir, "raw.arrow"), "--out", want); code != 0 {
		t.Fatalf("int64 file: %s", errOut)
	}
	wantCols := readAll(t, want)

	mem := memory.DefaultAllocator
	ints := func(b array.Builder, vals []int64, appendOne func(int64)) arrow.Array {
		for _, v := range vals {
			appendOne(v)
		}
		return b.NewArray()
	}
	int32s := func(vals []int64) arrow.Array {
		b := array.NewInt32Builder(mem)
		return ints(b, vals, func(v int64) { b.Append(int32(v)) })
	}
	uint64s := func(vals []int64, last uint64) arrow.Array {
		b := array.NewUint64Builder(mem)
		for _, v := range vals[:len(vals)-1] {
			b.Append(uint64(v))
		}
		b.Append(last)
		return b.NewArray()
	}
	float64s := func(vals []int64) arrow.Array {
		b := array.NewFloat64Builder(mem)
		return ints(b, vals, func(v int64) { b.Append(float64(v)) })
	}
	strs := func(vals []int64) arrow.Array {
		b := array.NewStringBuilder(mem)
		return ints(b, vals, func(v int64) { b.Append(fmt.Sprint(v)) })
	}
	withNull := func(vals []int64) arrow.Array {
		b := array.NewInt64Builder(mem)
		b.AppendNull()
		return ints(b, vals[1:], func(v int64) { b.Append(v) })
	}
	small := make([]int64, len(ids)) // event ids that fit int32
	for i := range small {
		small[i] = int64(i) * 7
	}
	cases := []struct {
		name    string
		replace map[string]arrow.Array // column -> foreign array; nil array drops the column
		twice   string                 // a column written twice
		err     string                 // "" if the run succeeds
	}{
		{name: "event_id int32", replace: map[string]arrow.Array{transform.ColEventID: int32s(small)}},
		{name: "event_id uint64 that fit", replace: map[string]arrow.Array{transform.ColEventID: uint64s(ids, 1<<63-1)}},
		{name: "advertiser_id int16", replace: map[string]arrow.Array{"advertiser_id": func() arrow.Array {
			b := array.NewInt16Builder(mem)
			return ints(b, advs, func(v int64) { b.Append(int16(v)) })
		}()}},
		{name: "event_id uint64 over int64", replace: map[string]arrow.Array{transform.ColEventID: uint64s(ids, 1<<63)},
			err: `column "event_id" (Arrow type uint64): value 9223372036854775808 at row 499 does not fit int64`},
		{name: "event_id float64", replace: map[string]arrow.Array{transform.ColEventID: float64s(ids)},
			err: `column "event_id" has Arrow type float64, want int64`},
		{name: "event_id utf8", replace: map[string]arrow.Array{transform.ColEventID: strs(ids)},
			err: `column "event_id" has Arrow type utf8, want int64`},
		{name: "advertiser_id float64", replace: map[string]arrow.Array{"advertiser_id": float64s(advs)},
			err: `column "advertiser_id" has Arrow type float64, want int64`},
		{name: "query int32", replace: map[string]arrow.Array{"query": int32s(advs)},
			err: `column "query" has Arrow type int32, want utf8`},
		{name: "event_id null", replace: map[string]arrow.Array{transform.ColEventID: withNull(ids)},
			err: `column "event_id" has 1 nulls`},
		{name: "event_id missing", replace: map[string]arrow.Array{transform.ColEventID: nil},
			err: `no column "event_id"`},
		{name: "event_id twice", twice: transform.ColEventID,
			err: `column "event_id" appears 2 times`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".arrow")
			out := raw + ".out"
			rec := replaceColumns(t, base, tc.replace, tc.twice)
			writeRaw(t, raw, rec)
			rec.Release()
			code, _, errOut := runSigctl(t, "run", graph, "--raw", raw, "--out", out)
			if tc.err != "" {
				if code != 1 || !strings.Contains(errOut, raw+": record batch 0: ") || !strings.Contains(errOut, tc.err) {
					t.Fatalf("exit %d, stderr %q; want exit 1 naming %s and %q", code, errOut, raw, tc.err)
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("output written after a refused file: %v", err)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			got := readAll(t, out)
			for name, w := range wantCols {
				g := got[name]
				if name == transform.ColEventID {
					if fa, ok := tc.replace[name]; ok {
						w = asInt64(t, fa)
					}
				}
				if g.DataType().ID() != w.DataType().ID() || !array.Equal(g, w) {
					t.Errorf("column %s: %s differs from the int64 file's %s", name, g.DataType(), w.DataType())
				}
			}
		})
	}
}

// replaceColumns returns rec with the columns in repl replaced (dropped if
// nil) and the column twice appended once more.
func replaceColumns(t testing.TB, rec arrow.Record, repl map[string]arrow.Array, twice string) arrow.Record {
	t.Helper()
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		c := rec.Column(i)
		if a, ok := repl[f.Name]; ok {
			if a == nil {
				continue
			}
			c, f.Type = a, a.DataType()
		}
		fields, cols = append(fields, f), append(cols, c)
		if f.Name == twice {
			fields, cols = append(fields, f), append(cols, c)
		}
	}
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// asInt64 is an integer array's values as int64s.
func asInt64(t *testing.T, a arrow.Array) arrow.Array {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := 0; i < a.Len(); i++ {
		switch a := a.(type) {
		case *array.Int32:
			b.Append(int64(a.Value(i)))
		case *array.Uint64:
			b.Append(int64(a.Value(i)))
		default:
			t.Fatalf("asInt64 of %s", a.DataType())
		}
	}
	return b.NewArray()
}

// writeRaw writes rec as a one-batch Arrow IPC file.
func writeRaw(t testing.TB, path string, rec arrow.Record) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err == nil {
		err = w.Write(rec)
	}
	if err == nil {
		err = w.Close()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzRunLocal runs local input generation over arbitrary bytes as the raw
// file. Nothing may panic: a file Arrow cannot read, or whose columns do
// not conform to the schema, is an error naming the file. Seeds: a valid
// file and its columns as foreign types.
//
//	go test ./cmd/sigctl -run XXX -fuzz FuzzRunLocal -fuzztime 60s -fuzzminimizetime 2s
func FuzzRunLocal(f *testing.F) {
	dir := f.TempDir()
	base := gen.New(gen.Config{Seed: 5}).Records(20, 20)[0]
	seed := func(rec arrow.Record) {
		p := filepath.Join(dir, "seed.arrow")
		writeRaw(f, p, rec)
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(base)
	for _, name := range []string{transform.ColEventID, "advertiser_id", "query"} {
		b := array.NewUint32Builder(memory.DefaultAllocator)
		for i := range base.NumRows() {
			b.Append(uint32(i))
		}
		rec := replaceColumns(f, base, map[string]arrow.Array{name: b.NewArray()}, "")
		seed(rec)
		rec.Release()
	}
	c, err := canon.Canonicalize(mustParse(f, "input adv = hash(col(\"advertiser_id\"), buckets=1000)\ninput q = unigrams(lower(col(\"query\")))\n"),
		transform.AdsSchema(), transform.Default(), transform.Limits{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		raw := filepath.Join(dir, "raw.arrow")
		if err := os.WriteFile(raw, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := RunLocal(c, transform.AdsSchema(), raw, filepath.Join(dir, "out.arrow")); err != nil && !strings.Contains(err.Error(), raw) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

func mustParse(t testing.TB, src string) *transform.Graph {
	t.Helper()
	g, _, err := transform.ParseAndCheck([]byte(src), "g.sig", transform.AdsSchema(), transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
