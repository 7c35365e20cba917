package transform

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/internal/rowref"
)

// Conversions between Arrow arrays and rowref columns. They use only
// Arrow's public accessors and builders, never the kernels' views and
// builders (column.go), so a bug there cannot hide itself.

var refTypes = map[Type]rowref.Type{
	String: rowref.String, Int64: rowref.Int64, Float64: rowref.Float64,
	ListString: rowref.ListString, ListInt64: rowref.ListInt64,
}

func typeOfRef(t rowref.Type) Type {
	for k, v := range refTypes {
		if v == t {
			return k
		}
	}
	return TypeInvalid
}

// fromArrow converts an array to a rowref column (rowref.FromArrow).
func fromArrow(a arrow.Array) rowref.Column { return rowref.FromArrow(a) }

// toArrow builds an array holding c with Arrow's builders.
func toArrow(c rowref.Column) arrow.Array {
	mem := memory.DefaultAllocator
	n := c.Len()
	switch c.Type {
	case rowref.String:
		return buildScalars(array.NewStringBuilder(mem), &c, c.Str)
	case rowref.Int64:
		return buildScalars(array.NewInt64Builder(mem), &c, c.I64)
	case rowref.Float64:
		return buildScalars(array.NewFloat64Builder(mem), &c, c.F64)
	}
	var elem arrow.DataType = arrow.BinaryTypes.String
	if c.Type == rowref.ListInt64 {
		elem = arrow.PrimitiveTypes.Int64
	}
	b := array.NewListBuilder(mem, elem)
	defer b.Release()
	for i := range n {
		if c.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(true)
		elemNull := func(j int) bool { return c.ElemNull != nil && c.ElemNull[i] != nil && c.ElemNull[i][j] }
		if c.Type == rowref.ListString {
			appendValues(b.ValueBuilder().(*array.StringBuilder), c.LStr[i], elemNull)
		} else {
			appendValues(b.ValueBuilder().(*array.Int64Builder), c.LI64[i], elemNull)
		}
	}
	return b.NewArray()
}

// valueBuilder is an Arrow builder of values T.
type valueBuilder[T any] interface {
	Append(v T)
	AppendNull()
}

// appendValues appends vals to b, null where null says.
func appendValues[T any, B valueBuilder[T]](b B, vals []T, null func(i int) bool) {
	for i, v := range vals {
		if null(i) {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	}
}

// buildScalars builds with b the array of vals, the values of c, null
// where c is.
func buildScalars[T any, B interface {
	valueBuilder[T]
	NewArray() arrow.Array
	Release()
}](b B, c *rowref.Column, vals []T) arrow.Array {
	defer b.Release()
	appendValues(b, vals, c.IsNull)
	return b.NewArray()
}

// concatCols returns the rows of a, then b (same type).
func concatCols(a, b rowref.Column) rowref.Column {
	c := rowref.Column{Type: a.Type}
	na, nb := a.Len(), b.Len()
	if a.Null != nil || b.Null != nil {
		c.Null = make([]bool, 0, na+nb)
		for i := range na {
			c.Null = append(c.Null, a.IsNull(i))
		}
		for i := range nb {
			c.Null = append(c.Null, b.IsNull(i))
		}
	}
	if a.ElemNull != nil || b.ElemNull != nil {
		c.ElemNull = make([][]bool, na+nb)
		if a.ElemNull != nil {
			copy(c.ElemNull, a.ElemNull)
		}
		if b.ElemNull != nil {
			copy(c.ElemNull[na:], b.ElemNull)
		}
	}
	c.Str = append(slices.Clone(a.Str), b.Str...)
	c.I64 = append(slices.Clone(a.I64), b.I64...)
	c.F64 = append(slices.Clone(a.F64), b.F64...)
	c.LStr = append(slices.Clone(a.LStr), b.LStr...)
	c.LI64 = append(slices.Clone(a.LI64), b.LI64...)
	return c
}

// toArrowSliced builds c as a slice with a non-zero offset of a larger
// array whose other rows are garbage (pad), so that a kernel reading outside
// its slice, or ignoring the offset, gives wrong results.
func toArrowSliced(c, padBefore, padAfter rowref.Column) arrow.Array {
	whole := toArrow(concatCols(concatCols(padBefore, c), padAfter))
	defer whole.Release()
	k := padBefore.Len()
	return array.NewSlice(whole, int64(k), int64(k+c.Len()))
}

// toArrowChildOffset builds a list column whose child array itself has a
// non-zero offset (a list over a slice of a larger child).
func toArrowChildOffset(c rowref.Column, pad rowref.Column) arrow.Array {
	// Flatten: pad elements first, then c's rows.
	var flat rowref.Column
	if c.Type == rowref.ListString {
		flat.Type = rowref.String
	} else {
		flat.Type = rowref.Int64
	}
	flat.Null = []bool{}
	offs := []int32{0}
	addRow := func(col *rowref.Column, i int) {
		if col.Type == rowref.ListString {
			for j, s := range col.LStr[i] {
				flat.Str = append(flat.Str, s)
				flat.Null = append(flat.Null, col.ElemNull != nil && col.ElemNull[i] != nil && col.ElemNull[i][j])
			}
		} else {
			for j, v := range col.LI64[i] {
				flat.I64 = append(flat.I64, v)
				flat.Null = append(flat.Null, col.ElemNull != nil && col.ElemNull[i] != nil && col.ElemNull[i][j])
			}
		}
	}
	for i := range pad.Len() {
		addRow(&pad, i)
	}
	skip := len(flat.Null)
	for i := range c.Len() {
		if !c.IsNull(i) {
			addRow(&c, i)
		}
		offs = append(offs, int32(len(flat.Null)-skip))
	}
	whole := toArrow(flat)
	defer whole.Release()
	child := array.NewSlice(whole, int64(skip), int64(len(flat.Null)))
	defer child.Release()
	var valid *memory.Buffer
	nulls := 0
	if c.Null != nil {
		bits := make([]byte, (c.Len()+7)/8)
		for i := range c.Len() {
			if c.IsNull(i) {
				nulls++
			} else {
				bits[i/8] |= 1 << (i % 8)
			}
		}
		valid = memory.NewBufferBytes(bits)
	}
	d := array.NewData(typeOfRef(c.Type).ArrowType(), c.Len(),
		[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))},
		[]arrow.ArrayData{child.Data()}, nulls, 0)
	defer d.Release()
	return array.NewListData(d)
}

