package transform

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// ErrColumn is wrapped by every error of Conform: a column a reader of
// Arrow from outside SIG needs is missing, repeated, of a type that does
// not convert to the schema's, or holds a value the schema's type cannot.
var ErrColumn = errors.New("column does not conform to the schema")

// Conform is the one place where Arrow from outside SIG meets a source's
// schema: a raw Arrow file (`sigctl run`), a raw block object read from the
// warehouse (workers, readers). It returns a record of rec's columns names,
// in that order, each with the schema's Arrow type, so that everything
// after it (the kernels, row alignment by event_id, the memo encoder) may
// assume the schema's types and never meets a foreign one.
//
// Every column's layout is checked first (checkLayout: buffers as long as
// its length says, offsets in order and within their data), since Arrow's
// readers build arrays from whatever lengths a file states and the kernels
// then trust them. A column whose Arrow type is the schema's is taken as it
// is (retained, not copied). The conversions, each exact, made once here:
//
//   - to int64: int8, int16, int32, uint8, uint16 and uint32 (every value
//     fits), and uint64 when every non-null value is at most MaxInt64.
//
// Anything else is refused, float64 for an int64 column included (an id or
// a time that went through a float may already have lost digits). A column
// missing from rec or in it twice is refused, and so are nulls in event_id
// and event_time, which the schema declares non-nullable (Schema.Arrow).
// Every error wraps ErrColumn and names the column, its Arrow type and the
// schema's; the caller adds the file or object.
func Conform(s *Schema, rec arrow.Record, names []string) (arrow.Record, error) {
	fields := make([]arrow.Field, len(names))
	cols := make([]arrow.Array, 0, len(names))
	release := func() {
		for _, c := range cols {
			c.Release()
		}
	}
	for i, name := range names {
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
		c, err := conformColumn(f, in)
		if err != nil {
			release()
			return nil, err
		}
		cols = append(cols, c)
		nullable := name != ColEventID && name != ColEventTime
		if nulls := c.NullN(); !nullable && nulls > 0 {
			release()
			return nil, fmt.Errorf("%w: column %q has %d nulls; the schema allows none", ErrColumn, name, nulls)
		}
		fields[i] = arrow.Field{Name: name, Type: c.DataType(), Nullable: nullable}
	}
	out := array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	release()
	return out, nil
}

// conformColumn returns arr as an array of f's type: arr itself
// (retained) when it has that type, a converted copy when a conversion of
// Conform's list applies, and otherwise an error naming both types. Later
// encodings (dictionary, large or view strings) are added here.
func conformColumn(f Field, arr arrow.Array) (arrow.Array, error) {
	want := f.Type.ArrowType()
	same := arrow.TypeEqual(arr.DataType(), want)
	var get func(i int) (int64, bool) // an integer column's row i as int64; false if it does not fit
	if !same && f.Type == Int64 {
		switch a := arr.(type) {
		case *array.Int8:
			get = func(i int) (int64, bool) { return int64(a.Value(i)), true }
		case *array.Int16:
			get = func(i int) (int64, bool) { return int64(a.Value(i)), true }
		case *array.Int32:
			get = func(i int) (int64, bool) { return int64(a.Value(i)), true }
		case *array.Uint8:
			get = func(i int) (int64, bool) { return int64(a.Value(i)), true }
		case *array.Uint16:
			get = func(i int) (int64, bool) { return int64(a.Value(i)), true }
		case *array.Uint32:
			get = func(i int) (int64, bool) { return int64(a.Value(i)), true }
		case *array.Uint64:
			get = func(i int) (int64, bool) { v := a.Value(i); return int64(v), v <= math.MaxInt64 }
		}
	}
	if !same && get == nil {
		why := ""
		if f.Type == Int64 {
			why = " (integers of other widths are converted when every value fits int64; floats are not)"
		}
		return nil, fmt.Errorf("%w: column %q has Arrow type %s, want %s%s", ErrColumn, f.Name, arr.DataType(), want, why)
	}
	if err := checkLayout(arr.Data()); err != nil {
		return nil, fmt.Errorf("%w: column %q (Arrow type %s): %v", ErrColumn, f.Name, arr.DataType(), err)
	}
	if same {
		arr.Retain()
		return arr, nil
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(arr.Len())
	for i := 0; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			b.UnsafeAppendBoolToBitmap(false)
			continue
		}
		v, ok := get(i)
		if !ok {
			return nil, fmt.Errorf("%w: column %q (Arrow type %s): value %d at row %d does not fit int64",
				ErrColumn, f.Name, arr.DataType(), arr.(*array.Uint64).Value(i), i)
		}
		b.UnsafeAppend(v)
	}
	return b.NewArray(), nil
}

// checkLayout checks that an array of one of the types Conform takes
// (fixed-width numbers, utf8, lists of those) is what its length and null
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
	off, n := int64(d.Offset()), int64(d.Len())
	bufs := d.Buffers()
	buf := func(i int) []byte {
		if i < len(bufs) && bufs[i] != nil {
			return bufs[i].Bytes()
		}
		return nil
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("offset %d, length %d", off, n)
	}
	end := off + n
	if nulls := int64(d.NullN()); nulls < 0 || nulls > n {
		return fmt.Errorf("%d nulls in %d rows", nulls, n)
	} else if nulls > 0 && int64(len(buf(0)))*8 < end {
		return fmt.Errorf("validity bitmap of %d bytes for %d rows", len(buf(0)), end)
	}
	switch dt := d.DataType().(type) {
	case arrow.FixedWidthDataType:
		w := int64(dt.BitWidth() / 8)
		if dt.BitWidth()%8 != 0 || int64(len(buf(1))) < end*w {
			return fmt.Errorf("%d bytes of values for %d rows of %s", len(buf(1)), end, dt)
		}
		return nil
	case *arrow.StringType:
		return checkOffsetRange(buf(1), off, n, int64(len(buf(2))))
	case *arrow.ListType:
		children := d.Children()
		if len(children) != 1 {
			return fmt.Errorf("list with %d children", len(children))
		}
		if err := checkOffsetRange(buf(1), off, n, int64(children[0].Len())); err != nil {
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
