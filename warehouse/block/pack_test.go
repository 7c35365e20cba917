package block_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

const packBlock = "20260101T000000Z-p00000-00000000000000000000-00000000000000000299"

// packRaw is a raw block version's metadata of rows rows (event ids from
// 1000) as a pack's writer gets it, with the event_id column encoded as
// ingestion encodes it.
func packRaw(t *testing.T, rows int, version int64) (block.Meta, arrow.Array) {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(1000 + i))
	}
	ids := b.NewArray()
	rec := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ids}, int64(rows))
	defer rec.Release()
	_, meta, err := block.Encode(block.Meta{Key: block.RawKey("ads", blockref.New(packBlock, version)), ID: packBlock, Version: version, Source: "ads"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return meta, ids
}

// int64s is an int64 column of rows rows, value i*mul at row i.
func int64s(rows int, mul int64) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i) * mul)
	}
	return b.NewArray()
}

// TestWritePacks: members of one raw block version are written into packs
// bounded by MaxBytes, laid out by group then key; each member reads back
// by its column with CheckMember (the check readers and sigd share), its
// event_id segment is the raw block's (SameSegment) and every pack has its
// own new key.
func TestWritePacks(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	raw, ids := packRaw(t, 300, 3)
	defer ids.Release()
	var members []block.PackMember
	for i := range 5 {
		k := canon.Key{byte(0x10 * (5 - i)), 7}
		v := int64s(300, int64(i+1))
		defer v.Release()
		members = append(members, block.PackMember{Component: k, Block: blockref.NewMemo(packBlock, int64(1+i%3)), Value: v,
			Group: []string{"b", "a"}[i%2]})
	}
	// Each column is 2400 bytes: three fit under 8000, so group a (two
	// members) and the first two of group b... group b has three members,
	// 7200 bytes, which does not fit beside a's 4800: two packs.
	metas, packed, err := block.WritePacks(ctx, st, raw, ids, members, block.PackOptions{MaxBytes: 8000,
		EncodeOptions: block.EncodeOptions{Compression: block.LZ4Frame}})
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 2 || len(packed) != len(members) {
		t.Fatalf("%d packs, %d members placed; want 2 and %d", len(metas), len(packed), len(members))
	}
	for i, m := range metas {
		if _, r, ok := block.ParsePackKey(m.Key); !ok || r != raw.Ref() || !m.Pack || m.Ref() != raw.Ref() || !m.IsMemo() {
			t.Errorf("pack %d: key %s, pack %t, block %s; want a pack of %s", i, m.Key, m.Pack, m.Ref(), raw.Ref())
		}
		if !block.SameSegment(m, raw, transform.ColEventID) {
			t.Errorf("pack %d: event_id segment is not the raw block's", i)
		}
	}
	if metas[0].Key == metas[1].Key {
		t.Errorf("two packs under one key %s", metas[0].Key)
	}
	// Group a first (members 1 and 3, by key), then group b (4, 2, 0).
	wantOrder := [][]int{{3, 1}, {4, 2, 0}}
	for p, want := range wantOrder {
		var got []string
		for _, c := range metas[p].Columns[1:] {
			got = append(got, c.Name[:2])
		}
		var names []string
		for _, i := range want {
			names = append(names, block.MemberColumn(members[i].Component)[:2])
		}
		if strings.Join(got, ",") != strings.Join(names, ",") {
			t.Errorf("pack %d holds %v, want %v", p, got, names)
		}
	}
	for i, m := range members {
		p := packed[i]
		if p.Component != m.Component || p.Block != m.Block || p.Column.Name != block.MemberColumn(m.Component) {
			t.Fatalf("member %d placed as %+v", i, p)
		}
		meta, err := block.ReadFooter(ctx, st, p.Object)
		if err != nil {
			t.Fatal(err)
		}
		c, err := block.CheckMember(meta, p.Column.Name, m.Component, m.Block, "int64", 300)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if c != p.Column || c.Compression != block.LZ4Frame {
			t.Errorf("member %d: column %+v, placed as %+v", i, c, p.Column)
		}
		rec, err := block.ReadColumns(ctx, st, meta, []string{c.Name})
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(rec.Column(1), m.Value) || !array.Equal(rec.Column(0), ids) {
			t.Errorf("member %d reads back other values", i)
		}
		rec.Release()
		// The member at another input version, or another member's column,
		// is refused.
		if _, err := block.CheckMember(meta, p.Column.Name, m.Component, blockref.NewMemo(packBlock, m.Block.InputVersion()%3+1), "int64", 300); !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("member %d at another input version: %v", i, err)
		}
	}
}

