package transform

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// Equality of computed values, row by row, as SIG promises them: a memo
// object holds exactly what the kernels computed, so a value read back and
// the same value computed again are equal bit for bit. The reader's guard
// (package reader) and sigd's check of a reported mismatch (package
// eviction) compare memo objects with recomputed columns this way.

// SameRow reports whether row i of a and row j of b hold the same value:
//
//   - both null: the same, whatever lies under them (see "Nulls" in the
//     package documentation: what lies under a null row is unspecified);
//     one null and not the other: different;
//   - float64: the same bits, so a NaN equals a NaN of the same bits and
//     -0 differs from 0 (both are what a kernel computed, or not);
//   - strings: the same bytes;
//   - lists: the same length and, element by element, the same by these
//     rules (null elements included).
//
// Arrays of different types are never the same.
func SameRow(a arrow.Array, i int, b arrow.Array, j int) bool {
	if !arrow.TypeEqual(a.DataType(), b.DataType()) {
		return false
	}
	return sameRow(a, i, b, j)
}

// sameRow is SameRow of arrays of equal types: the types are compared once
// per pair of arrays, not per row and list element (arrow.TypeEqual of a
// primitive type is a reflect.DeepEqual, which was a third of the guard's
// check: bench/caughtup.txt).
func sameRow(a arrow.Array, i int, b arrow.Array, j int) bool {
	an, bn := a.IsNull(i), b.IsNull(j)
	if an || bn {
		return an == bn
	}
	switch x := a.(type) {
	case *array.Int64:
		return x.Value(i) == b.(*array.Int64).Value(j)
	case *array.Float64:
		return math.Float64bits(x.Value(i)) == math.Float64bits(b.(*array.Float64).Value(j))
	case *array.String:
		return x.Value(i) == b.(*array.String).Value(j)
	case *array.List:
		y := b.(*array.List)
		a0, a1 := x.ValueOffsets(i)
		b0, b1 := y.ValueOffsets(j)
		if a1-a0 != b1-b0 {
			return false
		}
		ac, bc := x.ListValues(), y.ListValues()
		for k := int64(0); k < a1-a0; k++ {
			if !sameRow(ac, int(a0+k), bc, int(b0+k)) {
				return false
			}
		}
		return true
	}
	// No other type is a node's output; compare what Arrow can.
	return array.SliceEqual(a, int64(i), int64(i+1), b, int64(j), int64(j+1))
}

// FirstDifference returns the first row at which a and b differ
// (SameRow), or -1 if they hold the same values. Arrays of different
// lengths differ at the shorter one's length; of different types, at 0.
func FirstDifference(a, b arrow.Array) int {
	if !arrow.TypeEqual(a.DataType(), b.DataType()) {
		return 0
	}
	n := min(a.Len(), b.Len())
	for r := 0; r < n; r++ {
		if !sameRow(a, r, b, r) {
			return r
		}
	}
	if a.Len() != b.Len() {
		return n
	}
	return -1
}

// FirstDifferenceAt returns the first x at which row rows[x] of a and row
// x of b differ (SameRow), or -1 if none does: a sample of a's rows
// against b, which holds those rows (the reader's guard). Arrays of
// different types differ at 0; b shorter than rows, at its length.
func FirstDifferenceAt(a arrow.Array, rows []int, b arrow.Array) int {
	if !arrow.TypeEqual(a.DataType(), b.DataType()) {
		return 0
	}
	for x, r := range rows {
		if x >= b.Len() || !sameRow(a, r, b, x) {
			return x
		}
	}
	return -1
}

// maxFormat bounds FormatRow's output.
const maxFormat = 200

// FormatRow writes row i of a for people (error messages, audit entries):
// null, a number (a float64 also as its bits, so that values that print
// alike but differ show it), a quoted string, or a list in brackets;
// at most about 200 bytes.
func FormatRow(a arrow.Array, i int) string {
	if i < 0 || i >= a.Len() {
		return "(no row)"
	}
	var sb strings.Builder
	formatRow(&sb, a, i)
	s := sb.String()
	if len(s) > maxFormat {
		s = s[:maxFormat] + "..."
	}
	return s
}

func formatRow(sb *strings.Builder, a arrow.Array, i int) {
	if a.IsNull(i) {
		sb.WriteString("null")
		return
	}
	switch x := a.(type) {
	case *array.Int64:
		sb.WriteString(strconv.FormatInt(x.Value(i), 10))
	case *array.Float64:
		v := x.Value(i)
		fmt.Fprintf(sb, "%s (bits %#016x)", strconv.FormatFloat(v, 'g', -1, 64), math.Float64bits(v))
	case *array.String:
		v := x.Value(i)
		if len(v) > maxFormat {
			v = v[:maxFormat]
		}
		sb.WriteString(strconv.Quote(v))
	case *array.List:
		lo, hi := x.ValueOffsets(i)
		sb.WriteByte('[')
		for k := lo; k < hi && sb.Len() <= maxFormat; k++ {
			if k > lo {
				sb.WriteString(", ")
			}
			formatRow(sb, x.ListValues(), int(k))
		}
		sb.WriteByte(']')
	default:
		sb.WriteString(a.ValueStr(i))
	}
}
