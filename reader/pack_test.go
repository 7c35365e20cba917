package reader

import (
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// pack writes the memo columns of the given inputs of block b (read from
// their objects of one component) into packs of the block (issue 28,
// block.WritePacks), one pack when maxBytes is 0, and returns where each
// input's column went.
func (f *fixture) pack(t *testing.T, b int, inputs []int, maxBytes int64) map[canon.Key]block.Packed {
	t.Helper()
	ctx := context.Background()
	blk := f.blocks[b]
	var members []block.PackMember
	var ids arrow.Array
	seen := map[canon.Key]bool{}
	for _, i := range inputs {
		in := f.inputs[i]
		if seen[in.key] {
			continue // a component two graphs share
		}
		seen[in.key] = true
		_, rec, err := block.ReadBlock(ctx, f.store, block.MemoKey(in.key, blockref.ParseMemo(blk.id)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rec.Release)
		ids = rec.Column(0)
		members = append(members, block.PackMember{Component: in.key, Block: blockref.ParseMemo(blk.id), Value: rec.Column(1)})
	}
	_, placed, err := block.WritePacks(ctx, f.store, blk.meta, ids, members, block.PackOptions{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	out := map[canon.Key]block.Packed{}
	for _, p := range placed {
		out[p.Component] = p
	}
	return out
}

// packed is unit u with its MEMO inputs read from the packs placed.
func packed(u *readerv1.WorkUnit, placed map[canon.Key]block.Packed) *readerv1.WorkUnit {
	for _, in := range u.Inputs {
		k, _ := canon.ParseKey(in.ComponentKey)
		if p, ok := placed[k]; ok {
			in.MemoObject, in.MemoColumn, in.MemoVersion = p.Object, p.Column.Name, 1
		}
	}
	return u
}

// TestUnitReadsPacks (issue 28): a unit whose memo inputs name columns of
// packs — all of a block's inputs in one pack, in several packs under a
// bound, or one input alone in a pack (read with its footer in one
// request) beside objects of one component — streams the bytes the same
// unit streams from objects of one component, and LIG's.
func TestUnitReadsPacks(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: 3000, Nulls: true,
		Graphs: fleetGraphs(t, "ctr_small", "cvr")})
	s := f.server(t, Config{})
	ctx := context.Background()
	all := make([]int, len(f.inputs))
	for i := range all {
		all[i] = i
	}
	for b := range f.blocks {
		want, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(b, 1000, nil)})
		if err != nil {
			t.Fatal(err)
		}
		lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(b, 1000, allMode(local))})
		if err != nil {
			t.Fatal(err)
		}
		sameResponses(t, "objects of one component", want, "LIG", lig)
		for name, placed := range map[string]map[canon.Key]block.Packed{
			"one pack":         f.pack(t, b, all, 0),
			"packs of 20 KB":   f.pack(t, b, all, 20_000),
			"one input alone":  f.pack(t, b, all[:1], 0),
			"two of its packs": f.pack(t, b, all[1:3], 0),
		} {
			objects := map[string]bool{}
			for _, p := range placed {
				objects[p.Object] = true
			}
			if name == "packs of 20 KB" && len(objects) < 2 {
				t.Fatalf("%s: %d packs", name, len(objects))
			}
			got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: packed(f.unit(b, 1000, nil), placed)})
			if err != nil {
				t.Fatalf("block %d, %s: %v", b, name, err)
			}
			sameResponses(t, name, got, "objects of one component", want)
			exact, err := collect(ctx, f.server(t, Config{ExactAlignment: true}), &readerv1.ReadRequest{Unit: packed(f.unit(b, 1000, nil), placed)})
			if err != nil {
				t.Fatalf("block %d, %s, exact alignment: %v", b, name, err)
			}
			sameResponses(t, name+" (exact alignment)", exact, "objects of one component", want)
		}
	}
}