// TestWritePacksRefuses: members that are not of the raw block version,
// twice the same component, or not row-aligned make no object.
func TestWritePacksRefuses(t *testing.T) {
	ctx := context.Background()
	raw, ids := packRaw(t, 10, 2)
	defer ids.Release()
	v, short := int64s(10, 1), int64s(9, 1)
	defer v.Release()
	defer short.Release()
	k := canon.Key{1}
	for name, ms := range map[string][]block.PackMember{
		"none":               nil,
		"other block":        {{Component: k, Block: blockref.NewMemo("20260101T000000Z-p00001-00000000000000000000-00000000000000000009", 1), Value: v}},
		"later version":      {{Component: k, Block: blockref.NewMemo(packBlock, 3), Value: v}},
		"component twice":    {{Component: k, Block: blockref.NewMemo(packBlock, 1), Value: v}, {Component: k, Block: blockref.NewMemo(packBlock, 2), Value: v}},
		"not row-aligned":    {{Component: k, Block: blockref.NewMemo(packBlock, 1), Value: short}},
		"no component":       {{Block: blockref.NewMemo(packBlock, 1), Value: v}},
		"no value":           {{Component: k, Block: blockref.NewMemo(packBlock, 1)}},
		"unsupported values": {{Component: k, Block: blockref.NewMemo(packBlock, 1), Value: array.NewNull(10)}},
	} {
		st := memstore.New()
		if _, _, err := block.WritePacks(ctx, st, raw, ids, ms, block.PackOptions{}); err == nil {
			t.Errorf("%s: written", name)
		}
		n := 0
		for range st.List(ctx, block.PackPrefix) {
			n++
		}
		if n != 0 {
			t.Errorf("%s: %d objects written", name, n)
		}
	}
}

// TestPackKeys: PackKey and ParsePackKey are inverse, NewPackKey never
// repeats, and nothing else parses as a pack key (a component's memo key
// among them).
func TestPackKeys(t *testing.T) {
	r := blockref.New(packBlock, 4)
	a, b := block.NewPackKey("ads", r), block.NewPackKey("ads", r)
	if a == b {
		t.Fatalf("NewPackKey repeated %s", a)
	}
	src, got, ok := block.ParsePackKey(a)
	if !ok || src != "ads" || got != r || !strings.HasPrefix(a, block.PackPrefix+"ads/"+packBlock+".v4/") {
		t.Fatalf("ParsePackKey(%s) = %s, %s, %t", a, src, got, ok)
	}
	for _, bad := range []string{
		block.MemoKey(canon.Key{1}, r.Memo(1)),
		block.RawKey("ads", r),
		block.PackPrefix + "ads/" + packBlock + "/x.arrow/y.arrow",
		block.PackPrefix + "ads/" + packBlock + ".arrow",
		block.PackPrefix + "ads/" + packBlock + "/.x.arrow",
		block.PackPrefix + "ads/" + packBlock + "/x",
	} {
		if _, _, ok := block.ParsePackKey(bad); ok {
			t.Errorf("ParsePackKey(%s) ok", bad)
		}
	}
	if _, _, ok := block.ParseMemoKey(a); ok {
		t.Errorf("a pack key parses as a memo key")
	}
}

