package compact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/examples"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/compact"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// TestConcatMemoEqualsRecomputation (issue 28): for every component of the
// fleet's example pipelines (all of whose ops are row-wise), the memo
// object ConcatMemo makes of a compacted block from its parts' memo
// objects, as a worker computed them, is byte for byte the object a worker
// computes over the compacted block; uncompressed and with LZ4 segments.
// (A component with an op across rows is not row-wise and is recomputed:
// TestAcrossRowsIsRecomputed.)
func TestConcatMemoEqualsRecomputation(t *testing.T) {
	m := devenv.NewMinIO(t)
	st, err := objstore.New(objstore.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Bucket: "sig", RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	var comps []*canon.Canonical
	for _, name := range []string{"ctr_small", "ctr_wide", "cvr", "explore", "ranking"} {
		src, err := fs.ReadFile(examples.Fleet, "fleet/"+name+".sig")
		if err != nil {
			t.Fatal(err)
		}
		g, err := transform.Parse(src, name, transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		comps = append(comps, c)
	}
	window := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	// Raw blocks and memo objects with their segments uncompressed or LZ4,
	// and raw blocks uncompressed under LZ4 memo objects (whose event_id
	// segment is then the raw block's, uncompressed).
	for arm, cs := range [][2]block.Compression{{block.Uncompressed, block.Uncompressed}, {block.LZ4Frame, block.LZ4Frame}, {block.Uncompressed, block.LZ4Frame}} {
		rawComp, comp := cs[0], cs[1]
		opts := block.EncodeOptions{Compression: rawComp}
		// Three small raw blocks of one partition and window, and their
		// compaction.
		recs := gen.New(gen.Config{Seed: 28}).Records(700, 300)
		var parts []block.Meta
		first := int64(1000 * arm)
		for _, rec := range recs {
			kr := block.KafkaRange{Topic: "raw.ads", First: first, Last: first + rec.NumRows() - 1}
			first += rec.NumRows() + 5
			id := block.ID(window, kr)
			pm, err := block.WriteWith(ctx, st, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
				WindowStart: window, WindowLength: int64(time.Hour / time.Microsecond), SchemaFingerprint: s.Fingerprint(), Kafka: &kr, Generation: 1},
				rec, opts)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, pm)
		}
		cm, err := compact.Meta(parts, 2)
		if err != nil {
			t.Fatal(err)
		}
		all, err := compact.Concat(recs)
		if err != nil {
			t.Fatal(err)
		}
		c, err := block.WriteWith(ctx, st, cm, all, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			r.Release()
		}
		all.Release()

		runner := &memo.Runner{Store: st, Compression: comp}
		compute := func(can *canon.Canonical, ci int, raw block.Meta) string {
			t.Helper()
			k := can.Components[ci].Key
			key := block.MemoKey(k, raw.MemoRef())
			task := workers.Task{ID: workers.TaskID{Component: k, Block: raw.MemoRef()}, Spec: &sigv1.Task{
				ComponentKey: k.String(), BlockId: raw.ID, RawSource: "ads", RawObject: raw.Key, MemoObject: key,
				CanonicalDsl: can.DSL(&can.Components[ci], "out"), Columns: can.Components[ci].Columns,
				SchemaJson: string(schemaJSON), MemoGeneration: 1}}
			if _, err := runner.Run(ctx, task); err != nil {
				t.Fatalf("component %s over %s: %v", k.Short(), raw.ID, err)
			}
			return key
		}
		n := 0
		for _, can := range comps {
			for ci := range can.Components {
				cc := &can.Components[ci]
				if !compact.RowWise(can.ComponentGraph(cc, "out"), transform.Default()) {
					t.Fatalf("component %s (%v) is not row-wise", cc.Key.Short(), cc.Ops)
				}
				var mps []compact.MemoPart
				for _, p := range parts {
					pm, prec, err := block.ReadBlock(ctx, st, compute(can, ci, p))
					if err != nil {
						t.Fatal(err)
					}
					mps = append(mps, compact.MemoPart{Meta: pm, Record: prec})
				}
				mm, rec, eopts, err := compact.ConcatMemo(c, mps, comp)
				if err != nil {
					t.Fatal(err)
				}
				data, _, err := block.EncodeWith(mm, rec, eopts)
				if err != nil {
					t.Fatal(err)
				}
				want, _, err := st.Get(ctx, compute(can, ci, c))
				if err != nil {
					t.Fatal(err)
				}
				if mm.Key != block.MemoKey(cc.Key, c.MemoRef()) || !bytes.Equal(data, want) {
					t.Fatalf("raw %s, memo %s: component %s (%s): the concatenated memo object %s (%d bytes) differs from the recomputed one (%d bytes)",
						rawComp.Flag(), comp.Flag(), cc.Key.Short(), cc.Input, mm.Key, len(data), len(want))
				}
				rec.Release()
				for _, p := range mps {
					p.Record.Release()
				}
				n++
			}
		}
		t.Logf("raw %s, memo %s: %d components, each concatenated byte for byte as recomputed", rawComp.Flag(), comp.Flag(), n)
	}
}

