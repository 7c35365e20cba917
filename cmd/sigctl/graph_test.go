package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

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
