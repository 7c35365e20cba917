package transform

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestConformEncodings feeds Conform every Arrow encoding another producer
// may write for each DSL type (dictionary with every index type, large and
// view strings, run-end encoding, every list layout, list elements named
// and typed otherwise), whole and sliced: each comes out with the schema's
// Arrow type, the same values (nulls included), and buffers exactly as
// long as its rows need, as Arrow C++ writes them.
func TestConformEncodings(t *testing.T) {
	s := arrow.BinaryTypes.String
	dict := func(idx arrow.DataType, vals arrow.DataType) arrow.DataType {
		return &arrow.DictionaryType{IndexType: idx, ValueType: vals}
	}
	strs := `["a", null, "a long string of more than twelve bytes", "", "a", "ünï", null, "a long string of more than twelve bytes"]`
	ints := `[5, null, -3, 0, 5, 9223372036854775807, null, -9223372036854775808]`
	floats := `[0.5, null, -3, 0, 0.5, 1e300, null, -0.0]`
	liststrs := `[["a", null, "b"], null, [], ["a long string of more than twelve bytes"], ["a"], null, ["", "c"], []]`
	listints := `[[1, null, 2], null, [], [9223372036854775807], [1], null, [0, -1], []]`
	type enc struct {
		dt   arrow.DataType
		json string // when the values differ from the plain JSON (narrower integers)
	}
	cases := []struct {
		typ  Type
		json string
		encs []enc
	}{
		{String, strs, []enc{
			{dt: arrow.BinaryTypes.LargeString}, {dt: arrow.BinaryTypes.StringView},
			{dt: dict(arrow.PrimitiveTypes.Int8, s)}, {dt: dict(arrow.PrimitiveTypes.Int16, s)},
			{dt: dict(arrow.PrimitiveTypes.Int32, s)}, {dt: dict(arrow.PrimitiveTypes.Int64, s)},
			{dt: dict(arrow.PrimitiveTypes.Uint8, s)}, {dt: dict(arrow.PrimitiveTypes.Uint16, s)},
			{dt: dict(arrow.PrimitiveTypes.Uint32, s)}, {dt: dict(arrow.PrimitiveTypes.Uint64, s)},
			{dt: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int16, s)},
			{dt: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, s)},
			{dt: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.LargeString)},
		}},
		{Int64, ints, []enc{
			{dt: dict(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64)},
			{dt: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64)},
			{dt: dict(arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Int16), json: `[5, null, -3, 0, 5, 32767, null, -32768]`},
		}},
		{Float64, floats, []enc{
			{dt: arrow.PrimitiveTypes.Float32, json: `[0.5, null, -3, 0, 0.5, 1048576.25, null, -0.0]`},
			{dt: dict(arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Float64)},
		}},
		{ListString, liststrs, []enc{
			{dt: arrow.LargeListOf(s)}, {dt: arrow.ListViewOf(s)}, {dt: arrow.LargeListViewOf(s)},
			{dt: arrow.ListOfField(arrow.Field{Name: "element", Type: s, Nullable: true})},
			{dt: arrow.ListOf(arrow.BinaryTypes.LargeString)},
			{dt: arrow.ListOf(dict(arrow.PrimitiveTypes.Int32, s))},
			{dt: arrow.LargeListViewOf(arrow.BinaryTypes.StringView)},
		}},
		{ListInt64, listints, []enc{
			{dt: arrow.LargeListOf(arrow.PrimitiveTypes.Int64)}, {dt: arrow.ListViewOf(arrow.PrimitiveTypes.Int64)},
			{dt: arrow.ListOf(arrow.PrimitiveTypes.Int32), json: `[[1, null, 2], null, [], [2147483647], [1], null, [0, -1], []]`},
		}},
	}
	mem := memory.DefaultAllocator
	for _, tc := range cases {
		for _, e := range tc.encs {
			js := tc.json
			if e.json != "" {
				js = e.json
			}
			want, _, err := array.FromJSON(mem, tc.typ.ArrowType(), strings.NewReader(js))
			if err != nil {
				t.Fatal(err)
			}
			in, _, err := array.FromJSON(mem, e.dt, strings.NewReader(js))
			if err != nil {
				t.Fatalf("%s: %v", e.dt, err)
			}
			for _, slice := range [][2]int64{{0, int64(in.Len())}, {1, int64(in.Len()) - 1}, {3, 3}} {
				w, g := array.NewSlice(want, slice[0], slice[1]), array.NewSlice(in, slice[0], slice[1])
				got, err := ConformArray(Field{Name: "c", Type: tc.typ}, g)
				if err != nil {
					t.Errorf("%s %v: %v", e.dt, slice, err)
					continue
				}
				if !arrow.TypeEqual(got.DataType(), tc.typ.ArrowType()) || !array.Equal(got, w) {
					t.Errorf("%s %v: got %s %v, want %v", e.dt, slice, got.DataType(), got, w)
				} else if err := exactBuffers(got.Data()); err != nil {
					t.Errorf("%s %v: %v", e.dt, slice, err)
				}
				got.Release()
				w.Release()
				g.Release()
			}
			in.Release()
			want.Release()
		}
	}
}