// TestCheckMember: an entry naming a pack's column is refused, as
// ErrCorrupt, when the object is not a pack, the column is another
// component's or missing, the pack is of another block or of a version
// before the member's input version, or the member's type or rows differ;
// an entry written before packs (no column) is checked as before
// (CheckMemo).
func TestCheckMember(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	raw, ids := packRaw(t, 300, 2)
	defer ids.Release()
	k, other := canon.Key{0x81, 0x21}, canon.Key{0x91, 0x21}
	v := int64s(300, 3)
	defer v.Release()
	mb := blockref.NewMemo(packBlock, 2)
	metas, _, err := block.WritePacks(ctx, st, raw, ids, []block.PackMember{{Component: k, Block: mb, Value: v}}, block.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := metas[0]
	col := block.MemberColumn(k)
	if _, err := block.CheckMember(meta, col, k, mb, "int64", 300); err != nil {
		t.Fatalf("the member: %v", err)
	}
	_, legacy := memoObject(t, k, packBlock, 300)
	if c, err := block.CheckMember(legacy, "", k, blockref.ParseMemo(packBlock), "list<int64>", 300); err != nil || c.Name != block.MemoColumn {
		t.Fatalf("an object written before packs: %+v, %v", c, err)
	}
	edit := func(f func(*block.Meta)) block.Meta {
		c := meta.Clone()
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name   string
		meta   block.Meta
		column string
		k      canon.Key
		mb     blockref.Memo
		typ    string
		rows   int64
	}{
		{"not a pack", legacy, col, k, blockref.ParseMemo(packBlock), "list<int64>", 300},
		{"a pack as a legacy object", meta, "", k, mb, "int64", 300},
		{"another component's column", meta, block.MemberColumn(other), other, mb, "int64", 300},
		{"column of another name", meta, col, other, mb, "int64", 300},
		{"other block", meta, col, k, blockref.NewMemo("20260101T010000Z-p00000-00000000000000000300-00000000000000000599", 2), "int64", 300},
		{"input version past the pack's", edit(func(c *block.Meta) { c.Version = 1 }), col, k, mb, "int64", 300},
		{"other input version", meta, col, k, blockref.NewMemo(packBlock, 1), "int64", 300},
		{"other type", meta, col, k, mb, "string", 300},
		{"other rows", meta, col, k, mb, "int64", 299},
		{"no event_id first", edit(func(c *block.Meta) { c.Columns = c.Columns[1:] }), col, k, mb, "int64", 300},
		{"member missing", edit(func(c *block.Meta) { c.Columns = c.Columns[:1] }), col, k, mb, "int64", 300},
	} {
		if _, err := block.CheckMember(tc.meta, tc.column, tc.k, tc.mb, tc.typ, tc.rows); !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
}

// TestDamagedPackFooterRefused is TestDamagedMemoFooterRefused for a pack:
// every damage of its footer, checksums written to match, is refused by
// Decode then CheckMember.
func TestDamagedPackFooterRefused(t *testing.T) {
	raw, ids := packRaw(t, 300, 1)
	defer ids.Release()
	k := canon.Key{0x81, 0x21}
	v := int64s(300, 3)
	defer v.Release()
	mb := blockref.NewMemo(packBlock, 1)
	data, meta, err := block.EncodePack(block.NewPackKey("ads", raw.Ref()), raw, ids, []block.PackMember{{Component: k, Block: mb, Value: v}}, block.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range blocktest.PackFooterDamages {
		bad, err := blocktest.DamageFooter(data, d)
		if err != nil {
			t.Fatal(err)
		}
		got, rec, err := block.Decode(meta.Key, bad)
		if err == nil {
			rec.Release()
			_, err = block.CheckMember(got, block.MemberColumn(k), k, mb, "int64", 300)
		}
		if !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", d.Name, err)
		}
	}
}

// TestPackFooterRefusesOtherColumns: a pack's footer naming a member by
// anything but a component key, or at an input version past the pack's
// raw version, or an input version outside a pack, is ErrCorrupt when
// read.
func TestPackFooterRefusesOtherColumns(t *testing.T) {
	raw, ids := packRaw(t, 10, 1)
	defer ids.Release()
	v := int64s(10, 1)
	defer v.Release()
	k := canon.Key{0x42}
	data, meta, err := block.EncodePack(block.NewPackKey("ads", raw.Ref()), raw, ids, []block.PackMember{{Component: k, Block: blockref.NewMemo(packBlock, 1), Value: v}}, block.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := block.MemberColumn(k)
	for what, damage := range map[string]func(string) string{
		"a member named otherwise": func(f string) string { return strings.Replace(f, `"`+name+`"`, `"value"`, 1) },
		"an input version past the pack's": func(f string) string {
			return strings.Replace(f, `"crc32c":`, `"input_version":2,"crc32c":`, 2)
		},
		"an input version outside a pack": func(f string) string {
			return strings.Replace(strings.Replace(f, `"pack":true,`, `"component_key":"`+name+`",`, 1), `"crc32c":`, `"input_version":1,"crc32c":`, 1)
		},
	} {
		bad := blocktest.RewriteFooter(t, data, damage)
		if _, _, err := block.Decode(meta.Key, bad); !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", what, err)
		}
	}
}

// TestMemoWrittenBeforeServes: the memo object of one component written
// before packs (testdata/memo-v1, frozen) still decodes, passes the member
// check of an entry without a column, and is row-aligned with its raw
// block from the footers.
func TestMemoWrittenBeforeServes(t *testing.T) {
	rawData, err := os.ReadFile("testdata/memo-v1/raw.arrow")
	if err != nil {
		t.Fatal(err)
	}
	memoData, err := os.ReadFile("testdata/memo-v1/memo.arrow")
	if err != nil {
		t.Fatal(err)
	}
	const memoKey = "memo/bb39c7cc831d8e803e6a0c06617e2cb2c0889ada51025aaf3abffc869ab6fd38/20260101T000000Z-p00000-00000000000000000000-00000000000000000039.arrow"
	k, mb, ok := block.ParseMemoKey(memoKey)
	if !ok {
		t.Fatal("frozen memo key does not parse")
	}
	raw, rawRec, err := block.Decode("raw", rawData)
	if err != nil {
		t.Fatal(err)
	}
	defer rawRec.Release()
	meta, rec, err := block.Decode(memoKey, memoData)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	c, err := block.CheckMember(meta, "", k, mb, "int64", raw.Rows)
	if err != nil || c.Name != block.MemoColumn || meta.Pack {
		t.Fatalf("CheckMember: %+v, %v", c, err)
	}
	if !block.SameSegment(meta, raw, transform.ColEventID) || !array.Equal(rec.Column(0), rawRec.Column(0)) {
		t.Fatal("not row-aligned with its raw block")
	}
	if _, err := block.CheckMember(meta, block.MemberColumn(k), k, mb, "int64", raw.Rows); !errors.Is(err, block.ErrCorrupt) {
		t.Fatalf("read as a pack: %v", err)
	}
}

// TestPlanPacks runs testdata/packs.txt: members' sizes and groups, in
// order, cut into packs of a bound.
func TestPlanPacks(t *testing.T) {
	datadriven.RunTest(t, "testdata/packs.txt", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "plan" {
			td.Fatalf(t, "unknown command %q", td.Cmd)
		}
		var max int64
		td.ScanArgs(t, "max", &max)
		var names, groups []string
		var sizes []int64
		for _, line := range strings.Split(td.Input, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				td.Fatalf(t, "want <name> <group> <size>: %q", line)
			}
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			names, groups, sizes = append(names, f[0]), append(groups, f[1]), append(sizes, n)
		}
		var b strings.Builder
		for _, p := range block.PlanPacks(sizes, groups, max) {
			var total int64
			var ms []string
			for _, i := range p {
				ms = append(ms, names[i])
				total += sizes[i]
			}
			fmt.Fprintf(&b, "%s (%d)\n", strings.Join(ms, " "), total)
		}
		return b.String()
	})
}
