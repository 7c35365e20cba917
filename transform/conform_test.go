package transform

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/float16"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestConformForeignTypes feeds Conform an int64 column (advertiser_id)
// and event_id of every Arrow type a foreign file might hold: the integer
// types convert exactly (nulls kept), everything else is refused with the
// column and both types named, and nothing panics.
func TestConformForeignTypes(t *testing.T) {
	mem := memory.DefaultAllocator
	vals := []int64{0, 1, 127, 42, 7}
	valid := []bool{true, true, true, false, true}
	build := func(b array.Builder, add func(v int64)) arrow.Array {
		for i, v := range vals {
			if valid[i] {
				add(v)
			} else {
				b.AppendNull()
			}
		}
		return b.NewArray()
	}
	type mk func() arrow.Array
	ok := map[string]mk{
		"int8": func() arrow.Array {
			b := array.NewInt8Builder(mem)
			return build(b, func(v int64) { b.Append(int8(v)) })
		},
		"int16": func() arrow.Array {
			b := array.NewInt16Builder(mem)
			return build(b, func(v int64) { b.Append(int16(v)) })
		},
		"int32": func() arrow.Array {
			b := array.NewInt32Builder(mem)
			return build(b, func(v int64) { b.Append(int32(v)) })
		},
		"int64": func() arrow.Array { b := array.NewInt64Builder(mem); return build(b, func(v int64) { b.Append(v) }) },
		"uint8": func() arrow.Array {
			b := array.NewUint8Builder(mem)
			return build(b, func(v int64) { b.Append(uint8(v)) })
		},
		"uint16": func() arrow.Array {
			b := array.NewUint16Builder(mem)
			return build(b, func(v int64) { b.Append(uint16(v)) })
		},
		"uint32": func() arrow.Array {
			b := array.NewUint32Builder(mem)
			return build(b, func(v int64) { b.Append(uint32(v)) })
		},
		"uint64": func() arrow.Array {
			b := array.NewUint64Builder(mem)
			return build(b, func(v int64) { b.Append(uint64(v)) })
		},
		"dictionary<values=int64, indices=int32, ordered=false>": func() arrow.Array {
			b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Int64}).(*array.Int64DictionaryBuilder)
			return build(b, func(v int64) { b.Append(v) })
		},
	}
	refused := map[string]mk{
		"float16": func() arrow.Array {
			b := array.NewFloat16Builder(mem)
			return build(b, func(v int64) { b.Append(float16.New(float32(v))) })
		},
		"float32": func() arrow.Array {
			b := array.NewFloat32Builder(mem)
			return build(b, func(v int64) { b.Append(float32(v)) })
		},
		"float64": func() arrow.Array {
			b := array.NewFloat64Builder(mem)
			return build(b, func(v int64) { b.Append(float64(v)) })
		},
		"bool": func() arrow.Array {
			b := array.NewBooleanBuilder(mem)
			return build(b, func(v int64) { b.Append(v != 0) })
		},
		"utf8": func() arrow.Array { b := array.NewStringBuilder(mem); return build(b, func(int64) { b.Append("1") }) },
		"large_utf8": func() arrow.Array {
			b := array.NewLargeStringBuilder(mem)
			return build(b, func(int64) { b.Append("1") })
		},
		"binary": func() arrow.Array {
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
			return build(b, func(int64) { b.Append([]byte{1}) })
		},
		"date32": func() arrow.Array {
			b := array.NewDate32Builder(mem)
			return build(b, func(v int64) { b.Append(arrow.Date32(v)) })
		},
		"timestamp[us, tz=UTC]": func() arrow.Array {
			b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
			return build(b, func(v int64) { b.Append(arrow.Timestamp(v)) })
		},
		"list<item: int64, nullable>": func() arrow.Array {
			b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
			return build(b, func(v int64) { b.Append(true); b.ValueBuilder().(*array.Int64Builder).Append(v) })
		},
	}
	s := AdsSchema()
	for _, col := range []string{"advertiser_id", ColEventID} {
		for name, make := range ok {
			a := make()
			rec := record(col, a)
			got, err := Conform(s, rec, []string{col})
			if col == ColEventID {
				// event_id allows no nulls.
				if err == nil || !strings.Contains(err.Error(), `column "event_id" has 1 nulls`) {
					t.Errorf("%s %s with a null: %v", col, name, err)
				}
				if got != nil {
					got.Release()
				}
				rec.Release()
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", col, name, err)
			}
			c := got.Column(0).(*array.Int64)
			for i, v := range vals {
				if c.IsValid(i) != valid[i] || valid[i] && c.Value(i) != v {
					t.Errorf("%s %s: row %d is %v (valid %v), want %d (valid %v)", col, name, i, c.Value(i), c.IsValid(i), v, valid[i])
				}
			}
			got.Release()
			rec.Release()
		}
		for name, make := range refused {
			rec := record(col, make())
			_, err := Conform(s, rec, []string{col})
			want := `column "` + col + `" has Arrow type ` + name + `, want int64`
			if !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %s: %v, want %q", col, name, err, want)
			}
			rec.Release()
		}
	}
}