// TestAcrossRowsIsRecomputed: an op whose value for a row depends on the
// other rows of its block (none is built in, so this registry adds one:
// center, a column minus its block's mean) makes its components not
// row-wise, and rightly: over a compacted block its values are not its
// parts' one after the other.
func TestAcrossRowsIsRecomputed(t *testing.T) {
	reg := transform.Default().WithVersion("log1p", 1) // a copy
	reg.Register(&transform.OpSpec{Name: "center", Version: 1, MinArgs: 1, MaxArgs: 1, AcrossRows: true,
		Infer: func(in []transform.Type, n *transform.Node) (transform.Type, error) {
			if in[0] != transform.Float64 {
				return transform.TypeInvalid, fmt.Errorf("center: want float64, got %s", in[0])
			}
			return transform.Float64, nil
		}}, func(in []arrow.Array, _ *transform.Node) (arrow.Array, error) {
		x := in[0].(*array.Float64)
		var sum float64
		for i := range x.Len() {
			sum += x.Value(i)
		}
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		defer b.Release()
		for i := range x.Len() {
			b.Append(x.Value(i) - sum/float64(x.Len()))
		}
		return b.NewArray(), nil
	})
	s := transform.AdsSchema()
	run := func(src string) (row, across bool, concat, whole arrow.Array) {
		g, err := transform.Parse([]byte(src), "t", transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := canon.Canonicalize(g, s, reg, transform.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		cg := c.ComponentGraph(&c.Components[0], "out")
		recs := gen.New(gen.Config{Seed: 5}).Records(300, 100)
		var pieces []arrow.Array
		for _, r := range recs {
			out, err := transform.Run(cg, reg, r, cg.Inputs[0].Node)
			if err != nil {
				t.Fatal(err)
			}
			pieces = append(pieces, out[0])
		}
		cat, _ := array.Concatenate(pieces, memory.DefaultAllocator)
		all, _ := compact.Concat(recs)
		out, err := transform.Run(cg, reg, all, cg.Inputs[0].Node)
		if err != nil {
			t.Fatal(err)
		}
		return compact.RowWise(cg, reg), compact.RowWise(cg, transform.Default()), cat, out[0]
	}
	rowWise, _, cat, whole := run(`input x = log1p(col("bid_price"))` + "\n")
	if !rowWise || !array.Equal(cat, whole) {
		t.Fatalf("log1p: row-wise %v, concatenation equals recomputation %v", rowWise, array.Equal(cat, whole))
	}
	rowWise, known, cat, whole := run(`input x = log1p(center(col("bid_price")))` + "\n")
	if rowWise || known {
		t.Fatal("a component with an op across rows is called row-wise")
	}
	if array.Equal(cat, whole) {
		t.Fatal("center over the parts one after the other equals center over the whole: the test shows nothing")
	}
}