// diffColumns describes the first difference (rowref.Diff).
func diffColumns(want, got rowref.Column) string { return rowref.Diff(want, got) }

// --- random data ---// --- random data ---

// textPieces are the fragments random strings are made of: ASCII, accents,
// CJK, Turkish dotted/dotless i, Greek sigma in all forms, emoji (with a
// modifier), invalid UTF-8 (stray continuation byte, truncated sequence,
// an encoded surrogate), white space of every kind including U+00A0,
// U+3000, U+2028 and U+0085 (and U+200B, which is not space), punctuation,
// symbols, a combining mark, a title-case digraph, Kelvin sign, capital
// sharp s, a ligature and U+FFFD itself.
var textPieces = []string{
	"a", "b", "q", "Z", "Hello", "WORLD", "shoes", "Red", "é", "É", "Ä", "ö",
	"İ", "ı", "I", "i", "Σ", "σ", "ς", "ΣΑΣ", "ὈΔΥΣΣΕΎΣ", "日本", "語", "中文",
	"😀", "👍🏽", "\xff", "\xe2\x82", "\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	" ", "  ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u3000", "\u2028",
	"\u0085", "\u1680", "\u2009", "\u200b", "\u202f",
	",", ".", "!", "?", "¿", "«", "»", "—", "-", "_", "'", "\"", "(", ")", "#",
	"…", "、", "。", "$", "+", "€", "^", "`", "|", "~", "©",
	"ǅ", "\u212a", "ẞ", "ﬀ", "Ⅻ", "\u0301", "\ufffd", "0", "42", "3.14",
}

// asciiPieces and lowerASCIIPieces select the kernels' ASCII fast paths
// (lower's zero-copy path needs a column without upper case).
var asciiPieces, lowerASCIIPieces = func() (a, l []string) {
	for _, p := range textPieces {
		ascii := true
		for i := 0; i < len(p); i++ {
			ascii = ascii && p[i] < 0x80
		}
		if ascii {
			a = append(a, p)
			if strings.ToLower(p) == p {
				l = append(l, p)
			}
		}
	}
	return a, l
}()

type gen struct {
	r *rand.Rand
	// nullRate is the probability that a row is null; elemNullRate that a
	// list element is.
	nullRate, elemNullRate float64
	// maxList bounds list lengths; a few rows are made long regardless.
	maxList  int
	longRows bool
	// pieces are the fragments of random strings (textPieces by default).
	pieces []string
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, 0x5151)), nullRate: 0.15, elemNullRate: 0.1, maxList: 6, longRows: true, pieces: textPieces}
}

func (g *gen) str() string {
	if g.r.IntN(10) == 0 {
		return ""
	}
	var b strings.Builder
	for range g.r.IntN(8) + 1 {
		b.WriteString(g.pieces[g.r.IntN(len(g.pieces))])
	}
	return b.String()
}

// word returns a short token from a small vocabulary, so that set ops see
// overlaps and duplicates.
func (g *gen) word() string {
	words := []string{"a", "b", "c", "ab", "É", "é", "日本", "", "Z", "z", "😀", "\xff", "ς", "σ"}
	return words[g.r.IntN(len(words))]
}

