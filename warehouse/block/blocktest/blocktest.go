package blocktest

import (
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Column is rec's column name.
func Column(rec arrow.Record, name string) arrow.Array {
	return rec.Column(rec.Schema().FieldIndices(name)[0])
}

// Float64s is rec's int64 column name as float64s: the same values, of the
// wrong type.
func Float64s(rec arrow.Record, name string) arrow.Array {
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	defer b.Release()
	for _, v := range Column(rec, name).(*array.Int64).Int64Values() {
		b.Append(float64(v))
	}
	return b.NewArray()
}

// Strings is a utf8 column of n rows of s.
func Strings(s string, n int64) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for range n {
		b.Append(s)
	}
	return b.NewArray()
}

// WithColumn is rec with column name replaced by col, its field typed as
// col is. The caller releases it.
func WithColumn(rec arrow.Record, name string, col arrow.Array) arrow.Record {
	fields := rec.Schema().Fields()
	cols := append([]arrow.Array(nil), rec.Columns()...)
	for j := range fields {
		if fields[j].Name == name {
			fields[j].Type, cols[j] = col.DataType(), col
		}
	}
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// Renamed is base's meta for a raw block of the same source named id: its
// object key follows, and its column list is left for Encode to fill.
func Renamed(base block.Meta, id string) block.Meta {
	m := base
	m.ID, m.Key, m.Columns = id, block.RawKey(base.Source, blockref.New(id, 1)), nil
	return m
}
