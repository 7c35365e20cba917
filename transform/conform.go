package transform

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// ErrColumn is wrapped by every error of Conform: a column a reader of
// Arrow from outside SIG needs is missing, repeated, of a type that does
// not convert to the schema's, or holds a value the schema's type cannot.
var ErrColumn = errors.New("column does not conform to the schema")

// Conform is the one place where Arrow from outside SIG meets a source's
// schema: a raw Arrow file (`sigctl run`), a raw block object read from the
// warehouse (workers and readers, through block.DecodeSegment, which hands
// a segment of another encoding to ConformArray). It returns a record of
// rec's columns names, in that order, each with the schema's Arrow type, so
// that everything after it (the kernels, row alignment by event_id, the
// memo encoder) may assume the schema's types and never meets a foreign
// one.
//
// Every column's layout is checked first (buffers as long as its length
// says, offsets in order and within their data, dictionary indices, views
// and run ends within what they point into), since Arrow's readers build
// arrays from whatever lengths a file states and the kernels then trust
// them. A column whose Arrow type is the schema's is taken as it is
// (retained, not copied). Otherwise it is converted, once, here, from any
// Arrow encoding another producer may write for the schema's type (Arrow
// JS's tableFromArrays dictionary-encodes strings, pyarrow and Polars write
// large and view types, Parquet readers name list elements "element"):
//
//   - int64: int8, int16, int32, uint8, uint16 and uint32 (every value
//     fits), and uint64 when every non-null value is at most MaxInt64;
//   - float64: float32 and float16 (exact);
//   - string: large_utf8 (64-bit offsets) and string_view (utf8_view);
//   - any of those three: dictionary-encoded (any integer index type, the
//     dictionary of any encoding above; a row is null when its index or
//     its dictionary value is) and run-end encoded (any run-end width);
//   - list<string>, list<int64>: list, large_list, list_view,
//     large_list_view and fixed_size_list, with elements of any encoding
//     of the element type, whatever the element field's name and
//     nullability (a list whose elements need no conversion keeps its
//     offsets and elements; only the type is renamed).
//
// Anything else is refused, float64 for an int64 column included (an id or
// a time that went through a float may already have lost digits), and so
// are binary for string (not text by type) and a value a conversion cannot
// hold: a string column or list over 2^31-1 bytes or elements, which SIG's
// 32-bit offsets cannot address. A column missing from rec or in it twice
// is refused, and so are nulls in event_id and event_time, which the schema
// declares non-nullable (Schema.Arrow). Every error wraps ErrColumn and
// names the column, its Arrow type and the schema's; the caller adds the
// file or object.
func Conform(s *Schema, rec arrow.Record, names []string) (arrow.Record, error) {
	cols, err := conformColumns(s, rec, names)
	if err != nil {
		return nil, err
	}
	return newRecord(conformedSchema(s, names), cols, rec.NumRows()), nil
}

// conformColumns is Conform's work: rec's columns names, in that order,
// each with the schema's Arrow type. The caller owns (releases) them.
func conformColumns(s *Schema, rec arrow.Record, names []string) ([]arrow.Array, error) {
	cols := make([]arrow.Array, 0, len(names))
	release := func() {
		for _, c := range cols {
			c.Release()
		}
	}
	for _, name := range names {
		f, ok := s.Lookup(name)
		if !ok {
			release()
			return nil, fmt.Errorf("%w: column %q is not in schema %q", ErrColumn, name, s.Source)
		}
		idx := rec.Schema().FieldIndices(name)
		switch len(idx) {
		case 0:
			release()
			return nil, fmt.Errorf("%w: no column %q", ErrColumn, name)
		case 1:
		default:
			release()
			return nil, fmt.Errorf("%w: column %q appears %d times", ErrColumn, name, len(idx))
		}
		in := rec.Column(idx[0])
		if int64(in.Len()) != rec.NumRows() {
			release()
			return nil, fmt.Errorf("%w: column %q has %d rows in a batch of %d", ErrColumn, name, in.Len(), rec.NumRows())
		}
		c, err := ConformArray(f, in)
		if err != nil {
			release()
			return nil, err
		}
		cols = append(cols, c)
		if nulls := c.NullN(); !nullable(name) && nulls > 0 {
			release()
			return nil, fmt.Errorf("%w: column %q has %d nulls; the schema allows none", ErrColumn, name, nulls)
		}
	}
	return cols, nil
}

