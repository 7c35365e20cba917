package transform

import (
	"fmt"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Column views and builders. Kernels read Arrow arrays through these views
// (raw offsets, bytes and validity bits, no per-value interface calls) and
// build their outputs straight into Go slices that become Arrow buffers
// without a copy.

// bitmap is an Arrow validity bitmap with a bit offset; nil means no nulls.
type bitmap struct {
	bits []byte
	off  int
}

func (b bitmap) null(i int) bool {
	if b.bits == nil {
		return false
	}
	j := b.off + i
	return b.bits[j>>3]&(1<<(j&7)) == 0
}

func bitmapOf(a arrow.Array) bitmap {
	if a.NullN() == 0 {
		return bitmap{}
	}
	return bitmap{bits: a.NullBitmapBytes(), off: a.Data().Offset()}
}

// strCol is a view of a string array.
type strCol struct {
	n     int
	offs  []int32 // n+1 offsets into data
	data  []byte
	valid bitmap
}

func (c *strCol) at(i int) []byte { return c.data[c.offs[i]:c.offs[i+1]] }

// str returns the value as a string sharing the array's memory (valid while
// the array is alive; never stored beyond a kernel call).
func (c *strCol) str(i int) string {
	b := c.at(i)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// zeroOffs stands in for the offsets of an empty array, which Arrow allows
// to have an empty offsets buffer (IPC writers produce them).
var zeroOffs = []int32{0}

func viewStr(a arrow.Array) strCol {
	s := a.(*array.String)
	if s.Len() == 0 {
		return strCol{offs: zeroOffs}
	}
	var data []byte
	if bufs := s.Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
		data = bufs[2].Bytes()
	}
	return strCol{n: s.Len(), offs: s.ValueOffsets(), data: data, valid: bitmapOf(a)}
}

type i64Col struct {
	vals  []int64
	valid bitmap
}

func viewI64(a arrow.Array) i64Col {
	return i64Col{vals: a.(*array.Int64).Int64Values(), valid: bitmapOf(a)}
}

type f64Col struct {
	vals  []float64
	valid bitmap
}

func viewF64(a arrow.Array) f64Col {
	return f64Col{vals: a.(*array.Float64).Float64Values(), valid: bitmapOf(a)}
}

// listView is a view of a list array: row i holds child elements
// [offs[i], offs[i+1]). Null elements inside lists are dropped on the way in
// (see compactList), so kernels never see them.
type listView struct {
	n     int
	offs  []int32
	valid bitmap
	str   strCol // child, for list<string>
	i64   i64Col // child, for list<int64>
}

func viewList(a arrow.Array) listView {
	l := a.(*array.List)
	if l.Len() > 0 && l.ListValues().NullN() > 0 {
		l = compactList(l)
	}
	off := l.Data().Offset()
	v := listView{n: l.Len(), offs: zeroOffs}
	if l.Len() > 0 {
		v.offs, v.valid = l.Offsets()[off:off+l.Len()+1], bitmapOf(l)
	}
	switch l.ListValues().DataType().ID() {
	case arrow.STRING:
		v.str = viewStr(l.ListValues())
	case arrow.INT64:
		v.i64 = viewI64(l.ListValues())
	}
	return v
}

// compactList rebuilds a list whose child has nulls without those elements.
func compactList(l *array.List) *array.List {
	n := l.Len()
	valid := bitmapOf(l)
	child := l.ListValues()
	off := l.Data().Offset()
	offs := l.Offsets()[off : off+n+1]
	cv := bitmapOf(child)
	var out arrow.Array
	switch child.DataType().ID() {
	case arrow.STRING:
		c := viewStr(child)
		b := newListStrBuilder(n, len(c.data))
		for i := 0; i < n; i++ {
			if valid.null(i) {
				b.appendNull()
				continue
			}
			for j := int(offs[i]); j < int(offs[i+1]); j++ {
				if !cv.null(j) {
					b.elem(c.at(j))
				}
			}
			b.endRow()
		}
		out = b.finish()
	default:
		c := viewI64(child)
		b := newListI64Builder(n, len(c.vals))
		for i := 0; i < n; i++ {
			if valid.null(i) {
				b.appendNull()
				continue
			}
			for j := int(offs[i]); j < int(offs[i+1]); j++ {
				if !cv.null(j) {
					b.elem(c.vals[j])
				}
			}
			b.endRow()
		}
		out = b.finish()
	}
	return out.(*array.List)
}

// validity tracks nulls of an output column; the bitmap is only allocated
// when the first null appears.
type validity struct {
	bits  []byte
	nulls int
}

func (v *validity) setNull(i, n int) {
	if v.bits == nil {
		v.bits = make([]byte, (n+7)/8)
		for k := range v.bits {
			v.bits[k] = 0xff
		}
	}
	v.bits[i>>3] &^= 1 << (i & 7)
	v.nulls++
}

func (v *validity) buffer() *memory.Buffer {
	if v.nulls == 0 {
		return nil
	}
	return memory.NewBufferBytes(v.bits)
}

// strBuilder builds a string array of n rows.
type strBuilder struct {
	n     int
	offs  []int32
	data  []byte
	valid validity
}

func newStrBuilder(n, dataHint int) *strBuilder {
	b := &strBuilder{n: n, offs: make([]int32, 1, n+1), data: make([]byte, 0, dataHint)}
	return b
}

func (b *strBuilder) append(p []byte) {
	b.data = append(b.data, p...)
	b.offs = append(b.offs, int32(len(b.data)))
}

func (b *strBuilder) appendNull() {
	b.valid.setNull(len(b.offs)-1, b.n)
	b.offs = append(b.offs, int32(len(b.data)))
}

// end closes a row whose bytes were appended to b.data directly.
func (b *strBuilder) end() { b.offs = append(b.offs, int32(len(b.data))) }

func (b *strBuilder) finish() arrow.Array {
	checkOffsets(len(b.data))
	d := array.NewData(arrow.BinaryTypes.String, len(b.offs)-1,
		[]*memory.Buffer{b.valid.buffer(), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(b.offs)), memory.NewBufferBytes(b.data)},
		nil, b.valid.nulls, 0)
	defer d.Release()
	return array.NewStringData(d)
}

