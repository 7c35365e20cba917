package block_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
)

// memoObject encodes a memo object of rows rows of component k for raw
// block id, as workers lay it out: event_id, then the value
// (list<int64>).
func memoObject(t *testing.T, k canon.Key, id string, rows int) ([]byte, block.Meta) {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "event_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: block.MemoColumn, Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	lb := b.Field(1).(*array.ListBuilder)
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(1000 + i))
		lb.Append(true)
		for j := range i % 4 {
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(i * j))
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	m := blockref.ParseMemo(id)
	data, meta, err := block.Encode(block.Meta{Key: block.MemoKey(k, m), ID: id, Source: "ads", ComponentKey: k}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return data, meta
}

// TestCheckMemo: the footer check readers and sigd share accepts the memo
// object a reader expects and refuses, as ErrCorrupt, one of another
// component, block, input version, columns, types or rows.
func TestCheckMemo(t *testing.T) {
	k, other := canon.Key{0x81, 0x21}, canon.Key{0x91, 0x21}
	id := "20260101T000000Z-p00000-00000000000000000000-00000000000000000299"
	_, meta := memoObject(t, k, id, 300)
	m := blockref.ParseMemo(id)
	if err := block.CheckMemo(meta, k, m, "list<int64>", 300); err != nil {
		t.Fatalf("the expected memo object: %v", err)
	}
	edit := func(f func(*block.Meta)) block.Meta {
		c := meta.Clone()
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		meta block.Meta
		k    canon.Key
		m    blockref.Memo
		typ  string
		rows int64
	}{
		{"other component", meta, other, m, "list<int64>", 300},
		{"other block", meta, k, blockref.ParseMemo("20260101T010000Z-p00000-00000000000000000300-00000000000000000599"), "list<int64>", 300},
		{"other input version", meta, k, blockref.NewMemo(id, 2), "list<int64>", 300},
		{"other type", meta, k, m, "int64", 300},
		{"other rows", meta, k, m, "list<int64>", 299},
		{"value renamed", edit(func(c *block.Meta) { c.Columns[1].Name = "walue" }), k, m, "list<int64>", 300},
		{"one column", edit(func(c *block.Meta) { c.Columns = c.Columns[1:] }), k, m, "list<int64>", 300},
		{"event_id of another type", edit(func(c *block.Meta) { c.Columns[0].Type = "float64" }), k, m, "list<int64>", 300},
	} {
		if err := block.CheckMemo(tc.meta, tc.k, tc.m, tc.typ, tc.rows); !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
}

// TestDamagedMemoFooterRefused (issue 27): every damage of a memo object's
// footer that readers refuse is refused by the whole-object check sigd
// verifies a report with, block.Decode then block.CheckMemo, even with the
// footer's own CRC-32C written to match: a footer whose JSON still parses
// to other values (a segment's place or checksum, the rows, the component
// key, the block id) is as corrupt as one that does not parse.
func TestDamagedMemoFooterRefused(t *testing.T) {
	k := canon.Key{0x81, 0x21}
	id := "20260101T000000Z-p00000-00000000000000000000-00000000000000000299"
	data, meta := memoObject(t, k, id, 300)
	for _, d := range blocktest.MemoFooterDamages {
		bad, err := blocktest.DamageFooter(data, d)
		if err != nil {
			t.Fatal(err)
		}
		got, rec, err := block.Decode(meta.Key, bad)
		if err == nil {
			rec.Release()
			err = block.CheckMemo(got, k, blockref.ParseMemo(id), "list<int64>", 300)
		}
		if !errors.Is(err, block.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", d.Name, err)
		}
	}
}