func (g *gen) i64() int64 {
	switch g.r.IntN(8) {
	case 0:
		return []int64{0, -1, 1, math.MinInt64, math.MaxInt64, 1 << 53, -(1 << 53) - 1}[g.r.IntN(7)]
	case 1:
		return int64(g.r.Uint64())
	}
	return int64(g.r.IntN(21)) - 10
}

func (g *gen) f64() float64 {
	switch g.r.IntN(8) {
	case 0:
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, -1, math.MaxFloat64,
			-math.MaxFloat64, math.SmallestNonzeroFloat64, 0.5, 1, 5, 1e300}[g.r.IntN(13)]
	case 1:
		return math.Float64frombits(g.r.Uint64())
	}
	return float64(g.r.IntN(2001)-1000) / 100
}

func (g *gen) listLen() int {
	if g.longRows && g.r.IntN(50) == 0 {
		return 100 + g.r.IntN(3000)
	}
	return g.r.IntN(g.maxList + 1)
}

// column returns n random rows of type t.
func (g *gen) column(t rowref.Type, n int, words bool) rowref.Column {
	c := rowref.Column{Type: t}
	if g.nullRate > 0 {
		c.Null = make([]bool, n)
		for i := range c.Null {
			c.Null[i] = g.r.Float64() < g.nullRate
		}
	}
	elemNulls := func(i, k int) {
		if g.elemNullRate == 0 || c.IsNull(i) {
			return
		}
		var m []bool
		for j := range k {
			if g.r.Float64() < g.elemNullRate {
				if m == nil {
					m = make([]bool, k)
				}
				m[j] = true
			}
		}
		if m != nil {
			if c.ElemNull == nil {
				c.ElemNull = make([][]bool, n)
			}
			c.ElemNull[i] = m
		}
	}
	for i := range n {
		switch t {
		case rowref.String:
			if words {
				c.Str = append(c.Str, g.word())
			} else {
				c.Str = append(c.Str, g.str())
			}
		case rowref.Int64:
			c.I64 = append(c.I64, g.i64())
		case rowref.Float64:
			c.F64 = append(c.F64, g.f64())
		case rowref.ListString:
			k := g.listLen()
			row := make([]string, k)
			for j := range row {
				if words {
					row[j] = g.word()
				} else {
					row[j] = g.str()
				}
			}
			c.LStr = append(c.LStr, row)
			elemNulls(i, k)
		case rowref.ListInt64:
			k := g.listLen()
			row := make([]int64, k)
			for j := range row {
				if words {
					row[j] = int64(g.r.IntN(12)) - 3
				} else {
					row[j] = g.i64()
				}
			}
			c.LI64 = append(c.LI64, row)
			elemNulls(i, k)
		}
		if c.IsNull(i) {
			// A null row keeps an empty slot, as Arrow builders write it.
			switch t {
			case rowref.String:
				c.Str[i] = ""
			case rowref.ListString:
				c.LStr[i] = nil
			case rowref.ListInt64:
				c.LI64[i] = nil
			}
		}
	}
	return c
}

// toArrowNullGarbage builds c so that null rows are not empty underneath:
// a null string slot has bytes, a null list slot has elements, a null
// number slot has a value. Arrow allows that (only the validity bit
// matters); kernels must not let such bytes leak into valid rows.
func toArrowNullGarbage(c rowref.Column, g *gen) arrow.Array {
	if c.Null == nil {
		return toArrow(c)
	}
	filled := concatCols(c, rowref.Column{Type: c.Type}) // a copy
	filled.Null = nil
	garbage := g.column(c.Type, c.Len(), false)
	for i := range c.Len() {
		if !c.IsNull(i) {
			continue
		}
		switch c.Type {
		case rowref.String:
			filled.Str[i] = "GARBAGE" + garbage.Str[i]
		case rowref.Int64:
			filled.I64[i] = garbage.I64[i]
		case rowref.Float64:
			filled.F64[i] = garbage.F64[i]
		case rowref.ListString:
			filled.LStr[i] = []string{"GARBAGE", "x"}
			if filled.ElemNull != nil {
				filled.ElemNull[i] = nil
			}
		case rowref.ListInt64:
			filled.LI64[i] = []int64{7, 8, 9}
			if filled.ElemNull != nil {
				filled.ElemNull[i] = nil
			}
		}
	}
	a := toArrow(filled)
	defer a.Release()
	bits := make([]byte, (c.Len()+7)/8)
	nulls := 0
	for i := range c.Len() {
		if c.IsNull(i) {
			nulls++
		} else {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	bufs := slices.Clone(a.Data().Buffers())
	bufs[0] = memory.NewBufferBytes(bits)
	d := array.NewData(a.DataType(), a.Len(), bufs, a.Data().Children(), nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}