func checkOffsets(n int) {
	if n > 1<<31-1 {
		panic(fmt.Sprintf("transform: column of %d bytes exceeds 32-bit Arrow offsets", n))
	}
}

// listStrBuilder builds a list<string> array: elem appends to the current
// row, endRow closes it.
type listStrBuilder struct {
	n     int
	offs  []int32
	child strBuilder
	valid validity
}

func newListStrBuilder(n, dataHint int) *listStrBuilder {
	return &listStrBuilder{n: n, offs: make([]int32, 1, n+1),
		child: strBuilder{offs: make([]int32, 1, 4*n+1), data: make([]byte, 0, dataHint)}}
}

func (b *listStrBuilder) elem(p []byte) { b.child.append(p) }

func (b *listStrBuilder) endRow() { b.offs = append(b.offs, int32(len(b.child.offs)-1)) }

func (b *listStrBuilder) appendNull() {
	b.valid.setNull(len(b.offs)-1, b.n)
	b.endRow()
}

func (b *listStrBuilder) finish() arrow.Array {
	child := b.child.finish()
	defer child.Release()
	d := array.NewData(arrow.ListOf(arrow.BinaryTypes.String), len(b.offs)-1,
		[]*memory.Buffer{b.valid.buffer(), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(b.offs))},
		[]arrow.ArrayData{child.Data()}, b.valid.nulls, 0)
	defer d.Release()
	return array.NewListData(d)
}

type i64Builder struct {
	n     int
	vals  []int64
	valid validity
}

func newI64Builder(n int) *i64Builder { return &i64Builder{n: n, vals: make([]int64, 0, n)} }

func (b *i64Builder) append(v int64) { b.vals = append(b.vals, v) }

func (b *i64Builder) appendNull() {
	b.valid.setNull(len(b.vals), b.n)
	b.vals = append(b.vals, 0)
}

func (b *i64Builder) finish() arrow.Array {
	d := array.NewData(arrow.PrimitiveTypes.Int64, len(b.vals),
		[]*memory.Buffer{b.valid.buffer(), memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(b.vals))}, nil, b.valid.nulls, 0)
	defer d.Release()
	return array.NewInt64Data(d)
}

type f64Builder struct {
	n     int
	vals  []float64
	valid validity
}

func newF64Builder(n int) *f64Builder { return &f64Builder{n: n, vals: make([]float64, 0, n)} }

func (b *f64Builder) append(v float64) { b.vals = append(b.vals, v) }

func (b *f64Builder) appendNull() {
	b.valid.setNull(len(b.vals), b.n)
	b.vals = append(b.vals, 0)
}

func (b *f64Builder) finish() arrow.Array {
	d := array.NewData(arrow.PrimitiveTypes.Float64, len(b.vals),
		[]*memory.Buffer{b.valid.buffer(), memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(b.vals))}, nil, b.valid.nulls, 0)
	defer d.Release()
	return array.NewFloat64Data(d)
}

type listI64Builder struct {
	n     int
	offs  []int32
	vals  []int64
	valid validity
}

func newListI64Builder(n, hint int) *listI64Builder {
	return &listI64Builder{n: n, offs: make([]int32, 1, n+1), vals: make([]int64, 0, hint)}
}

func (b *listI64Builder) elem(v int64) { b.vals = append(b.vals, v) }

func (b *listI64Builder) endRow() { b.offs = append(b.offs, int32(len(b.vals))) }

func (b *listI64Builder) appendNull() {
	b.valid.setNull(len(b.offs)-1, b.n)
	b.endRow()
}

func (b *listI64Builder) finish() arrow.Array {
	checkOffsets(len(b.vals))
	cd := array.NewData(arrow.PrimitiveTypes.Int64, len(b.vals),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(b.vals))}, nil, 0, 0)
	defer cd.Release()
	d := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int64), len(b.offs)-1,
		[]*memory.Buffer{b.valid.buffer(), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(b.offs))},
		[]arrow.ArrayData{cd}, b.valid.nulls, 0)
	defer d.Release()
	return array.NewListData(d)
}
