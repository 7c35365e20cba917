package transform

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
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

// strCol is a view of a string array, or of the elements [first,
// first+n) of a list's string child.
type strCol struct {
	n     int
	offs  []int32 // n+1 offsets into data
	data  []byte
	valid bitmap
	arr   arrow.Array // the array viewed
	first int         // index in arr of row 0 of the view
}

// bytes returns the data of all n rows, null rows included.
func (c *strCol) bytes() []byte { return c.data[c.offs[0]:c.offs[c.n]] }

// elems returns a view of elements [e0, e1) of this column (used on a
// list's child).
func (c *strCol) elems(e0, e1 int32) strCol {
	v := strCol{n: int(e1 - e0), offs: c.offs[e0 : e1+1], data: c.data, valid: c.valid, arr: c.arr, first: c.first + int(e0)}
	if v.valid.bits != nil {
		v.valid.off += int(e0)
	}
	return v
}

// canShareShape reports whether an output with c's row boundaries can use
// c's own offsets and validity buffers: it must start at row 0 of an
// unsliced array whose data starts at byte 0.
func (c *strCol) canShareShape() bool {
	return c.arr != nil && c.first == 0 && c.arr.Data().Offset() == 0 && c.offs[0] == 0
}

// withData returns a string array with c's row boundaries and nulls over
// data, which holds c's bytes transformed in place (same length per row).
func (c *strCol) withData(data []byte) arrow.Array {
	checkOffsets(len(data))
	if c.canShareShape() {
		bufs := c.arr.Data().Buffers()
		valid, nulls := bufs[0], c.arr.NullN()
		if nulls == 0 {
			valid = nil
		}
		d := array.NewData(arrow.BinaryTypes.String, c.n, []*memory.Buffer{valid, bufs[1], memory.NewBufferBytes(data)}, nil, nulls, 0)
		defer d.Release()
		return array.NewStringData(d)
	}
	offs := make([]int32, c.n+1)
	base := c.offs[0]
	for i, o := range c.offs[:c.n+1] {
		offs[i] = o - base
	}
	valid, nulls := c.validity()
	return newStringArray(c.n, offs, data, valid, nulls)
}

// validity returns c's validity as a buffer for an output array of c's
// rows at offset 0 (nil when no row is null), and the null count.
func (c *strCol) validity() (*memory.Buffer, int) {
	if c.valid.bits == nil {
		return nil, 0
	}
	if c.first == 0 && c.arr != nil && c.n == c.arr.Len() {
		return validityOf(c.arr)
	}
	return copyValidity(c.valid, c.n)
}

// copyValidity copies n bits of v to a new bitmap at offset 0.
func copyValidity(v bitmap, n int) (*memory.Buffer, int) {
	bits := make([]byte, (n+7)/8)
	bitutil.CopyBitmap(v.bits, v.off, n, bits, 0)
	return memory.NewBufferBytes(bits), n - bitutil.CountSetBits(bits, 0, n)
}

// validityOf returns a's validity as a buffer for an output array of a's
// rows at offset 0: a's own buffer when a is not sliced.
func validityOf(a arrow.Array) (*memory.Buffer, int) {
	if a.NullN() == 0 {
		return nil, 0
	}
	if a.Data().Offset() == 0 {
		return a.Data().Buffers()[0], a.NullN()
	}
	return copyValidity(bitmapOf(a), a.Len())
}

func newStringArray(n int, offs []int32, data []byte, valid *memory.Buffer, nulls int) arrow.Array {
	checkOffsets(len(data))
	d := array.NewData(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)), memory.NewBufferBytes(data)},
		nil, nulls, 0)
	defer d.Release()
	return array.NewStringData(d)
}

func (c *strCol) at(i int) []byte { return c.data[c.offs[i]:c.offs[i+1]] }

// zeroOffs stands in for the offsets of an empty array, which Arrow allows
// to have an empty offsets buffer (IPC writers produce them).
var zeroOffs = []int32{0}

func viewStr(a arrow.Array) strCol {
	s := a.(*array.String)
	if s.Len() == 0 {
		return strCol{offs: zeroOffs, arr: a}
	}
	var data []byte
	if bufs := s.Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
		data = bufs[2].Bytes()
	}
	return strCol{n: s.Len(), offs: s.ValueOffsets(), data: data, valid: bitmapOf(a), arr: a}
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
	text  bool   // list<string>
	// arr is the list viewed: the input, or its copy without null
	// elements (owned by the view: release it unless it is returned).
	arr       *array.List
	compacted bool
}

// span returns the range of child elements the view's rows cover.
func (l *listView) span() (int32, int32) { return l.offs[0], l.offs[l.n] }

// result returns the viewed list itself as a kernel output.
func (l *listView) result() arrow.Array {
	l.arr.Retain()
	return l.arr
}

// release drops the view's copy, if it made one.
func (l *listView) release() {
	if l.compacted {
		l.arr.Release()
	}
}

// withChild returns a list with the view's row boundaries and nulls whose
// child holds, from index 0, the elements of the view's span transformed
// one for one (same count per row), as elem-typed child.
func (l *listView) withChild(child arrow.Array) arrow.Array {
	e0, _ := l.span()
	dt := arrow.ListOf(child.DataType())
	if e0 == 0 && l.arr.Data().Offset() == 0 {
		bufs := l.arr.Data().Buffers()
		valid, nulls := bufs[0], l.arr.NullN()
		if nulls == 0 {
			valid = nil
		}
		d := array.NewData(dt, l.n, []*memory.Buffer{valid, bufs[1]}, []arrow.ArrayData{child.Data()}, nulls, 0)
		defer d.Release()
		return array.NewListData(d)
	}
	offs := make([]int32, l.n+1)
	for i, o := range l.offs[:l.n+1] {
		offs[i] = o - e0
	}
	valid, nulls := validityOf(l.arr)
	return newListArray(dt, l.n, offs, valid, nulls, child)
}