// nullable reports whether the schema lets column name hold nulls: all but
// event_id and event_time (Schema.Arrow).
func nullable(name string) bool { return name != ColEventID && name != ColEventTime }

// conformedSchema is the Arrow schema of the records Conform returns for
// names, which must all be in s.
func conformedSchema(s *Schema, names []string) *arrow.Schema {
	fields := make([]arrow.Field, len(names))
	for i, name := range names {
		f, _ := s.Lookup(name)
		fields[i] = arrow.Field{Name: name, Type: f.Type.ArrowType(), Nullable: nullable(name)}
	}
	return arrow.NewSchema(fields, nil)
}

// newRecord is a record of cols under schema, which takes over the
// caller's references to cols.
func newRecord(schema *arrow.Schema, cols []arrow.Array, rows int64) arrow.Record {
	rec := array.NewRecord(schema, cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// ConformArray is Conform for one column: arr as an array of f's Arrow
// type, arr itself (retained) when it has that type, else converted as
// Conform lists. Its errors wrap ErrColumn and name f and both types.
func ConformArray(f Field, arr arrow.Array) (arrow.Array, error) {
	want := f.Type.ArrowType()
	if want == nil {
		return nil, fmt.Errorf("%w: column %q has no Arrow type (schema type %s)", ErrColumn, f.Name, f.Type)
	}
	d, err := guardConform(f.Type, arr.Data())
	if errors.Is(err, errNoMapping) {
		return nil, fmt.Errorf("%w: column %q has Arrow type %s, want %s%s", ErrColumn, f.Name, arr.DataType(), want, why(f.Type))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: column %q (Arrow type %s): %v", ErrColumn, f.Name, arr.DataType(), err)
	}
	if d == arr.Data() {
		d.Release()
		arr.Retain()
		return arr, nil
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}

// why is the hint an error of an unconvertible column of type t ends with.
func why(t Type) string {
	switch t {
	case Int64:
		return " (integers of other widths are converted when every value fits int64; floats are not)"
	case String:
		return " (large_utf8, string_view and dictionary- or run-end-encoded strings are converted; binary is not)"
	}
	return ""
}

// errNoMapping: an Arrow type is not an encoding of the wanted type. The
// caller names the column's own type, not the nested one that failed.
var errNoMapping = errors.New("no conversion")

// guardConform is conformData turning a panic on a malformed array (one
// that passed the checks below in a way they did not foresee) into an
// error.
func guardConform(t Type, d arrow.ArrayData) (out arrow.ArrayData, err error) {
	defer func() {
		if r := recover(); r != nil {
			if out != nil {
				out.Release()
			}
			out, err = nil, fmt.Errorf("malformed array: %v", r)
		}
	}()
	return conformData(t, d)
}

// conformData returns d as data of t's Arrow type: d itself, retained,
// when it has that type (after checkLayout), or new data converted from
// it. An error is errNoMapping when d's type is no encoding of t, else a
// layout or value error.
func conformData(t Type, d arrow.ArrayData) (arrow.ArrayData, error) {
	if t.IsList() {
		return conformList(t, d)
	}
	if arrow.TypeEqual(d.DataType(), t.ArrowType()) {
		if err := checkLayout(d); err != nil {
			return nil, err
		}
		d.Retain()
		return d, nil
	}
	switch dt := d.DataType().(type) {
	case *arrow.DictionaryType:
		return conformDictionary(t, d, dt)
	case *arrow.RunEndEncodedType:
		return conformRunEnds(t, d)
	}
	switch t {
	case Int64:
		return conformInts(d)
	case Float64:
		return conformFloats(d)
	case String:
		return conformStrings(d)
	}
	return nil, errNoMapping
}

// conformInts converts an integer column of another width to int64.
func conformInts(d arrow.ArrayData) (arrow.ArrayData, error) {
	get, ok := integers(d)
	if !ok {
		return nil, errNoMapping
	}
	if err := checkLayout(d); err != nil {
		return nil, err
	}
	valid := bitmapOfData(d)
	return buildFixed(arrow.PrimitiveTypes.Int64, d.Len(), func(i int) (int64, bool, error) {
		if valid.null(i) {
			return 0, false, nil
		}
		v, fits := get(i)
		if !fits {
			return 0, false, fmt.Errorf("value %d at row %d does not fit int64", uint64(v), i)
		}
		return v, true, nil
	})
}

// integers returns a reader of an integer column's row i (from its
// offset) as int64, false when a uint64 exceeds MaxInt64; ok is false if
// d is not of an integer type. The caller checks the layout first.
func integers(d arrow.ArrayData) (get func(i int) (int64, bool), ok bool) {
	return integersOf(d.DataType().ID(), d)
}

// integersOf is integers reading d's values buffer as integers of type id
// (a dictionary's indices).
func integersOf(id arrow.Type, d arrow.ArrayData) (get func(i int) (int64, bool), ok bool) {
	values := func() []byte {
		if b := d.Buffers(); len(b) > 1 && b[1] != nil {
			return b[1].Bytes()
		}
		return nil
	}
	off := d.Offset()
	switch id {
	case arrow.INT8:
		v := arrow.Int8Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), true }, true
	case arrow.INT16:
		v := arrow.Int16Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), true }, true
	case arrow.INT32:
		v := arrow.Int32Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), true }, true
	case arrow.INT64:
		v := arrow.Int64Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return v[off+i], true }, true
	case arrow.UINT8:
		v := arrow.Uint8Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), true }, true
	case arrow.UINT16:
		v := arrow.Uint16Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), true }, true
	case arrow.UINT32:
		v := arrow.Uint32Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), true }, true
	case arrow.UINT64:
		v := arrow.Uint64Traits.CastFromBytes(values())
		return func(i int) (int64, bool) { return int64(v[off+i]), v[off+i] <= math.MaxInt64 }, true
	}
	return nil, false
}

