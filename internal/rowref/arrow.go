package rowref

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// typeOfArrow maps the Arrow types of SIG columns to column types.
func typeOfArrow(dt arrow.DataType) Type {
	switch dt.ID() {
	case arrow.STRING:
		return String
	case arrow.INT64:
		return Int64
	case arrow.FLOAT64:
		return Float64
	case arrow.LIST, arrow.LIST_VIEW:
		// A list-view (offset and size per row) is how transform's truncate
		// shares its input's elements; rows read the same.
		switch dt.(arrow.ListLikeType).Elem().ID() {
		case arrow.STRING:
			return ListString
		case arrow.INT64:
			return ListInt64
		}
	}
	return Invalid
}

// FromArrow converts an array to a rowref column, keeping null list
// elements (as ElemNull) so that the reference sees them.
func FromArrow(a arrow.Array) Column {
	t := typeOfArrow(a.DataType())
	if t == Invalid {
		panic(fmt.Sprintf("rowref.FromArrow: unsupported type %s", a.DataType()))
	}
	n := a.Len()
	c := Column{Type: t}
	if a.NullN() > 0 {
		c.Null = make([]bool, n)
		for i := range n {
			c.Null[i] = a.IsNull(i)
		}
	}
	switch t {
	case String:
		s := a.(*array.String)
		c.Str = make([]string, n)
		for i := range n {
			if s.IsValid(i) {
				c.Str[i] = strings.Clone(s.Value(i))
			}
		}
	case Int64:
		c.I64 = slices.Clone(a.(*array.Int64).Int64Values())
	case Float64:
		c.F64 = slices.Clone(a.(*array.Float64).Float64Values())
	case ListString, ListInt64:
		l := a.(array.ListLike)
		child := l.ListValues()
		for i := range n {
			var nulls []bool
			start, end := l.ValueOffsets(i)
			if l.IsValid(i) {
				for j := start; j < end; j++ {
					if child.IsNull(int(j)) {
						if nulls == nil {
							nulls = make([]bool, end-start)
						}
						nulls[j-start] = true
					}
				}
			}
			if nulls != nil {
				if c.ElemNull == nil {
					c.ElemNull = make([][]bool, n)
				}
				c.ElemNull[i] = nulls
			}
			if t == ListString {
				cs := child.(*array.String)
				var row []string
				if l.IsValid(i) {
					row = make([]string, 0, end-start)
					for j := start; j < end; j++ {
						row = append(row, strings.Clone(cs.Value(int(j))))
					}
				}
				c.LStr = append(c.LStr, row)
			} else {
				ci := child.(*array.Int64)
				var row []int64
				if l.IsValid(i) {
					row = make([]int64, 0, end-start)
					for j := start; j < end; j++ {
						row = append(row, ci.Value(int(j)))
					}
				}
				c.LI64 = append(c.LI64, row)
			}
		}
	}
	return c
}

// Diff describes the first difference between the reference want
// and a kernel's got, or returns "". Values of null rows are not compared;
// floats compare bit for bit (SIG and LIG must agree bit for bit).
func Diff(want, got Column) string {
	if want.Type != got.Type {
		return fmt.Sprintf("type %s, want %s", got.Type, want.Type)
	}
	if want.Len() != got.Len() {
		return fmt.Sprintf("%d rows, want %d", got.Len(), want.Len())
	}
	if got.ElemNull != nil {
		return "output list has null elements"
	}
	for i := range want.Len() {
		if want.IsNull(i) != got.IsNull(i) {
			return fmt.Sprintf("row %d: null=%v, want null=%v", i, got.IsNull(i), want.IsNull(i))
		}
		if want.IsNull(i) {
			continue
		}
		var w, g any
		same := true
		switch want.Type {
		case String:
			w, g = want.Str[i], got.Str[i]
			same = w == g
		case Int64:
			w, g = want.I64[i], got.I64[i]
			same = w == g
		case Float64:
			w, g = want.F64[i], got.F64[i]
			same = math.Float64bits(want.F64[i]) == math.Float64bits(got.F64[i])
		case ListString:
			wr, gr := want.StrRow(i), got.StrRow(i)
			w, g = wr, gr
			same = len(wr) == len(gr) && slices.Equal(wr, gr)
		case ListInt64:
			wr, gr := want.IntRow(i), got.IntRow(i)
			w, g = wr, gr
			same = len(wr) == len(gr) && slices.Equal(wr, gr)
		}
		if !same {
			return fmt.Sprintf("row %d: got %s, want %s", i, short(g), short(w))
		}
	}
	return ""
}

func short(v any) string {
	s := fmt.Sprintf("%v", v)
	switch v.(type) {
	case string, []string:
		s = fmt.Sprintf("%q", v)
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
