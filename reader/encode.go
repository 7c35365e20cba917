package reader

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// encoder turns rows of the batch columns into the arrow_ipc bytes of one
// ReadResponse: a complete Arrow IPC stream (schema message, one record
// batch message, end-of-stream marker). The bytes depend only on the schema
// and the values (buffers are sliced and offsets rebased the same way
// whatever produced the arrays), which is why SIG and LIG readers send
// identical bytes.
type encoder struct {
	schema *arrow.Schema
}

func newEncoder(schema *arrow.Schema) *encoder { return &encoder{schema: schema} }

// encode returns the IPC stream of rows [lo, hi) of cols.
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
	buf := bytes.NewBuffer(make([]byte, 0, size))
	w := ipc.NewWriter(buf, ipc.WithSchema(e.schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	return buf.Bytes(), nil
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