// TestPackedUnitChecks (issue 28): a unit naming a pack's column wrongly
// is refused before anything is read (InvalidArgument naming the field):
// another component's column, a pack of another block or source, an
// object of one component with a column, an input version past the raw
// block's; and a pack whose footer is not what the unit names (the
// member missing, at another input version, of another type) is DataLoss
// naming the pack, as a corrupt object of one component is.
func TestPackedUnitChecks(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: 500, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	placed := f.pack(t, 0, []int{0, 1}, 0)
	other := f.pack(t, 1, []int{0, 1}, 0)
	k0, k1 := f.inputs[0].key, f.inputs[1].key
	p0 := placed[k0]
	_, ref, _ := block.ParsePackKey(p0.Object)
	id := p0.Object[strings.LastIndex(p0.Object, "/")+1 : len(p0.Object)-len(block.Ext)]
	for _, tc := range []struct {
		name, field      string
		object, column   string
		version          int64
		code             codes.Code
		wantInMessageToo string
	}{
		{"another component's column", "inputs[0].memo_column", p0.Object, block.MemberColumn(k1), 1, codes.InvalidArgument, ""},
		{"a pack of another block", "inputs[0].memo_object", other[k0].Object, block.MemberColumn(k0), 1, codes.InvalidArgument, ""},
		{"a pack of another source", "inputs[0].memo_object", block.PackKey("web", ref, id), block.MemberColumn(k0), 1, codes.InvalidArgument, ""},
		{"an object of one component with a column", "inputs[0].memo_object", block.MemoKey(k0, blockref.ParseMemo(f.blocks[0].id)), block.MemberColumn(k0), 1, codes.InvalidArgument, ""},
		{"an input version past the raw block's", "inputs[0].memo_version", p0.Object, block.MemberColumn(k0), 2, codes.InvalidArgument, ""},
		{"a pack without the member", "", f.pack(t, 0, []int{1}, 0)[k1].Object, block.MemberColumn(k0), 1, codes.DataLoss, k0.Short()},
		{"a pack named without its column", "", p0.Object, "", 1, codes.InvalidArgument, "inputs[0].memo_object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := packed(f.unit(0, 100, nil), placed)
			u.Inputs[0].MemoObject, u.Inputs[0].MemoColumn, u.Inputs[0].MemoVersion = tc.object, tc.column, tc.version
			_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
			st := Status(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.field) || !strings.Contains(st.Message(), tc.wantInMessageToo) {
				t.Fatalf("%v (code %v), want %v naming %q %q", err, st.Code(), tc.code, tc.field, tc.wantInMessageToo)
			}
		})
	}
	// A member at another input version than the unit names: the same
	// pack, rewritten by a writer with a bug, is DataLoss naming it.
	data, _, err := f.store.Get(ctx, p0.Object)
	if err != nil {
		t.Fatal(err)
	}
	name := block.MemberColumn(k0)
	for what, edit := range map[string]func(string) string{
		"another input version": func(ft string) string {
			// A pack of version 2 whose member is at input version 2.
			ft = strings.Replace(ft, `"format":1,`, `"format":1,"version":2,`, 1)
			return strings.Replace(ft, `"name":"`+name+`",`, `"name":"`+name+`","input_version":2,`, 1)
		},
		"another type": func(ft string) string {
			i := strings.Index(ft, `"name":"`+name+`","type":"`) + len(`"name":"`+name+`","type":"`)
			j := strings.Index(ft[i:], `"`)
			return ft[:i] + "string" + ft[i+j:]
		},
	} {
		bad := blocktest.RewriteFooter(t, data, edit)
		if _, err := f.store.PutChecksummed(ctx, p0.Object, bad, objstore.Checksum(bad), nil); err != nil {
			t.Fatal(err)
		}
		_, err := collect(ctx, s, &readerv1.ReadRequest{Unit: packed(f.unit(0, 100, nil), placed)})
		if st := Status(err); st.Code() != codes.DataLoss || !strings.Contains(st.Message(), p0.Object) {
			t.Errorf("%s: %v (code %v), want DataLoss naming %s", what, err, st.Code(), p0.Object)
		}
	}
}

// TestUnitReadsMemoWrittenBefore (issue 28): the memo object of one
// component written before packs (warehouse/block/testdata/memo-v1,
// frozen) and its raw block serve a SIG unit naming it without a column,
// with the bytes LIG computes from the raw block.
func TestUnitReadsMemoWrittenBefore(t *testing.T) {
	f := newFixture(t, fixtureConfig{NoMemos: true})
	ctx := context.Background()
	const (
		rawKey  = "raw/ads/20260101T000000Z-p00000-00000000000000000000-00000000000000000039.arrow"
		memoKey = "memo/bb39c7cc831d8e803e6a0c06617e2cb2c0889ada51025aaf3abffc869ab6fd38/20260101T000000Z-p00000-00000000000000000000-00000000000000000039.arrow"
		dsl     = `input out = length(unigrams(lower(col("query"))))`
	)
	for key, file := range map[string]string{rawKey: "raw.arrow", memoKey: "memo.arrow"} {
		data, err := os.ReadFile("../warehouse/block/testdata/memo-v1/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.PutChecksummed(ctx, key, data, objstore.Checksum(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	k, mb, _ := block.ParseMemoKey(memoKey)
	unit := func(mode readerv1.InputMode) *readerv1.WorkUnit {
		return &readerv1.WorkUnit{UnitId: "frozen", Client: "ctr", Pipeline: "p", RawSource: "ads", BlockId: mb.ID(), RawObject: rawKey,
			BatchRows: 16, Inputs: []*readerv1.ModelInput{{Name: "n", ComponentKey: k.String(), Type: transform.Int64.String(),
				CanonicalDsl: dsl, MemoObject: memoKey, MemoState: sigv1.BlockState_BLOCK_STATE_READY, Mode: mode}}}
	}
	s := f.server(t, Config{})
	sig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit(memo)})
	if err != nil {
		t.Fatal(err)
	}
	lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit(local)})
	if err != nil {
		t.Fatal(err)
	}
	sameResponses(t, "SIG over the frozen object", sig, "LIG", lig)
	if len(sig) != 4 { // 40 rows in batches of 16, and the summary
		t.Fatalf("%d responses", len(sig))
	}
}