// conformFloats converts float32 and float16, exactly, to float64.
func conformFloats(d arrow.ArrayData) (arrow.ArrayData, error) {
	var get func(b []byte, i int) float64
	switch d.DataType().ID() {
	case arrow.FLOAT32:
		get = func(b []byte, i int) float64 { return float64(arrow.Float32Traits.CastFromBytes(b)[i]) }
	case arrow.FLOAT16:
		get = func(b []byte, i int) float64 { return float64(arrow.Float16Traits.CastFromBytes(b)[i].Float32()) }
	default:
		return nil, errNoMapping
	}
	if err := checkLayout(d); err != nil {
		return nil, err
	}
	var b []byte
	if bufs := d.Buffers(); bufs[1] != nil {
		b = bufs[1].Bytes()
	}
	valid, off := bitmapOfData(d), d.Offset()
	return buildFixed(arrow.PrimitiveTypes.Float64, d.Len(), func(i int) (float64, bool, error) {
		if valid.null(i) {
			return 0, false, nil
		}
		return get(b, off+i), true, nil
	})
}

// conformStrings converts large_utf8 and string_view to utf8.
func conformStrings(d arrow.ArrayData) (arrow.ArrayData, error) {
	var get func(i int) []byte
	switch d.DataType().ID() {
	case arrow.LARGE_STRING:
		offs, data, err := largeOffsets(d)
		if err != nil {
			return nil, err
		}
		get = func(i int) []byte { return data[offs[i]:offs[i+1]] }
	case arrow.STRING_VIEW:
		views, err := stringViews(d)
		if err != nil {
			return nil, err
		}
		get = views
	default:
		return nil, errNoMapping
	}
	valid := bitmapOfData(d)
	return buildStrings(d.Len(), func(i int) ([]byte, bool) {
		if valid.null(i) {
			return nil, false
		}
		return get(i), true
	})
}

// largeOffsets returns the n+1 offsets of a large_utf8 array's rows (from
// its offset) and its data, checked: validity, offsets non-negative,
// non-decreasing, within the data.
func largeOffsets(d arrow.ArrayData) ([]int64, []byte, error) {
	if err := checkValidity(d); err != nil {
		return nil, nil, err
	}
	off, n := d.Offset(), d.Len()
	ob, data := buffer(d, 1), buffer(d, 2)
	if n == 0 {
		return []int64{0}, nil, nil
	}
	if len(ob) < 8*(off+n+1) {
		return nil, nil, fmt.Errorf("%d bytes of 64-bit offsets for %d rows", len(ob), off+n)
	}
	offs := arrow.Int64Traits.CastFromBytes(ob)[off : off+n+1]
	if err := checkOffsets64(offs, off, int64(len(data))); err != nil {
		return nil, nil, err
	}
	return offs, data, nil
}

