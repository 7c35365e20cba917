package reader

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
)

// encoder turns rows of the batch columns into the arrow_ipc bytes of one
// ReadResponse: a complete Arrow IPC stream (schema message, one record
// batch message, end-of-stream marker). The bytes depend only on the schema
// and the values (buffers are sliced and offsets rebased the same way
// whatever produced the arrays), which is why SIG and LIG readers send
// identical bytes.
//
// An encoder serves one stream and reuses its memory from batch to batch:
// the output buffer, and the scratch buffers Arrow's writer allocates to
// rebase offsets (through a recycling allocator). In SIG mode encoding is
// half of what a reader does, and fresh buffers for every batch cost more
// in zeroing and garbage collection than the copying itself.
type encoder struct {
	schema *arrow.Schema
	out    bytes.Buffer
	mem    recycler
}

func newEncoder(schema *arrow.Schema) *encoder { return &encoder{schema: schema} }

// encode returns the IPC stream of rows [lo, hi) of cols. The bytes are
// valid until the next call.
func (e *encoder) encode(cols []arrow.Array, lo, hi int64) ([]byte, error) {
	sliced := make([]arrow.Array, len(cols))
	size := 1024
	for i, c := range cols {
		sliced[i] = array.NewSlice(c, lo, hi)
		size += sliceBytes(sliced[i])
	}
	rec := array.NewRecord(e.schema, sliced, hi-lo)
	for _, c := range sliced {
		c.Release()
	}
	defer rec.Release()
	e.out.Reset()
	e.out.Grow(size)
	w := ipc.NewWriter(&e.out, ipc.WithSchema(e.schema), ipc.WithAllocator(&e.mem))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	return e.out.Bytes(), nil
}

// recycler is a memory.Allocator for one goroutine that keeps freed
// buffers, by power-of-two capacity, for the next allocation of that class.
// Allocations are zeroed, as Go's are: Arrow's writer leaves padding bytes
// it does not write, and recycled garbage there would make the stream's
// bytes depend on history.
type recycler struct {
	free [48][][]byte
}

func sizeClass(n int) int {
	c := 6 // 64 bytes at least
	for 1<<c < n {
		c++
	}
	return c
}

// Allocate implements memory.Allocator.
func (r *recycler) Allocate(size int) []byte {
	c := sizeClass(size)
	if l := r.free[c]; len(l) > 0 {
		b := l[len(l)-1][:size]
		r.free[c] = l[:len(l)-1]
		clear(b)
		return b
	}
	return make([]byte, size, 1<<c)
}

// Reallocate implements memory.Allocator.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

// Free implements memory.Allocator.
func (r *recycler) Free(b []byte) {
	c := sizeClass(cap(b))
	if cap(b) == 1<<c && len(r.free[c]) < 16 {
		r.free[c] = append(r.free[c], b[:0])
	}
}

// sliceBytes estimates the encoded size of a sliced array, to size the
// output buffer once.
func sliceBytes(a arrow.Array) int {
	n := 64 + a.Len()/8 + 8
	switch a := a.(type) {
	case *array.String:
		n += 4*a.Len() + 4 + int(a.ValueOffset64(a.Len())-a.ValueOffset64(0))
	case *array.List:
		if a.Len() > 0 {
			lo, _ := a.ValueOffsets(0)
			_, hi := a.ValueOffsets(a.Len() - 1)
			child := array.NewSlice(a.ListValues(), lo, hi)
			n += 4*a.Len() + 4 + sliceBytes(child)
			child.Release()
		}
	default:
		n += 8 * a.Len()
	}
	return n
}
