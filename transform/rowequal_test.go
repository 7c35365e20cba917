package transform

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/internal/rowref"
)

// TestSameRow: values compare bit for bit. A NaN equals a NaN of the same
// bits and not one of other bits; -0 differs from 0; two nulls are the
// same whatever lies under them, a null and a value are not; lists compare
// element by element, null elements included, through array and child
// offsets alike.
func TestSameRow(t *testing.T) {
	nan1, nan2 := math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0x7ff8000000000002)
	g := newGen(3)
	cases := []struct {
		name string
		a, b rowref.Column
		same []bool // per row
	}{
		{"float64", rowref.Column{Type: rowref.Float64, F64: []float64{1.5, nan1, nan1, 0, math.Copysign(0, -1), 2, 7}, Null: []bool{false, false, false, false, false, true, true}},
			rowref.Column{Type: rowref.Float64, F64: []float64{1.5, nan1, nan2, math.Copysign(0, -1), math.Copysign(0, -1), 3, 7}, Null: []bool{false, false, false, false, false, true, false}},
			[]bool{true, true, false, false, true, true, false}},
		{"int64", rowref.Column{Type: rowref.Int64, I64: []int64{1, -1, 5}, Null: []bool{false, false, true}},
			rowref.Column{Type: rowref.Int64, I64: []int64{1, 1, 6}, Null: []bool{false, false, true}},
			[]bool{true, false, true}},
		{"string", rowref.Column{Type: rowref.String, Str: []string{"a", "", "b", "x"}, Null: []bool{false, false, false, true}},
			rowref.Column{Type: rowref.String, Str: []string{"a", "", "B", ""}, Null: []bool{false, true, false, true}},
			[]bool{true, false, false, true}},
		{"list<string>", rowref.Column{Type: rowref.ListString, LStr: [][]string{{"a", "b"}, {"a"}, {"a", "b"}, {}, {"x", "y"}, {"p", "q"}},
			ElemNull: [][]bool{nil, nil, nil, nil, {false, true}, {false, true}}},
			rowref.Column{Type: rowref.ListString, LStr: [][]string{{"a", "b"}, {"a", "b"}, {"b", "a"}, {}, {"x", "z"}, {"p", "q"}},
				ElemNull: [][]bool{nil, nil, nil, nil, {false, true}, nil}},
			[]bool{true, false, false, true, true, false}},
		{"list<int64>", rowref.Column{Type: rowref.ListInt64, LI64: [][]int64{{1, 2}, {}, {3}, {4}}, Null: []bool{false, false, false, true}},
			rowref.Column{Type: rowref.ListInt64, LI64: [][]int64{{1, 2}, {}, {3, 3}, {}}, Null: []bool{false, true, false, true}},
			[]bool{true, false, false, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pad := g.column(tc.a.Type, 3, false)
			// The same columns as plain arrays, as slices of larger
			// arrays, with garbage under null rows, and (lists) over an
			// offset child: every layout compares by value.
			for li, build := range []func(c rowref.Column) arrow.Array{
				func(c rowref.Column) arrow.Array { return toArrow(c) },
				func(c rowref.Column) arrow.Array { return toArrowSliced(c, pad, pad) },
				func(c rowref.Column) arrow.Array { return toArrowNullGarbage(c, g) },
				func(c rowref.Column) arrow.Array {
					if c.Type == rowref.ListString || c.Type == rowref.ListInt64 {
						return toArrowChildOffset(c, pad)
					}
					return toArrow(c)
				},
			} {
				a, b := build(tc.a), build(tc.b)
				first := -1
				for r, want := range tc.same {
					if got := SameRow(a, r, b, r); got != want {
						t.Errorf("layout %d, row %d: SameRow = %v, want %v (%s vs %s)", li, r, got, want, FormatRow(a, r), FormatRow(b, r))
					}
					if !want && first < 0 {
						first = r
					}
					if !SameRow(a, r, a, r) {
						t.Errorf("layout %d, row %d: not the same as itself", li, r)
					}
				}
				if got := FirstDifference(a, b); got != first {
					t.Errorf("layout %d: FirstDifference = %d, want %d", li, got, first)
				}
				if got := FirstDifference(a, a); got != -1 {
					t.Errorf("layout %d: FirstDifference with itself = %d", li, got)
				}
				every := make([]int, len(tc.same))
				for r := range every {
					every[r] = r
				}
				if got := FirstDifferenceAt(a, every, b); got != first {
					t.Errorf("layout %d: FirstDifferenceAt every row = %d, want %d", li, got, first)
				}
				if got := FirstDifferenceAt(a, every, a); got != -1 {
					t.Errorf("layout %d: FirstDifferenceAt with itself = %d", li, got)
				}
				a.Release()
				b.Release()
			}
		})
	}
	// Different types and lengths.
	i := toArrow(rowref.Column{Type: rowref.Int64, I64: []int64{1, 2}})
	f := toArrow(rowref.Column{Type: rowref.Float64, F64: []float64{1, 2}})
	short := toArrow(rowref.Column{Type: rowref.Int64, I64: []int64{1}})
	defer i.Release()
	defer f.Release()
	defer short.Release()
	if SameRow(i, 0, f, 0) || FirstDifference(i, f) != 0 {
		t.Error("an int64 and a float64 column compare the same")
	}
	if got := FirstDifference(i, short); got != 1 {
		t.Errorf("FirstDifference of 2 and 1 rows = %d, want 1", got)
	}
	// A sample of rows against the array holding them, as the guard
	// compares: row rows[x] of the first with row x of the second.
	for _, tc := range []struct {
		rows []int
		b    arrow.Array
		want int
	}{{[]int{0, 1}, f, 0}, {[]int{0}, short, -1}, {[]int{1}, short, 0}, {[]int{0, 1}, short, 1}, {[]int{1, 0}, i, 0}, {[]int{0, 1}, i, -1}} {
		if got := FirstDifferenceAt(i, tc.rows, tc.b); got != tc.want {
			t.Errorf("FirstDifferenceAt(%v, rows %v, %v) = %d, want %d", i, tc.rows, tc.b, got, tc.want)
		}
	}
}

// TestFormatRow: what error messages show of a value.
func TestFormatRow(t *testing.T) {
	c := toArrow(rowref.Column{Type: rowref.Float64, F64: []float64{0.1, math.NaN(), 3}, Null: []bool{false, false, true}})
	defer c.Release()
	if got := FormatRow(c, 0); got != "0.1 (bits 0x3fb999999999999a)" {
		t.Errorf("FormatRow(0.1) = %q", got)
	}
	if got := FormatRow(c, 2); got != "null" {
		t.Errorf("FormatRow(null) = %q", got)
	}
	if got := FormatRow(c, 3); got != "(no row)" {
		t.Errorf("FormatRow past the end = %q", got)
	}
	l := toArrow(rowref.Column{Type: rowref.ListString, LStr: [][]string{{"a", "b\"c"}, {strings.Repeat("x", 1000)}},
		ElemNull: [][]bool{{false, false}, nil}})
	defer l.Release()
	if got := FormatRow(l, 0); got != `["a", "b\"c"]` {
		t.Errorf("FormatRow(list) = %q", got)
	}
	if got := FormatRow(l, 1); len(got) > maxFormat+10 {
		t.Errorf("FormatRow of a long row is %d bytes", len(got))
	}
}