// checkOffsets64 checks 64-bit offsets: non-negative, non-decreasing,
// ending within limit. off is the index of offs[0], for the message.
func checkOffsets64(offs []int64, off int, limit int64) error {
	if offs[0] < 0 {
		return fmt.Errorf("first offset %d", offs[0])
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return fmt.Errorf("offset %d at row %d after %d", offs[i], off+i, offs[i-1])
		}
	}
	if last := offs[len(offs)-1]; last > limit {
		return fmt.Errorf("last offset %d beyond the %d values", last, limit)
	}
	return nil
}

// stringViews returns a reader of a string_view array's row i (from its
// offset), every non-null view checked first: a length that is not
// negative, and for a string longer than the 12 bytes a view holds inline,
// a data buffer that exists and holds it.
func stringViews(d arrow.ArrayData) (func(i int) []byte, error) {
	if err := checkValidity(d); err != nil {
		return nil, err
	}
	const viewSize = 16
	off, n := d.Offset(), d.Len()
	vb := buffer(d, 1)
	if len(vb) < viewSize*(off+n) {
		return nil, fmt.Errorf("%d bytes of views for %d rows", len(vb), off+n)
	}
	bufs := d.Buffers()
	data := make([][]byte, max(len(bufs)-2, 0))
	for k := range data {
		if bufs[k+2] != nil {
			data[k] = bufs[k+2].Bytes()
		}
	}
	valid := bitmapOfData(d)
	view := func(i int) []byte { return vb[viewSize*(off+i) : viewSize*(off+i+1)] }
	for i := range n {
		if valid.null(i) {
			continue
		}
		v := view(i)
		size := int32(leUint32(v))
		if size < 0 {
			return nil, fmt.Errorf("string of %d bytes at row %d", size, i)
		}
		if size <= 12 {
			continue
		}
		idx, start := int32(leUint32(v[8:])), int32(leUint32(v[12:]))
		if idx < 0 || int(idx) >= len(data) || start < 0 || int64(start)+int64(size) > int64(len(data[idx])) {
			return nil, fmt.Errorf("row %d: %d bytes at %d of data buffer %d, of %d buffers", i, size, start, idx, len(data))
		}
	}
	return func(i int) []byte {
		v := view(i)
		size := int32(leUint32(v))
		if size <= 12 {
			return v[4 : 4+size]
		}
		idx, start := leUint32(v[8:]), leUint32(v[12:])
		return data[idx][start : start+uint32(size)]
	}, nil
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// conformDictionary decodes a dictionary-encoded column of a scalar type:
// the dictionary is conformed to t (any encoding above), the indices
// (any integer type) checked to lie within it, and every row gathered.
func conformDictionary(t Type, d arrow.ArrayData, dt *arrow.DictionaryType) (arrow.ArrayData, error) {
	dict := d.Dictionary()
	if dict == nil {
		return nil, errors.New("dictionary-encoded without a dictionary")
	}
	values, err := conformData(t, dict)
	if err != nil {
		if errors.Is(err, errNoMapping) {
			return nil, err
		}
		return nil, fmt.Errorf("dictionary: %w", err)
	}
	defer values.Release()
	if err := checkLayout(d); err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	index, ok := integersOf(dt.IndexType.ID(), d)
	if !ok {
		return nil, fmt.Errorf("indices of type %s", dt.IndexType)
	}
	valid, size := bitmapOfData(d), values.Len()
	for i := range d.Len() {
		if k, fits := index(i); !valid.null(i) && (!fits || k < 0 || k >= int64(size)) {
			if !fits {
				return nil, fmt.Errorf("index %d at row %d outside the dictionary of %d values", uint64(k), i, size)
			}
			return nil, fmt.Errorf("index %d at row %d outside the dictionary of %d values", k, i, size)
		}
	}
	return gather(t, values, d.Len(), func(i int) (int, bool) {
		if valid.null(i) {
			return 0, false
		}
		k, _ := index(i)
		return int(k), true
	})
}

// conformRunEnds decodes a run-end-encoded column of a scalar type: the
// run ends (int16, int32 or int64) must be positive, increasing and cover
// the array's rows, each run with a value.
func conformRunEnds(t Type, d arrow.ArrayData) (arrow.ArrayData, error) {
	ch := d.Children()
	if len(ch) != 2 {
		return nil, fmt.Errorf("run-end encoded with %d children", len(ch))
	}
	values, err := conformData(t, ch[1])
	if err != nil {
		if errors.Is(err, errNoMapping) {
			return nil, err
		}
		return nil, fmt.Errorf("run values: %w", err)
	}
	defer values.Release()
	if err := checkLayout(ch[0]); err != nil {
		return nil, fmt.Errorf("run ends: %w", err)
	}
	end, ok := integers(ch[0])
	if !ok || nullCount(ch[0]) != 0 {
		return nil, fmt.Errorf("run ends of type %s with %d nulls", ch[0].DataType(), nullCount(ch[0]))
	}
	runs, off, n := ch[0].Len(), int64(d.Offset()), d.Len()
	if runs > values.Len() {
		return nil, fmt.Errorf("%d runs, %d values", runs, values.Len())
	}
	prev := int64(0)
	for r := range runs {
		e, _ := end(r)
		if e <= prev {
			return nil, fmt.Errorf("run end %d after %d", e, prev)
		}
		prev = e
	}
	if n > 0 && prev < off+int64(n) {
		return nil, fmt.Errorf("runs end at %d, before row %d", prev, off+int64(n))
	}
	// The run of row i: rows only increase, so one pass finds them all.
	run := 0
	return gather(t, values, n, func(i int) (int, bool) {
		if i == 0 {
			run = 0
		}
		for {
			if e, _ := end(run); e > off+int64(i) {
				return run, true
			}
			run++
		}
	})
}

// conformList converts a list column of any list layout, with elements of
// any encoding of t's element type, to t's Arrow list.
func conformList(t Type, d arrow.ArrayData) (arrow.ArrayData, error) {
	ch := d.Children()
	switch d.DataType().(type) {
	case *arrow.ListType, *arrow.LargeListType, *arrow.ListViewType, *arrow.LargeListViewType, *arrow.FixedSizeListType:
	default:
		return nil, errNoMapping
	}
	if len(ch) != 1 {
		return nil, fmt.Errorf("list with %d children", len(ch))
	}
	elems, err := conformData(t.Elem(), ch[0])
	if err != nil {
		if errors.Is(err, errNoMapping) {
			return nil, err
		}
		return nil, fmt.Errorf("list elements: %w", err)
	}
	defer elems.Release()
	if err := checkValidity(d); err != nil {
		return nil, err
	}
	off, n, limit := d.Offset(), d.Len(), int64(ch[0].Len())
	want := t.ArrowType()
	if lt, ok := d.DataType().(*arrow.ListType); ok {
		// The offsets stay; only the elements (if converted) and the
		// type's element field (name, nullability) change.
		if err := checkOffsetRange(buffer(d, 1), int64(off), int64(n), limit); err != nil {
			return nil, err
		}
		if elems == ch[0] && arrow.TypeEqual(lt, want) && lt.ElemField().Name == "item" && lt.ElemField().Metadata.Len() == 0 {
			d.Retain()
			return d, nil
		}
		bufs := d.Buffers()
		valid, nulls := bufs[0], nullCount(d)
		if nulls == 0 {
			valid = nil
		}
		return array.NewData(want, n, []*memory.Buffer{valid, bufs[1]}, []arrow.ArrayData{elems}, nulls, off), nil
	}
	// Every other layout: each row's elements [start, end) of the child,
	// checked, then copied into a list.
	span, err := listSpans(d, limit)
	if err != nil {
		return nil, err
	}
	valid := bitmapOfData(d)
	offsets := make([]int32, n+1)
	var total int64
	for i := range n {
		if !valid.null(i) {
			s, e := span(i)
			total += e - s
			if total > math.MaxInt32 {
				return nil, fmt.Errorf("more than %d elements", math.MaxInt32)
			}
		}
		offsets[i+1] = int32(total)
	}
	// The element of the output's position p: rows' spans in order.
	row, pos := 0, int64(0)
	child, err := gather(t.Elem(), elems, int(total), func(p int) (int, bool) {
		if p == 0 {
			row, pos = 0, 0
		}
		for int64(offsets[row+1]) <= int64(p) {
			row++
		}
		s, _ := span(row)
		pos = s + int64(p) - int64(offsets[row])
		return int(pos), true
	})
	if err != nil {
		return nil, err
	}
	defer child.Release()
	vbuf, nulls := validityCopy(d)
	return array.NewData(want, n, []*memory.Buffer{vbuf, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{child}, nulls, 0), nil
}

// listSpans returns the elements [start, end) of row i (from the array's
// offset) of a large_list, list_view, large_list_view or fixed_size_list,
// every non-null row checked to lie within the limit elements of the child.
func listSpans(d arrow.ArrayData, limit int64) (func(i int) (int64, int64), error) {
	off, n := d.Offset(), d.Len()
	valid := bitmapOfData(d)
	var span func(i int) (int64, int64)
	switch dt := d.DataType().(type) {
	case *arrow.LargeListType:
		ob := buffer(d, 1)
		if n == 0 {
			return func(int) (int64, int64) { return 0, 0 }, nil
		}
		if len(ob) < 8*(off+n+1) {
			return nil, fmt.Errorf("%d bytes of 64-bit offsets for %d rows", len(ob), off+n)
		}
		offs := arrow.Int64Traits.CastFromBytes(ob)[off : off+n+1]
		if err := checkOffsets64(offs, off, limit); err != nil {
			return nil, err
		}
		return func(i int) (int64, int64) { return offs[i], offs[i+1] }, nil
	case *arrow.FixedSizeListType:
		size := int64(dt.Len())
		if size < 0 || size > 0 && int64(off+n) > limit/size {
			return nil, fmt.Errorf("%d rows of %d elements, %d elements", off+n, size, limit)
		}
		return func(i int) (int64, int64) { s := int64(off+i) * size; return s, s + size }, nil
	case *arrow.ListViewType:
		ob, sb := buffer(d, 1), buffer(d, 2)
		if len(ob) < 4*(off+n) || len(sb) < 4*(off+n) {
			return nil, fmt.Errorf("%d bytes of offsets and %d of sizes for %d rows", len(ob), len(sb), off+n)
		}
		offs, sizes := arrow.Int32Traits.CastFromBytes(ob), arrow.Int32Traits.CastFromBytes(sb)
		span = func(i int) (int64, int64) { s := int64(offs[off+i]); return s, s + int64(sizes[off+i]) }
	case *arrow.LargeListViewType:
		ob, sb := buffer(d, 1), buffer(d, 2)
		if len(ob) < 8*(off+n) || len(sb) < 8*(off+n) {
			return nil, fmt.Errorf("%d bytes of offsets and %d of sizes for %d rows", len(ob), len(sb), off+n)
		}
		offs, sizes := arrow.Int64Traits.CastFromBytes(ob), arrow.Int64Traits.CastFromBytes(sb)
		span = func(i int) (int64, int64) { return offs[off+i], offs[off+i] + sizes[off+i] }
	default:
		return nil, errNoMapping
	}
	// A view's offset and size are each its own; sizes may be anything
	// under a null row.
	for i := range n {
		if valid.null(i) {
			continue
		}
		if s, e := span(i); s < 0 || e < s || e > limit {
			return nil, fmt.Errorf("row %d: elements [%d, %d) of %d", i, s, e, limit)
		}
	}
	return span, nil
}

// gather builds n rows of t (a scalar type) from src, data of t's Arrow
// type: row i is src's row at(i), or null when at says so or src's row is
// null. at is called for i = 0, 1, ... in order, possibly twice over.
func gather(t Type, src arrow.ArrayData, n int, at func(i int) (int, bool)) (arrow.ArrayData, error) {
	valid, off := bitmapOfData(src), src.Offset()
	switch t {
	case Int64, Float64:
		vals := buffer(src, 1)
		if t == Int64 {
			v := arrow.Int64Traits.CastFromBytes(vals)
			return buildFixed(arrow.PrimitiveTypes.Int64, n, func(i int) (int64, bool, error) {
				k, ok := at(i)
				if !ok || valid.null(k) {
					return 0, false, nil
				}
				return v[off+k], true, nil
			})
		}
		v := arrow.Float64Traits.CastFromBytes(vals)
		return buildFixed(arrow.PrimitiveTypes.Float64, n, func(i int) (float64, bool, error) {
			k, ok := at(i)
			if !ok || valid.null(k) {
				return 0, false, nil
			}
			return v[off+k], true, nil
		})
	case String:
		offs, data := arrow.Int32Traits.CastFromBytes(buffer(src, 1)), buffer(src, 2)
		return buildStrings(n, func(i int) ([]byte, bool) {
			k, ok := at(i)
			if !ok || valid.null(k) {
				return nil, false
			}
			return data[offs[off+k]:offs[off+k+1]], true
		})
	}
	return nil, errNoMapping
}

// buildFixed builds n rows of a fixed-width type from get (a value, its
// validity, an error that stops the build).
func buildFixed[T int64 | float64](dt arrow.DataType, n int, get func(i int) (T, bool, error)) (arrow.ArrayData, error) {
	vals := make([]T, n)
	bits := newBitmap(n)
	nulls := 0
	for i := range n {
		v, ok, err := get(i)
		if err != nil {
			return nil, err
		}
		if ok {
			vals[i] = v
			bitutil.SetBit(bits, i)
		} else {
			nulls++
		}
	}
	var vb []byte
	switch v := any(vals).(type) {
	case []int64:
		vb = arrow.Int64Traits.CastToBytes(v)
	case []float64:
		vb = arrow.Float64Traits.CastToBytes(v)
	}
	return array.NewData(dt, n, []*memory.Buffer{validityBuffer(bits, nulls), memory.NewBufferBytes(vb)}, nil, nulls, 0), nil
}

// buildStrings builds n utf8 rows from get (the bytes and validity of row
// i; called twice per row), refusing more bytes than 32-bit offsets
// address.
func buildStrings(n int, get func(i int) ([]byte, bool)) (arrow.ArrayData, error) {
	offsets := make([]int32, n+1)
	bits := newBitmap(n)
	var total int64
	nulls := 0
	for i := range n {
		b, ok := get(i)
		if ok {
			bitutil.SetBit(bits, i)
			total += int64(len(b))
			if total > math.MaxInt32 {
				return nil, fmt.Errorf("more than %d bytes of strings", math.MaxInt32)
			}
		} else {
			nulls++
		}
		offsets[i+1] = int32(total)
	}
	data := make([]byte, 0, total)
	for i := range n {
		if b, ok := get(i); ok {
			data = append(data, b...)
		}
	}
	return array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{validityBuffer(bits, nulls),
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes(data)}, nil, nulls, 0), nil
}

// newBitmap is a cleared validity bitmap for n rows. Every buffer Conform
// builds is exactly as long as its rows need (as Arrow C++'s builders and
// IPC writer make them): Arrow's IPC writer writes a buffer up to its
// 64-byte padded size as it is, so the bytes of a converted column, where
// a kernel passes it through to a memo object, do not depend on how much
// spare room the foreign producer left.
func newBitmap(n int) []byte { return make([]byte, bitutil.BytesForBits(int64(n))) }

// validityBuffer is bits as a validity buffer, nil without nulls (as
// Arrow's readers leave it).
func validityBuffer(bits []byte, nulls int) *memory.Buffer {
	if nulls == 0 {
		return nil
	}
	return memory.NewBufferBytes(bits)
}

// validityCopy is d's validity bitmap from its offset, as a buffer of its
// own, and its null count.
func validityCopy(d arrow.ArrayData) (*memory.Buffer, int) {
	if nullCount(d) == 0 {
		return nil, 0
	}
	bits := newBitmap(d.Len())
	bitutil.CopyBitmap(buffer(d, 0), d.Offset(), d.Len(), bits, 0)
	return memory.NewBufferBytes(bits), d.Len() - bitutil.CountSetBits(bits, 0, d.Len())
}

// nullCount is d's null count, counted from its bitmap when d does not
// know it yet (a slice).
func nullCount(d arrow.ArrayData) int {
	n := d.NullN()
	if n >= 0 {
		return n
	}
	bits := buffer(d, 0)
	if bits == nil {
		return 0
	}
	if len(bits)*8 < d.Offset()+d.Len() {
		return -1 // checkValidity refuses it
	}
	return d.Len() - bitutil.CountSetBits(bits, d.Offset(), d.Len())
}

// bitmapOfData is d's validity, nil without nulls; checkValidity (or
// checkLayout) has checked it covers d's rows.
func bitmapOfData(d arrow.ArrayData) bitmap {
	if nullCount(d) == 0 {
		return bitmap{}
	}
	return bitmap{bits: buffer(d, 0), off: d.Offset()}
}

// buffer is d's buffer i, nil if it has none.
func buffer(d arrow.ArrayData, i int) []byte {
	if bufs := d.Buffers(); i < len(bufs) && bufs[i] != nil {
		return bufs[i].Bytes()
	}
	return nil
}

// checkValidity checks d's offset, length and null count, and that its
// validity bitmap covers its rows when it has nulls.
func checkValidity(d arrow.ArrayData) error {
	off, n := int64(d.Offset()), int64(d.Len())
	if off < 0 || n < 0 {
		return fmt.Errorf("offset %d, length %d", off, n)
	}
	if nulls := int64(nullCount(d)); nulls < 0 || nulls > n {
		return fmt.Errorf("%d nulls in %d rows", nulls, n)
	} else if nulls > 0 && int64(len(buffer(d, 0)))*8 < off+n {
		return fmt.Errorf("validity bitmap of %d bytes for %d rows", len(buffer(d, 0)), off+n)
	}
	return nil
}

// checkLayout checks that an array of a fixed-width type (dictionary
// indices included), utf8 or a list of those is what its length and null
// count say: a validity bitmap covering its rows when it has nulls, a
// values buffer long enough, offsets that start at or after 0, never
// decrease and end within the values (or the list's child, checked in
// turn). It reads only offsets, never values; a malformed array makes it
// return an error, never panic.
func checkLayout(d arrow.ArrayData) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed array: %v", r)
		}
	}()
	if err := checkValidity(d); err != nil {
		return err
	}
	off, n := int64(d.Offset()), int64(d.Len())
	end := off + n
	switch dt := d.DataType().(type) {
	case arrow.FixedWidthDataType:
		w := int64(dt.BitWidth() / 8)
		if dt.BitWidth()%8 != 0 || int64(len(buffer(d, 1))) < end*w {
			return fmt.Errorf("%d bytes of values for %d rows of %s", len(buffer(d, 1)), end, dt)
		}
		return nil
	case *arrow.StringType:
		return checkOffsetRange(buffer(d, 1), off, n, int64(len(buffer(d, 2))))
	case *arrow.ListType:
		children := d.Children()
		if len(children) != 1 {
			return fmt.Errorf("list with %d children", len(children))
		}
		if err := checkOffsetRange(buffer(d, 1), off, n, int64(children[0].Len())); err != nil {
			return err
		}
		if err := checkLayout(children[0]); err != nil {
			return fmt.Errorf("list elements: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unexpected type %s", d.DataType())
}

// checkOffsetRange checks the n+1 int32 offsets from off of a utf8 or list
// array: within b, non-negative, non-decreasing, ending within limit.
func checkOffsetRange(b []byte, off, n, limit int64) error {
	if n == 0 && len(b) == 0 {
		return nil
	}
	if int64(len(b)) < 4*(off+n+1) {
		return fmt.Errorf("%d bytes of offsets for %d rows", len(b), off+n)
	}
	offs := arrow.Int32Traits.CastFromBytes(b)[off : off+n+1]
	if offs[0] < 0 {
		return fmt.Errorf("first offset %d", offs[0])
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return fmt.Errorf("offset %d at row %d after %d", offs[i], off+int64(i), offs[i-1])
		}
	}
	if int64(offs[n]) > limit {
		return fmt.Errorf("last offset %d beyond the %d values", offs[n], limit)
	}
	return nil
}