// TestConformLimitsAndLayout: uint64 values beyond int64 are refused (a
// null slot's bytes are not a value), as are missing and repeated columns
// and arrays whose buffers do not hold what their lengths say; a sliced
// array conforms to its own rows.
func TestConformLimitsAndLayout(t *testing.T) {
	mem := memory.DefaultAllocator
	s := AdsSchema()
	u := array.NewUint64Builder(mem)
	u.AppendValues([]uint64{1, math.MaxInt64 + 1, 3}, []bool{true, false, true})
	nullBig := u.NewArray()
	u.AppendValues([]uint64{1, math.MaxUint64}, nil)
	big := u.NewArray()
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"ab", "c", "def"}, nil)
	strs := sb.NewArray()
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{10, 20, 30, 40}, nil)
	sliced := array.NewSlice(ib.NewArray(), 1, 3)

	if rec, err := Conform(s, record("advertiser_id", nullBig), []string{"advertiser_id"}); err != nil {
		t.Errorf("uint64 with a large value under a null: %v", err)
	} else if c := rec.Column(0).(*array.Int64); c.Value(0) != 1 || c.IsValid(1) || c.Value(2) != 3 {
		t.Errorf("uint64 with a null: got %v", c)
	}
	if rec, err := Conform(s, record("advertiser_id", sliced), []string{"advertiser_id"}); err != nil {
		t.Errorf("sliced int32: %v", err)
	} else if c := rec.Column(0).(*array.Int64); c.Len() != 2 || c.Value(0) != 20 || c.Value(1) != 30 {
		t.Errorf("sliced int32: got %v, want [20 30]", c)
	}

	offsets := func(o ...int32) *memory.Buffer { return memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(o)) }
	bytes3 := memory.NewBufferBytes([]byte("abcdef"))
	badString := func(offs *memory.Buffer, n int) arrow.Array {
		return array.MakeFromData(array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offs, bytes3}, nil, 0, 0))
	}
	for _, tc := range []struct {
		name, col string
		rec       arrow.Record
		want      string
	}{
		{"uint64 beyond int64", "advertiser_id", record("advertiser_id", big),
			`column "advertiser_id" (Arrow type uint64): value 18446744073709551615 at row 1 does not fit int64`},
		{"missing", "query", record("advertiser_id", big), `no column "query"`},
		{"twice", "query", array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: "query", Type: arrow.BinaryTypes.String},
			{Name: "query", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{strs, strs}, 3), `column "query" appears 2 times`},
		{"not in schema", "querry", record("querry", strs), `column "querry" is not in schema "ads"`},
		{"offsets decrease", "query", record("query", badString(offsets(0, 4, 2, 6), 3)), "offset 2 at row 2 after 4"},
		{"negative first offset", "query", record("query", badString(offsets(-1, 2, 4, 6), 3)), "first offset -1"},
		{"nulls without a bitmap", "advertiser_id", record("advertiser_id", array.MakeFromData(array.NewData(arrow.PrimitiveTypes.Int64, 4,
			[]*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, 32))}, nil, 2, 0))), "validity bitmap of 0 bytes for 4 rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Conform(s, tc.rec, []string{tc.col})
			if !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an ErrColumn with %q", err, tc.want)
			}
		})
	}
	// Layouts Arrow's array constructors refuse too (with a panic), which
	// Arrow's IPC reader does not check before building arrays.
	for _, tc := range []struct {
		name string
		d    arrow.ArrayData
		want string
	}{
		{"short values", array.NewData(arrow.PrimitiveTypes.Int64, 4, []*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, 24))}, nil, 0, 0),
			"24 bytes of values for 4 rows of int64"},
		{"offsets beyond data", array.NewData(arrow.BinaryTypes.String, 3, []*memory.Buffer{nil, offsets(0, 2, 4, 9), bytes3}, nil, 0, 0),
			"last offset 9 beyond the 6 values"},
		{"short offsets", array.NewData(arrow.BinaryTypes.String, 3, []*memory.Buffer{nil, offsets(0, 2), bytes3}, nil, 0, 0),
			"8 bytes of offsets for 3 rows"},
		{"no child", array.NewData(ListString.ArrowType(), 1, []*memory.Buffer{nil, offsets(0, 0)}, nil, 0, 0), "list with 0 children"},
	} {
		if err := checkLayout(tc.d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A list<string> column whose offsets run past its elements.
	q := Field{Name: "q", Type: ListString}
	bad := array.MakeFromData(array.NewData(ListString.ArrowType(), 2, []*memory.Buffer{nil, offsets(0, 2, 5)}, []arrow.ArrayData{strs.Data()}, 0, 0))
	if _, err := ConformArray(q, bad); err == nil || !strings.Contains(err.Error(), "last offset 5 beyond the 3 values") {
		t.Errorf("list offsets past the elements: %v", err)
	}
}

func record(name string, a arrow.Array) arrow.Record {
	return array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: name, Type: a.DataType(), Nullable: true}}, nil), []arrow.Array{a}, int64(a.Len()))
}