// TestConformDictionaryAndViewsByHand: encodings Arrow Go's builders do not
// write but other producers may: a dictionary of large_utf8 or string_view
// values with nulls among them (a row is null when its dictionary value
// is), and list views that overlap and run out of order.
func TestConformDictionaryAndViewsByHand(t *testing.T) {
	mem := memory.DefaultAllocator
	fromJSON := func(dt arrow.DataType, js string) arrow.Array {
		a, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	want := fromJSON(arrow.BinaryTypes.String, `["x", null, "a long string of more than twelve bytes", null, "x"]`)
	idx := fromJSON(arrow.PrimitiveTypes.Int32, `[0, 1, 2, null, 0]`)
	for _, vt := range []arrow.DataType{arrow.BinaryTypes.LargeString, arrow.BinaryTypes.StringView} {
		vals := fromJSON(vt, `["x", null, "a long string of more than twelve bytes"]`)
		d := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: vt}, idx, vals)
		got, err := ConformArray(Field{Name: "c", Type: String}, d)
		if err != nil {
			t.Fatalf("dictionary of %s: %v", vt, err)
		}
		if !array.Equal(got, want) {
			t.Errorf("dictionary of %s: got %v, want %v", vt, got, want)
		}
	}
	// Rows [c a] [a b c] [] [b] over elements [a b c]: out of order,
	// overlapping, one empty.
	elems := fromJSON(arrow.BinaryTypes.String, `["a", "b", "c"]`)
	offs := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{2, 0, 3, 1}))
	sizes := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{1, 3, 0, 1}))
	lv := array.MakeFromData(array.NewData(arrow.ListViewOf(arrow.BinaryTypes.String), 4,
		[]*memory.Buffer{nil, offs, sizes}, []arrow.ArrayData{elems.Data()}, 0, 0))
	got, err := ConformArray(Field{Name: "c", Type: ListString}, lv)
	if err != nil {
		t.Fatal(err)
	}
	if w := fromJSON(ListString.ArrowType(), `[["c"], ["a", "b", "c"], [], ["b"]]`); !array.Equal(got, w) {
		t.Errorf("list view: got %v, want %v", got, w)
	}
}