func newListArray(dt arrow.DataType, n int, offs []int32, valid *memory.Buffer, nulls int, child arrow.Array) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))},
		[]arrow.ArrayData{child.Data()}, nulls, 0)
	defer d.Release()
	return array.NewListData(d)
}

func viewList(a arrow.Array) listView {
	if lv, ok := a.(*array.ListView); ok {
		// Only direct callers of a kernel pass one: the executor makes
		// lists contiguous before kernels read them (Run).
		c, err := contiguous(lv)
		if err != nil {
			panic(err)
		}
		v := viewList(c)
		if v.compacted { // v made its own copy
			c.Release()
		}
		v.compacted = true // v owns what it views
		return v
	}
	l := a.(*array.List)
	compacted := false
	if l.Len() > 0 && l.ListValues().NullN() > 0 {
		l, compacted = compactList(l), true
	}
	off := l.Data().Offset()
	v := listView{n: l.Len(), offs: zeroOffs, arr: l, compacted: compacted}
	if l.Len() > 0 {
		v.offs, v.valid = l.Offsets()[off:off+l.Len()+1], bitmapOf(l)
	}
	switch l.ListValues().DataType().ID() {
	case arrow.STRING:
		v.str, v.text = viewStr(l.ListValues()), true
	case arrow.INT64:
		v.i64 = viewI64(l.ListValues())
	}
	return v
}

// contiguous returns a as a list if it is a list-view (truncate's result:
// see truncateText), else a itself; either way the caller releases the
// result.
func contiguous(a arrow.Array) (arrow.Array, error) {
	v, ok := a.(*array.ListView)
	if !ok {
		a.Retain()
		return a, nil
	}
	if id := v.ListValues().DataType().ID(); id != arrow.STRING {
		return nil, fmt.Errorf("list-view of %s: only list-views of strings are made contiguous", v.ListValues().DataType())
	}
	return compactTextView(v)
}

// compactList rebuilds a list whose child has nulls without those elements.
func compactList(l *array.List) *array.List {
	n := l.Len()
	child := l.ListValues()
	off := l.Data().Offset()
	offs := l.Offsets()[off : off+n+1]
	if child.DataType().ID() == arrow.STRING {
		c := viewStr(child)
		return keepValid(newListStrBuilder(n, len(c.data)), bitmapOf(l), bitmapOf(child), offs, c.at)
	}
	c := viewI64(child)
	return keepValid(newListI64Builder(n, len(c.vals)), bitmapOf(l), bitmapOf(child), offs, func(j int) int64 { return c.vals[j] })
}

// listBuilder is a list column under construction (listStrBuilder,
// listI64Builder), of elements T.
type listBuilder[T any] interface {
	elem(v T)
	endRow()
	appendNull()
	finish() arrow.Array
}

// keepValid builds into b the rows of a list (validity valid, offsets offs
// into its child) with only the child's elements that are not null (cv);
// at is child element j.
func keepValid[T any](b listBuilder[T], valid, cv bitmap, offs []int32, at func(j int) T) *array.List {
	for i := 0; i < len(offs)-1; i++ {
		if valid.null(i) {
			b.appendNull()
			continue
		}
		for j := int(offs[i]); j < int(offs[i+1]); j++ {
			if !cv.null(j) {
				b.elem(at(j))
			}
		}
		b.endRow()
	}
	return b.finish().(*array.List)
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

func (b *strBuilder) append(p []byte) {
	b.data = append(b.data, p...)
	b.offs = append(b.offs, int32(len(b.data)))
}

func (b *strBuilder) finish() arrow.Array {
	checkOffsets(len(b.data))
	d := array.NewData(arrow.BinaryTypes.String, len(b.offs)-1,
		[]*memory.Buffer{b.valid.buffer(), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(b.offs)), memory.NewBufferBytes(b.data)},
		nil, b.valid.nulls, 0)
	defer d.Release()
	return array.NewStringData(d)
}

// byteSink accumulates an output's bytes in memory that is not cleared
// first (strings.Builder allocates that way; make clears): for large outputs
// written in full, front to back, clearing would cost as much as writing.
type byteSink struct{ b strings.Builder }

func newByteSink(capacity int) *byteSink {
	s := new(byteSink)
	s.b.Grow(capacity)
	return s
}

func (s *byteSink) write(p []byte) { s.b.Write(p) }

func (s *byteSink) len() int32 { return int32(s.b.Len()) }

// bytes returns what was written, without a copy. The sink must not be
// written to afterwards; the bytes are never modified (Arrow buffers are
// immutable).
func (s *byteSink) bytes() []byte {
	str := s.b.String()
	checkOffsets(len(str))
	return unsafe.Slice(unsafe.StringData(str), len(str))
}

// makeNoZero returns n bytes of memory that is not cleared first (as
// byteSink's), for an output whose bytes are all written before they are
// read; the kernel exposes only those (bytes past them, slack for copies
// that overshoot or an allocation sized from above, are never read).
func makeNoZero(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0) // so that the string's data is the allocation
	return unsafe.Slice(unsafe.StringData(b.String()), n)
}

// makeInt32NoZero is makeNoZero for n int32s (offsets). The allocation is
// aligned for them: the allocator aligns a block of 4k bytes to 4 at least.
func makeInt32NoZero(n int) []int32 {
	if n == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(makeNoZero(4*n)))), n)
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
