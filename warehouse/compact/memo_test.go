package compact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
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
// fleet's example pipelines (all of whose ops are row-wise), the pack
// members ConcatMember makes over a compacted block from its parts' member
// columns, as workers computed and packed them, written with
// block.WritePacks over the compacted block as workers write (narrow), are
// byte for byte what a worker computes over the compacted block: each
// member's segment, its footer entry (type, stored type, compression,
// length, checksum, input version), the event_id segment and the pack's
// footer fields; with segments uncompressed, LZ4, and LZ4 members over
// uncompressed raw blocks; with the members in one pack, or split by a
// small bound over several; and with a part's column read from a memo
// object of one component written before packs. (A component with an op
// across rows is not row-wise and is recomputed:
// TestAcrossRowsIsRecomputed.)
func TestConcatMemoEqualsRecomputation(t *testing.T) {
	m := devenv.NewMinIO(t)
	st := m.NewStore(t, objstore.Config{Bucket: "sig", RetryFor: 5 * time.Second})
	ctx := context.Background()
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
	// Raw blocks and packs with their segments uncompressed or LZ4, and
	// raw blocks uncompressed under LZ4 members (the packs' event_id
	// segment is then the raw block's, uncompressed); the last arm bounds
	// the concatenated packs small, so that they split.
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
		crec, err := block.ReadColumns(ctx, st, c, nil)
		if err != nil {
			t.Fatal(err)
		}

		// compute runs a worker over raw for component ci of can, writing
		// its pack at a fixed key, and returns the pack's footer.
		packKey := ""
		runner := &memo.Runner{Store: st, Compression: comp, PackKey: func(source string, raw blockref.Ref) string {
			return block.PackKey(source, raw, packKey)
		}}
		compute := func(can *canon.Canonical, ci int, raw block.Meta) block.Meta {
			t.Helper()
			k := can.Components[ci].Key
			packKey = fmt.Sprintf("w%d-%s", arm, k.String()[:16])
			task := workers.Task{ID: workers.TaskID{Component: k, Block: raw.MemoRef()}, Spec: &sigv1.Task{
				ComponentKey: k.String(), BlockId: raw.MemoRef().String(), RawSource: "ads", RawObject: raw.Key,
				CanonicalDsl: can.DSL(&can.Components[ci], "out"), Columns: can.Components[ci].Columns,
				SchemaJson: string(schemaJSON), MemoGeneration: 1}}
			res, err := runner.Run(ctx, task)
			if err != nil {
				t.Fatalf("component %s over %s: %v", k.Short(), raw.ID, err)
			}
			pm, err := block.ReadFooter(ctx, st, res.Object)
			if err != nil {
				t.Fatal(err)
			}
			return pm
		}
		var (
			members []block.PackMember
			want    = map[canon.Key]block.Meta{} // each component's pack a worker wrote over c
			legacy  = 0
		)
		for _, can := range comps {
			for ci := range can.Components {
				cc := &can.Components[ci]
				if _, dup := want[cc.Key]; dup {
					continue
				}
				if !compact.RowWise(can.ComponentGraph(cc, "out"), transform.Default()) {
					t.Fatalf("component %s (%v) is not row-wise", cc.Key.Short(), cc.Ops)
				}
				var pcs []compact.PartColumn
				var read []arrow.Record
				for pi, p := range parts {
					pm := compute(can, ci, p)
					rec, err := block.ReadColumns(ctx, st, pm, []string{block.MemberColumn(cc.Key)})
					if err != nil {
						t.Fatal(err)
					}
					if pi == 0 && len(want)%3 == 0 {
						// A memo object of one component, as workers wrote
						// before packs (wide, at the legacy key): read as
						// its entry names it, with no column.
						lm, err := block.WriteWith(ctx, st, block.Meta{Key: block.MemoKey(cc.Key, p.MemoRef()), ID: p.ID, Source: p.Source,
							ComponentKey: cc.Key, WindowStart: p.WindowStart, WindowLength: p.WindowLength, SchemaFingerprint: p.SchemaFingerprint,
							Generation: 1}, memo.MemoRecord(rec.Column(0), rec.Column(1)), block.EncodeOptions{Compression: comp})
						if err != nil {
							t.Fatal(err)
						}
						rec.Release()
						if _, err := block.CheckMember(lm, "", cc.Key, p.MemoRef(), cc.Type.String(), p.Rows); err != nil {
							t.Fatal(err)
						}
						if rec, err = block.ReadColumns(ctx, st, lm, []string{block.MemoColumn}); err != nil {
							t.Fatal(err)
						}
						legacy++
					}
					read = append(read, rec)
					pcs = append(pcs, compact.PartColumn{Block: p.MemoRef(), EventID: rec.Column(0), Value: rec.Column(1)})
				}
				mem, err := compact.ConcatMember(c, crec.Column(0), cc.Key, pcs)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range read {
					r.Release()
				}
				members = append(members, mem)
				want[cc.Key] = compute(can, ci, c)
			}
		}
		npacks := 0
		popts := block.PackOptions{EncodeOptions: block.EncodeOptions{Compression: comp}, NewKey: func(source string, raw blockref.Ref) string {
			npacks++
			return block.PackKey(source, raw, fmt.Sprintf("concat%d-%d", arm, npacks))
		}}
		if arm == 2 {
			popts.MaxBytes = 64 << 10
		}
		packs, packed, err := block.WritePacks(ctx, st, c, crec.Column(0), members, popts)
		if err != nil {
			t.Fatal(err)
		}
		if arm == 2 && len(packs) < 2 {
			t.Fatalf("%d packs under a 64 KiB bound: the bound splits nothing", len(packs))
		}
		byKey := map[string]block.Meta{}
		for _, p := range packs {
			byKey[p.Key] = p
		}
		segment := func(meta block.Meta, name string) []byte {
			t.Helper()
			segs, err := block.FetchSegments(ctx, st, meta, []string{name})
			if err != nil {
				t.Fatal(err)
			}
			return segs[0]
		}
		narrow := 0
		for i, p := range packed {
			k := members[i].Component
			if p.Column.Stored != "" {
				narrow++
			}
			got, w := byKey[p.Object], want[k]
			wc, _ := w.Column(block.MemberColumn(k))
			gc := p.Column
			// Where the segment lies is the pack's business; what it holds
			// and how the footer describes it are the member's.
			wc.Offset, gc.Offset = 0, 0
			if gc != wc {
				t.Fatalf("component %s: footer entry %+v, recomputed %+v", k.Short(), gc, wc)
			}
			if !bytes.Equal(segment(got, p.Column.Name), segment(w, p.Column.Name)) {
				t.Fatalf("raw %s, memo %s: component %s: the concatenated member's segment differs from the recomputed one",
					rawComp.Flag(), comp.Flag(), k.Short())
			}
			if !block.SameSegment(got, w, transform.ColEventID) || !bytes.Equal(segment(got, transform.ColEventID), segment(w, transform.ColEventID)) {
				t.Fatalf("component %s: the event_id segments differ", k.Short())
			}
			g0, w0 := got, w
			g0.Key, w0.Key, g0.Columns, w0.Columns = "", "", nil, nil
			g0.Size, w0.Size, g0.FooterOffset, w0.FooterOffset, g0.FooterLength, w0.FooterLength, g0.Checksum, w0.Checksum = 0, 0, 0, 0, 0, 0, 0, 0
			if !reflect.DeepEqual(g0, w0) {
				t.Fatalf("component %s: pack footer %+v, recomputed %+v", k.Short(), g0, w0)
			}
			if _, err := block.CheckMember(got, p.Column.Name, k, c.MemoRef(), wc.Type, c.Rows); err != nil {
				t.Fatal(err)
			}
		}
		for _, mem := range members {
			mem.Value.Release()
		}
		crec.Release()
		if narrow == 0 {
			t.Fatal("no member is stored narrow: the test does not show narrowing after concatenation")
		}
		t.Logf("raw %s, memo %s: %d components (%d stored narrow, %d with a part read from a memo object of one component) concatenated into %d packs, each member byte for byte as recomputed",
			rawComp.Flag(), comp.Flag(), len(members), narrow, legacy, len(packs))
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