// TestConformRefusesMalformedEncodings: a foreign encoding whose indices,
// views, runs or spans point outside what they index is an error naming
// it, never a panic or a read out of bounds.
func TestConformRefusesMalformedEncodings(t *testing.T) {
	mem := memory.DefaultAllocator
	fromJSON := func(dt arrow.DataType, js string) arrow.Array {
		a, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	i32 := func(v ...int32) *memory.Buffer { return memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(v)) }
	vals := fromJSON(arrow.BinaryTypes.String, `["a", "b"]`)
	view := make([]byte, 16) // a 20-byte string in data buffer 3, which does not exist
	view[0], view[8] = 20, 3
	for _, tc := range []struct {
		name string
		typ  Type
		arr  arrow.Array
		want string
	}{
		{"index past the dictionary", String, array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32,
			ValueType: arrow.BinaryTypes.String}, fromJSON(arrow.PrimitiveTypes.Int32, `[0, 2]`), vals),
			"index 2 at row 1 outside the dictionary of 2 values"},
		{"negative index", String, array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8,
			ValueType: arrow.BinaryTypes.String}, fromJSON(arrow.PrimitiveTypes.Int8, `[-1]`), vals),
			"index -1 at row 0 outside the dictionary of 2 values"},
		{"view into a missing buffer", String, array.MakeFromData(array.NewData(arrow.BinaryTypes.StringView, 1,
			[]*memory.Buffer{nil, memory.NewBufferBytes(view)}, nil, 0, 0)),
			"row 0: 20 bytes at 0 of data buffer 3, of 0 buffers"},
		{"short views", String, array.MakeFromData(array.NewData(arrow.BinaryTypes.StringView, 2,
			[]*memory.Buffer{nil, memory.NewBufferBytes(view)}, nil, 0, 0)), "16 bytes of views for 2 rows"},
		{"list view past its elements", ListString, array.MakeFromData(array.NewData(arrow.ListViewOf(arrow.BinaryTypes.String), 1,
			[]*memory.Buffer{nil, i32(1), i32(2)}, []arrow.ArrayData{vals.Data()}, 0, 0)), "row 0: elements [1, 3) of 2"},
		{"runs out of order", String, array.NewRunEndEncodedArray(fromJSON(arrow.PrimitiveTypes.Int32, `[2, 1]`), vals, 2, 0),
			"run end 1 after 2"},
		{"runs too short", String, array.NewRunEndEncodedArray(fromJSON(arrow.PrimitiveTypes.Int32, `[1, 2]`), vals, 3, 0),
			"runs end at 2, before row 3"},
		{"binary is not text", String, fromJSON(arrow.BinaryTypes.Binary, `["YQ=="]`), "has Arrow type binary, want utf8"},
		{"list of floats", ListInt64, fromJSON(arrow.LargeListOf(arrow.PrimitiveTypes.Float64), `[[1]]`),
			"has Arrow type large_list<item: float64, nullable>, want list<item: int64, nullable>"},
		{"dictionary of floats for int64", Int64, array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8,
			ValueType: arrow.PrimitiveTypes.Float64}, fromJSON(arrow.PrimitiveTypes.Int8, `[0]`), fromJSON(arrow.PrimitiveTypes.Float64, `[1]`)),
			"has Arrow type dictionary<values=float64, indices=int8, ordered=false>, want int64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConformArray(Field{Name: "c", Type: tc.typ}, tc.arr)
			if !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an ErrColumn with %q", err, tc.want)
			}
		})
	}
	// Arrays Arrow's constructors refuse (with a panic) but its IPC reader
	// builds data for.
	if _, err := guardConform(String, array.NewData(arrow.BinaryTypes.LargeString, 1, []*memory.Buffer{nil,
		memory.NewBufferBytes(arrow.Int64Traits.CastToBytes([]int64{0, 9})), memory.NewBufferBytes([]byte("ab"))}, nil, 0, 0)); err == nil ||
		!strings.Contains(err.Error(), "last offset 9 beyond the 2 values") {
		t.Errorf("large_utf8 offsets past the data: %v", err)
	}
}

// exactBuffers checks that the buffers of d, converted by Conform, are as
// long as its rows need: validity (when it has nulls), values, offsets and
// string bytes, and its list elements' in turn.
func exactBuffers(d arrow.ArrayData) error {
	n, bufs := d.Len(), d.Buffers()
	if d.Offset() != 0 {
		return nil // taken as it was (a slice of an array of the schema's type)
	}
	// A list's validity and offsets may be the input's own (a list whose
	// elements alone were converted).
	if d.DataType().ID() != arrow.LIST && nullCount(d) > 0 && bufs[0].Len() != int(bitutil.BytesForBits(int64(n))) {
		return fmt.Errorf("validity of %d bytes for %d rows", bufs[0].Len(), n)
	}
	switch d.DataType().ID() {
	case arrow.INT64, arrow.FLOAT64:
		if bufs[1].Len() != 8*n {
			return fmt.Errorf("values of %d bytes for %d rows", bufs[1].Len(), n)
		}
	case arrow.STRING:
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
		if len(offs) != n+1 || bufs[2].Len() != int(offs[n]) {
			return fmt.Errorf("%d offsets and %d bytes for %d rows of %d bytes", len(offs), bufs[2].Len(), n, offs[len(offs)-1])
		}
	case arrow.LIST:
		return exactBuffers(d.Children()[0])
	}
	return nil
}
