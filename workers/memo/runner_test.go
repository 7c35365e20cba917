package memo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// TestRunnerForeignRawBlock: a raw block object whose columns are not the
// schema's types (written by something other than SIG's ingestion) fails
// its task with an error naming the block, the column and both types; it
// neither panics in the worker nor writes a memo object. Before
// transform.Conform in Runner.Read, an event_id of float64 passed the
// graph's column check and panicked building the memo record.
func TestRunnerForeignRawBlock(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 50})
	ctx := context.Background()
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	base := w.Blocks[0]
	_, rec, err := block.ReadBlock(ctx, w.Store, base.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	floats := func(name string) arrow.Array { return blocktest.Float64s(rec, name) }
	strs := func(s string) arrow.Array { return blocktest.Strings(s, rec.NumRows()) }
	cases := []struct {
		name, column string
		col          arrow.Array
		want         string
	}{
		{"event_id float64", transform.ColEventID, floats(transform.ColEventID), `column "event_id" has Arrow type float64, want int64`},
		{"event_id utf8", transform.ColEventID, strs("x"), `column "event_id" has Arrow type utf8, want int64`},
		{"advertiser_id float64", "advertiser_id", floats("advertiser_id"), `column "advertiser_id" has Arrow type float64, want int64`},
	}
	r := &memo.Runner{Store: w.Store}
	before := packs(t, w.Store)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := blocktest.WithColumn(rec, tc.column, tc.col)
			defer bad.Release()
			tc.col.Release()
			id := base.ID + "-foreign" + string(rune('a'+i))
			meta := blocktest.Renamed(base, id)
			if _, err := block.Write(ctx, w.Store, meta, bad); err != nil {
				t.Fatal(err)
			}
			memoKey := "memo/test/" + id + ".arrow"
			task := workers.Task{ID: workers.TaskID{Component: canon.Key{'c'}, Block: blockref.ParseMemo(id)}, Spec: &sigv1.Task{
				ComponentKey: testKey.String(), BlockId: id, RawSource: "ads", RawObject: meta.Key, MemoObject: memoKey,
				CanonicalDsl: `input out = hash(col("advertiser_id"), buckets=100)`, Columns: []string{"advertiser_id"},
				SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}}
			_, err := r.Run(ctx, task)
			if err == nil || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want an error naming block %s and %q", err, id, tc.want)
			}
			if _, _, err := w.Store.Get(ctx, memoKey); err == nil || packs(t, w.Store) != before {
				t.Error("a memo object was written from a foreign raw block")
			}
		})
	}
}

// TestRunnerReportsOpCosts: a task's result carries the time each op class
// of its component took (the hash of a list apart from a scalar's), which
// sigd keeps for the insertion policy (issue 20).
func TestRunnerReportsOpCosts(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 2000})
	ctx := context.Background()
	schemaJSON, _ := json.Marshal(transform.AdsSchema())
	base := w.Blocks[0]
	r := &memo.Runner{Store: w.Store}
	res, err := r.Run(ctx, workers.Task{ID: workers.TaskID{Component: canon.Key{'c'}, Block: blockref.ParseMemo(base.ID)}, Spec: &sigv1.Task{
		ComponentKey: testKey.String(), BlockId: base.ID, RawSource: "ads", RawObject: base.Key, MemoObject: "memo/test/" + base.ID + ".arrow",
		CanonicalDsl: `input out = concat(hash(unigrams(lower(col("query"))), buckets=100), hash(col("advertiser_id"), buckets=7))`,
		Columns:      []string{"advertiser_id", "query"}, SchemaJson: string(schemaJSON), MemoGeneration: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"lower", "unigrams", "hash/list", "hash", "concat"} {
		if res.OpNanos[class] <= 0 {
			t.Errorf("op class %s: %d ns", class, res.OpNanos[class])
		}
	}
	if _, ok := res.OpNanos["col"]; ok || len(res.OpNanos) != 5 || res.Rows != 2000 {
		t.Errorf("result %+v: want the five op classes (no col) over 2000 rows", res)
	}
}

// TestRunnerComputesOverMemoInputs: a task whose description names a memo
// node of its cone ready for the block reads it and runs only the ops above
// it (no lowercasing or tokenizing measured), writing the same column as
// from raw columns; a memo input it cannot use (missing, or another node's
// object) is skipped and the component computed from raw columns (issue 20).
func TestRunnerComputesOverMemoInputs(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 3000})
	ctx := context.Background()
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	base := w.Blocks[0]
	r := &memo.Runner{Store: w.Store}
	key := func(expr string) canon.Key {
		k, _, err := canon.KeyOf(expr, s, transform.Default())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tokens, root := key(`unigrams(lower(col("query")))`), key(`hash(unigrams(lower(col("query"))), buckets=100)`)
	run := func(k canon.Key, dsl, object string, inputs ...*sigv1.MemoInput) workers.Result {
		t.Helper()
		res, err := r.Run(ctx, workers.Task{ID: workers.TaskID{Component: k, Block: blockref.ParseMemo(base.ID)}, Spec: &sigv1.Task{
			ComponentKey: k.String(), BlockId: base.ID, RawSource: "ads", RawObject: base.Key, MemoObject: object,
			CanonicalDsl: dsl, Columns: []string{"query"}, SchemaJson: string(schemaJSON), MemoGeneration: 1, MemoInputs: inputs,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	mb := blockref.ParseMemo(base.ID)
	tok := run(tokens, `input out = unigrams(lower(col("query")))`, block.MemoKey(tokens, mb))
	tokInput := &sigv1.MemoInput{Key: tokens.String(), MemoObject: tok.Object, MemoColumn: block.MemberColumn(tokens)}
	rootDSL := `input out = hash(unigrams(lower(col("query"))), buckets=100, salt=0)`
	fromRaw := run(root, rootDSL, "memo/test/raw.arrow")
	over := run(root, rootDSL, "memo/test/over.arrow", tokInput)
	if fromRaw.OpNanos["unigrams"] <= 0 || over.OpNanos["unigrams"] != 0 || over.OpNanos["lower"] != 0 || over.OpNanos["hash/list"] <= 0 {
		t.Fatalf("op costs from raw %v, over the tokens %v: want only the hash over the tokens", fromRaw.OpNanos, over.OpNanos)
	}
	_, want := packed(t, w.Store, fromRaw, root, mb)
	if _, got := packed(t, w.Store, over, root, mb); !array.Equal(want, got) {
		t.Fatal("the column computed over the memo input differs from the one computed from raw columns")
	}
	// A memo node in an object of its own, as written before packs, is
	// read as well.
	tokMeta, tokCol := packed(t, w.Store, tok, tokens, mb)
	ids, err := block.ReadColumns(ctx, w.Store, tokMeta, nil)
	if err != nil {
		t.Fatal(err)
	}
	legacy := memo.MemoRecord(ids.Column(0), tokCol)
	if _, err := block.Write(ctx, w.Store, block.Meta{Key: block.MemoKey(tokens, mb), ID: base.ID, Source: "ads", ComponentKey: tokens}, legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Release()
	ids.Release()
	old := run(root, rootDSL, "memo/test/old.arrow", &sigv1.MemoInput{Key: tokens.String(), MemoObject: block.MemoKey(tokens, mb)})
	if old.OpNanos["unigrams"] != 0 || old.OpNanos["lower"] != 0 {
		t.Fatalf("op costs over an object written before packs %v: want only the hash", old.OpNanos)
	}
	if _, got := packed(t, w.Store, old, root, mb); !array.Equal(want, got) {
		t.Fatal("the column computed over an object written before packs differs")
	}
	// Unusable memo inputs: computed from raw columns, same column. An
	// object of one component of another block or node, the tokens' pack
	// named with another column, or under another source or block.
	lowerKey := key(`lower(col("query"))`)
	otherBlock := block.PackKey("ads", blockref.New("20260101T000000Z-p00009-00000000000000000000-00000000000000000001", 1), "x")
	_, ref, _ := block.ParsePackKey(tok.Object)
	otherSource := block.PackKey("web", ref, strings.TrimSuffix(tok.Object[strings.LastIndex(tok.Object, "/")+1:], block.Ext))
	for name, inputs := range map[string][]*sigv1.MemoInput{
		"objects of one component elsewhere": {
			{Key: tokens.String(), MemoObject: block.MemoKey(tokens, blockref.ParseMemo("other-block"))},
			{Key: tokens.String(), MemoObject: tok.Object},
			{Key: lowerKey.String(), MemoObject: block.MemoKey(lowerKey, mb)}},
		"another node's column":       {{Key: tokens.String(), MemoObject: tok.Object, MemoColumn: block.MemberColumn(root)}},
		"a pack of another block":     {{Key: tokens.String(), MemoObject: otherBlock, MemoColumn: block.MemberColumn(tokens)}},
		"a pack of another source":    {{Key: tokens.String(), MemoObject: otherSource, MemoColumn: block.MemberColumn(tokens)}},
		"a pack not holding the node": {{Key: lowerKey.String(), MemoObject: tok.Object, MemoColumn: block.MemberColumn(lowerKey)}},
	} {
		bad := run(root, rootDSL, "memo/test/bad.arrow", inputs...)
		if bad.OpNanos["unigrams"] <= 0 || bad.OpNanos["lower"] <= 0 {
			t.Fatalf("%s: op costs %v: unusable memo inputs must leave the whole component to compute", name, bad.OpNanos)
		}
		if _, got := packed(t, w.Store, bad, root, mb); !array.Equal(want, got) {
			t.Fatalf("%s: the fallback column differs", name)
		}
	}
}

// TestRunnerOverEveryNodeKind (issue 27): a memo input may be any node of
// the cone — a bare column (read by one user or two), a node constant
// folding made (truncate of a truncate), a node with two users — and the
// task computes the same column as from raw columns, reading from the raw
// block only the columns the residual above its memo inputs reads (the
// segment cache counts them) and running none of the ops beneath them.
// Before transform.Program (issue 26) a bare column memo input failed
// every task: the residual's record check still asked for the raw column
// the runner had not read (`record has no column "device"`).
func TestRunnerOverEveryNodeKind(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 2000})
	ctx := context.Background()
	s, reg := transform.AdsSchema(), transform.Default()
	schemaJSON, _ := json.Marshal(s)
	base := w.Blocks[0]
	mb := blockref.ParseMemo(base.ID)
	// component returns an expression's key, canonical DSL and columns, as
	// a task's description carries them.
	component := func(t *testing.T, expr string) (canon.Key, string, []string) {
		t.Helper()
		k, c, err := canon.KeyOf(expr, s, reg)
		if err != nil {
			t.Fatal(err)
		}
		return k, c.DSL(&c.Components[0], "out"), c.Components[0].Columns
	}
	// run runs the task of expr writing object and returns its result and
	// how many raw segments it read (event_id included).
	run := func(t *testing.T, expr, object string, inputs ...*sigv1.MemoInput) (workers.Result, int64) {
		t.Helper()
		k, dsl, cols := component(t, expr)
		r := &memo.Runner{Store: w.Store, Segments: block.NewSegmentCache(64 << 20)}
		res, err := r.Run(ctx, workers.Task{ID: workers.TaskID{Component: k, Block: mb}, Spec: &sigv1.Task{
			ComponentKey: k.String(), BlockId: base.ID, RawSource: "ads", RawObject: base.Key, MemoObject: object,
			CanonicalDsl: dsl, Columns: cols, SchemaJson: string(schemaJSON), MemoGeneration: 1, MemoInputs: inputs,
		}})
		if err != nil {
			t.Fatalf("%s over %d memo inputs: %v", expr, len(inputs), err)
		}
		return res, r.Segments.Stats().Misses
	}
	// memoize memoizes a node as its own component and returns it as a
	// memo input.
	memoize := func(expr string) *sigv1.MemoInput {
		t.Helper()
		k, _, _ := component(t, expr)
		res, _ := run(t, expr, block.MemoKey(k, mb))
		return &sigv1.MemoInput{Key: k.String(), MemoObject: res.Object, MemoColumn: block.MemberColumn(k)}
	}
	value := func(t *testing.T, expr string, res workers.Result) []byte {
		t.Helper()
		k, _, _ := component(t, expr)
		_, col := packed(t, w.Store, res, k, mb)
		b, err := sigdtest.ColumnBytes(col)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	device := memoize(`col("device")`)
	folded := memoize(`truncate(unigrams(lower(col("query"))), max=3)`)
	lowTitle := memoize(`lower(col("ad_title"))`)
	for i, tc := range []struct {
		name, expr string
		inputs     []*sigv1.MemoInput
		// segments: the raw segments read over the memo inputs (event_id
		// and the residual's columns); beneath: op classes that must not run.
		segments int64
		beneath  []string
	}{
		{"bare column", `hash(col("device"), buckets=16)`, []*sigv1.MemoInput{device}, 1, nil},
		{"bare column used twice", `cross(col("device"), hash(col("device"), buckets=16), buckets=97)`, []*sigv1.MemoInput{device}, 1, nil},
		{"folded node", `hash(truncate(truncate(unigrams(lower(col("query"))), max=8), max=3), buckets=16)`, []*sigv1.MemoInput{folded}, 1,
			[]string{"lower", "unigrams", "truncate"}},
		{"node used twice", `concat(unigrams(lower(col("ad_title"))), ngrams(lower(col("ad_title")), n=2))`, []*sigv1.MemoInput{lowTitle}, 1,
			[]string{"lower"}},
		{"all of them", `concat(hash(col("device"), buckets=16), hash(truncate(truncate(unigrams(lower(col("query"))), max=8), max=3), buckets=16), ` +
			`hash(unigrams(lower(col("ad_title"))), buckets=16), hash(ngrams(lower(col("ad_title")), n=2), buckets=16), hash(col("country"), buckets=16))`,
			[]*sigv1.MemoInput{device, folded, lowTitle}, 2, []string{"lower", "truncate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fromRaw, rawSegs := run(t, tc.expr, fmt.Sprintf("memo/test/raw%d.arrow", i))
			over, segs := run(t, tc.expr, fmt.Sprintf("memo/test/over%d.arrow", i), tc.inputs...)
			if segs != tc.segments || rawSegs <= segs {
				t.Errorf("read %d raw segments over the memo inputs, %d from raw; want %d over them", segs, rawSegs, tc.segments)
			}
			for _, class := range tc.beneath {
				if over.OpNanos[class] != 0 || fromRaw.OpNanos[class] <= 0 {
					t.Errorf("op %s: %d ns over the memo inputs, %d from raw; want it run from raw only", class, over.OpNanos[class], fromRaw.OpNanos[class])
				}
			}
			if !bytes.Equal(value(t, tc.expr, fromRaw), value(t, tc.expr, over)) {
				t.Fatal("the column computed over the memo inputs differs from the one computed from raw columns")
			}
		})
	}
}

// TestRunnerForeignEncodings is ingestion by another program: raw block
// objects that pyarrow wrote in the block layout
// (testdata/foreign/make_blocks.py), the same events with their string
// columns as utf8, dictionary<int32, utf8> (as Arrow JS writes strings),
// large_utf8, and string_view in two record batches per segment. A worker
// memoizes each component over each object, and every memo object is
// byte for byte the one the utf8 object gives: the segments are converted
// where they are decoded (block.DecodeSegment, transform.ConformArray).
// The components include a pass-through (lower of lower-case ASCII
// returns its input), whose memo holds the converted column's own bytes.
// Before, the dictionary object failed its tasks ("segment is not one
// uncompressed Arrow IPC batch").
func TestRunnerForeignEncodings(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{})
	ctx := context.Background()
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	components := []struct{ dsl, column string }{
		{`input out = hash(unigrams(lower(col("query"))), buckets=1000)`, "query"},
		{`input out = unigrams(col("ad_title"))`, "ad_title"},
		{`input out = fill_missing(col("ad_category"), default="none")`, "ad_category"},
		{`input out = lower(col("country"))`, "country"},
		{`input out = cross(col("ad_category"), col("advertiser_id"), buckets=1000)`, "ad_category"},
	}
	memos := func(file string) [][]byte {
		data, err := os.ReadFile(filepath.Join("testdata/foreign", file))
		if err != nil {
			t.Fatal(err)
		}
		meta, _, err := block.Decode("fixture", data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if meta.SchemaFingerprint != s.Fingerprint() {
			t.Fatalf("%s: schema fingerprint %s, want the Ads schema's %s", file, meta.SchemaFingerprint, s.Fingerprint())
		}
		if _, err := w.Store.PutChecksummed(ctx, meta.Key, data, objstore.Checksum(data), nil); err != nil {
			t.Fatal(err)
		}
		r := &memo.Runner{Store: w.Store}
		var out [][]byte
		for i, c := range components {
			memoKey := fmt.Sprintf("memo/c%d/%s.arrow", i, meta.ID)
			cols := []string{c.column}
			if strings.Contains(c.dsl, "advertiser_id") {
				cols = append(cols, "advertiser_id")
			}
			k := canon.Key{byte(i + 1)}
			task := workers.Task{ID: workers.TaskID{Component: k, Block: blockref.ParseMemo(meta.ID)}, Spec: &sigv1.Task{
				ComponentKey: k.String(), BlockId: meta.ID, RawSource: "ads", RawObject: meta.Key, MemoObject: memoKey,
				CanonicalDsl: c.dsl, Columns: cols, SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}}
			res, err := r.Run(ctx, task)
			if err != nil {
				t.Fatalf("%s: component %d: %v", file, i, err)
			}
			// The member's segment and the pack's event_id segment, byte
			// for byte (the pack's key, in its footer, is new each time).
			pm, _ := packed(t, w.Store, res, k, blockref.ParseMemo(meta.ID))
			segs, err := block.FetchSegments(ctx, w.Store, pm, []string{transform.ColEventID, block.MemberColumn(k)})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bytes.Join(segs, nil))
		}
		return out
	}
	want := memos("block_utf8.arrow")
	for _, f := range []string{"block_dict_int32.arrow", "block_large_utf8.arrow", "block_string_view.arrow"} {
		for i, got := range memos(f) {
			if !bytes.Equal(got, want[i]) {
				t.Errorf("%s: component %d (%s): memo segments of %d bytes differ from the utf8 block's (%d bytes)",
					f, i, components[i].dsl, len(got), len(want[i]))
			}
		}
	}
}

// TestRunnerCompression: a worker writes its memo object's value segment
// with its own Compression and its event_id segment exactly as the raw
// block's (whatever that block's compression), so that a reader proves row
// alignment from the two footers and fetches the value segment with the
// footer in one request; the values are the uncompressed run's.
func TestRunnerCompression(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 400})
	ctx := context.Background()
	schemaJSON, _ := json.Marshal(transform.AdsSchema())
	base := w.Blocks[0]
	_, rec, err := block.ReadBlock(ctx, w.Store, base.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var want arrow.Record
	for _, raw := range []block.Compression{block.Uncompressed, block.LZ4Frame, block.ZSTD} {
		id := base.ID + "-" + raw.Flag()
		meta, err := block.WriteWith(ctx, w.Store, blocktest.Renamed(base, id), rec, block.EncodeOptions{Compression: raw})
		if err != nil {
			t.Fatal(err)
		}
		rawEv, _ := meta.Column(transform.ColEventID)
		for _, comp := range []block.Compression{block.Uncompressed, block.LZ4Frame, block.ZSTD} {
			memoKey := fmt.Sprintf("memo/test/%s-%s.arrow", id, comp.Flag())
			task := workers.Task{ID: workers.TaskID{Component: canon.Key{'c'}, Block: blockref.ParseMemo(id)}, Spec: &sigv1.Task{
				ComponentKey: testKey.String(), BlockId: id, RawSource: "ads", RawObject: meta.Key, MemoObject: memoKey,
				CanonicalDsl: `input out = unigrams(lower(col("query")))`, Columns: []string{"query"},
				SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}}
			res, err := (&memo.Runner{Store: w.Store, Compression: comp}).Run(ctx, task)
			if err != nil {
				t.Fatalf("raw %s, memo %s: %v", raw.Flag(), comp.Flag(), err)
			}
			m, got, err := block.ReadBlock(ctx, w.Store, res.Object)
			if err != nil {
				t.Fatal(err)
			}
			ev, _ := m.Column(transform.ColEventID)
			val, _ := m.Column(block.MemberColumn(testKey))
			if ev.Length != rawEv.Length || ev.CRC32C != rawEv.CRC32C || ev.Compression != raw {
				t.Errorf("raw %s, memo %s: event_id segment (%d bytes, %q) is not the raw block's (%d bytes, %q)",
					raw.Flag(), comp.Flag(), ev.Length, ev.Compression, rawEv.Length, rawEv.Compression)
			}
			if val.Compression != comp {
				t.Errorf("raw %s, memo %s: value segment compression %q", raw.Flag(), comp.Flag(), val.Compression)
			}
			if want == nil {
				want = got
				continue
			}
			if !array.Equal(got.Column(1), want.Column(1)) || !array.Equal(got.Column(0), want.Column(0)) {
				t.Errorf("raw %s, memo %s: values differ from the uncompressed run's", raw.Flag(), comp.Flag())
			}
			got.Release()
		}
	}
	want.Release()
}

// packed reads the column a task wrote (its result's pack, checked as
// readers check it) and returns it with the pack's metadata.
func packed(t *testing.T, st *objstore.Store, res workers.Result, k canon.Key, mb blockref.Memo) (block.Meta, arrow.Array) {
	t.Helper()
	ctx := context.Background()
	if _, ref, ok := block.ParsePackKey(res.Object); !ok || ref.ID() != mb.ID() {
		t.Fatalf("result names %q, want a pack of block %s", res.Object, mb.ID())
	}
	meta, err := block.ReadFooter(ctx, st, res.Object)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := meta.Column(block.MemberColumn(k))
	if !ok {
		t.Fatalf("pack %s has no column of %s", res.Object, k.Short())
	}
	if _, err := block.CheckMember(meta, c.Name, k, mb, c.Type, meta.Rows); err != nil || res.Bytes != c.Length {
		t.Fatalf("pack %s: %v; result's bytes %d, the member's segment %d", res.Object, err, res.Bytes, c.Length)
	}
	rec, err := block.ReadColumns(ctx, st, meta, []string{c.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	return meta, rec.Column(1)
}

// packs counts the packs in the bucket.
func packs(t *testing.T, st *objstore.Store) int {
	t.Helper()
	n := 0
	for _, err := range st.List(context.Background(), block.PackPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// testKey is the component key of tasks whose key matters only as a valid
// one (the runner parses it where the task enters the worker).
var testKey = canon.Key{0xc0, 0xff, 0xee}

// TestRunnerNarrowsValues: a worker stores an int64 or list<int64> value
// in the narrowest integer type that holds it (a hash into 1,000,003
// buckets as list<int32>, a bucketize as int8, a hash into 2^40 buckets
// as it is), its event_id as the raw block's bytes; the object reads back
// to the values Runner.Wide stores as declared, in a smaller pack.
func TestRunnerNarrowsValues(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 400})
	ctx := context.Background()
	schemaJSON, _ := json.Marshal(transform.AdsSchema())
	meta := w.Blocks[0]
	rawEv, _ := meta.Column(transform.ColEventID)
	for _, tc := range []struct {
		dsl, columns, stored string
	}{
		{`input out = hash(unigrams(lower(col("query"))), buckets=1000003)`, "query", "list<int32>"},
		{`input out = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])`, "bid_price", "int8"},
		{`input out = hash(col("ad_category"), buckets=1000)`, "ad_category", "int16"},
		{`input out = hash(col("query"), buckets=1099511627776)`, "query", ""},
		{`input out = unigrams(col("query"))`, "query", ""},
	} {
		objects := map[bool]block.Meta{}
		values := map[bool]arrow.Record{}
		for _, wide := range []bool{false, true} {
			memoKey := fmt.Sprintf("memo/test/%s-%d-%t.arrow", meta.ID, len(objects), wide)
			task := workers.Task{ID: workers.TaskID{Component: canon.Key{'n'}, Block: blockref.ParseMemo(meta.ID)}, Spec: &sigv1.Task{
				ComponentKey: testKey.String(), BlockId: meta.ID, RawSource: "ads", RawObject: meta.Key, MemoObject: memoKey,
				CanonicalDsl: tc.dsl, Columns: []string{tc.columns}, SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}}
			res, err := (&memo.Runner{Store: w.Store, Wide: wide}).Run(ctx, task)
			if err != nil {
				t.Fatalf("%s: %v", tc.dsl, err)
			}
			m, rec, err := block.ReadBlock(ctx, w.Store, res.Object)
			if err != nil {
				t.Fatalf("%s: %v", tc.dsl, err)
			}
			defer rec.Release()
			objects[wide], values[wide] = m, rec
		}
		narrow, wide := objects[false], objects[true]
		if v, _ := narrow.Column(block.MemberColumn(testKey)); v.Stored != tc.stored {
			t.Errorf("%s: value stored as %q, want %q", tc.dsl, v.Stored, tc.stored)
		}
		if v, _ := wide.Column(block.MemberColumn(testKey)); v.Stored != "" {
			t.Errorf("%s: Wide stored the value as %q", tc.dsl, v.Stored)
		}
		if ev, _ := narrow.Column(transform.ColEventID); ev.Stored != "" || ev.Length != rawEv.Length || ev.CRC32C != rawEv.CRC32C {
			t.Errorf("%s: event_id segment (stored %q) is not the raw block's", tc.dsl, ev.Stored)
		}
		if tc.stored != "" && narrow.Size >= wide.Size {
			t.Errorf("%s: narrow object of %d bytes, %d wide", tc.dsl, narrow.Size, wide.Size)
		}
		for i := range 2 {
			if got, want := values[false].Column(i), values[true].Column(i); !arrow.TypeEqual(got.DataType(), want.DataType()) || !array.Equal(got, want) {
				t.Errorf("%s: column %d reads back as %s, %s stored wide", tc.dsl, i, got.DataType(), want.DataType())
			}
		}
	}
}
