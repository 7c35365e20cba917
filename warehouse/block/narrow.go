package block

import (
	"fmt"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/transform"
)

// This file stores int64 columns, and the elements of list<int64> columns,
// in the narrowest integer type that holds every value (issue 28): a hash
// into 1,000,003 buckets takes 4 bytes a token, not 8, a bucketize or a
// length 1, and a memo object is read far more often than it is written.
// The segment is still a standard Arrow IPC file of one column (its schema
// says int32, or list<int16>, ...), and the footer keeps the declared type
// in Column.Type and names the stored one in Column.Stored; the decoder
// widens the values back to int64 exactly, so every reader sees the
// declared type and the values it would have seen without narrowing.
//
// What narrows is the values buffer alone, element by element: the
// validity bitmap, the array's offset and a list's offsets are the
// original's, so the Arrow IPC writer lays the narrow array out as it lays
// out the original (the same slicing, the same bitmap bytes), and widening
// the stored values gives back the bytes the original segment would have
// held, null slots included (their values are narrowed and widened like
// any other, never replaced by zeros).
//
// Only integers narrow. A float64 that happens to hold integers is left
// alone: exactness would have to keep -0 and NaN payloads bit for bit, and
// the ops that produce floats (log1p, clip of prices) rarely give integers
// anyway.

// storedInt is the integer type a narrowed int64 is stored as; the zero
// value means none: the column is stored as declared.
type storedInt struct {
	bytes  int // 1, 2 or 4
	signed bool
}

// storedInts are the narrow types, narrowest first; at each width the
// signed type is preferred (what most tools expect of an integer column),
// the unsigned one taken when the values need its top bit (a hash into
// 256 buckets is uint8, not int16).
var storedInts = []storedInt{{1, true}, {1, false}, {2, true}, {2, false}, {4, true}, {4, false}}

func (k storedInt) name() string {
	if k.signed {
		return fmt.Sprintf("int%d", 8*k.bytes)
	}
	return fmt.Sprintf("uint%d", 8*k.bytes)
}

// holds reports whether every integer in [lo, hi] is a value of k.
func (k storedInt) holds(lo, hi int64) bool {
	bits := 8 * k.bytes
	if k.signed {
		return lo >= -1<<(bits-1) && hi <= 1<<(bits-1)-1
	}
	return lo >= 0 && hi <= 1<<bits-1
}

func (k storedInt) arrowType() arrow.DataType {
	switch k {
	case storedInt{1, true}:
		return arrow.PrimitiveTypes.Int8
	case storedInt{1, false}:
		return arrow.PrimitiveTypes.Uint8
	case storedInt{2, true}:
		return arrow.PrimitiveTypes.Int16
	case storedInt{2, false}:
		return arrow.PrimitiveTypes.Uint16
	case storedInt{4, true}:
		return arrow.PrimitiveTypes.Int32
	case storedInt{4, false}:
		return arrow.PrimitiveTypes.Uint32
	}
	return nil
}

// storedName is the footer's Column.Stored for a column of declared type t
// stored as k: the type the segment's schema names (segmentType).
func storedName(t transform.Type, k storedInt) string {
	if t == transform.ListInt64 {
		return "list<" + k.name() + ">"
	}
	return k.name()
}

// parseStored reads the footer's stored type of a column declared t: the
// zero storedInt when stored is empty (the column is stored as declared),
// else the narrow type, which must be one t widens from exactly: an
// integer of at most 32 bits for int64, a list of one for list<int64>.
func parseStored(t transform.Type, stored string) (storedInt, error) {
	if stored == "" {
		return storedInt{}, nil
	}
	if t == transform.Int64 || t == transform.ListInt64 {
		for _, k := range storedInts {
			if storedName(t, k) == stored {
				return k, nil
			}
		}
	}
	return storedInt{}, fmt.Errorf("stored as %q, which does not widen to %s", stored, t)
}

// narrowest returns the narrowest type that holds every value of an int64
// array, or of a list<int64> array's elements: every value in its values
// buffer the array addresses, null slots included (a list's elements from
// the first its child addresses to the last, whatever the list's offsets
// select). ok is false when no type narrower than int64 does, or when
// there are no values to narrow.
func narrowest(t transform.Type, d arrow.ArrayData) (storedInt, bool) {
	if t == transform.ListInt64 {
		if len(d.Children()) != 1 {
			return storedInt{}, false
		}
		d = d.Children()[0]
	} else if t != transform.Int64 {
		return storedInt{}, false
	}
	vals, ok := int64Values(d)
	if !ok || len(vals) == 0 {
		return storedInt{}, false
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	for _, k := range storedInts {
		if k.holds(lo, hi) {
			return k, true
		}
	}
	return storedInt{}, false
}

// int64Values is the values an int64 array's data addresses, from its
// offset; ok is false when its values buffer is shorter than that.
func int64Values(d arrow.ArrayData) ([]int64, bool) {
	off, n := d.Offset(), d.Len()
	bufs := d.Buffers()
	if len(bufs) < 2 || bufs[1] == nil {
		return nil, n == 0
	}
	b := bufs[1].Bytes()
	if off < 0 || n < 0 || len(b) < 8*(off+n) {
		return nil, false
	}
	return arrow.Int64Traits.CastFromBytes(b)[off : off+n], true
}

// narrowType is the Arrow type of a column of Arrow type dt (int64 or a
// list of int64) stored as k: a list keeps its element field's name and
// nullability.
func narrowType(dt arrow.DataType, k storedInt) arrow.DataType {
	if lt, ok := dt.(*arrow.ListType); ok {
		elem := lt.ElemField()
		elem.Type = k.arrowType()
		return arrow.ListOfField(elem)
	}
	return k.arrowType()
}

// narrowArray returns arr (int64 or list<int64>) with its values stored as
// k, which narrowest found holds them all; dt is narrowType's type for it.
func narrowArray(arr arrow.Array, dt arrow.DataType, k storedInt) arrow.Array {
	d := arr.Data()
	var nd arrow.ArrayData
	if _, ok := dt.(*arrow.ListType); ok {
		child := narrowData(d.Children()[0], k)
		nd = array.NewData(dt, d.Len(), d.Buffers(), []arrow.ArrayData{child}, d.NullN(), d.Offset())
		child.Release()
	} else {
		nd = narrowData(d, k)
	}
	defer nd.Release()
	return array.MakeFromData(nd)
}

// narrowData is int64 data d with its values buffer narrowed to k: the
// same length, offset and validity bitmap, a values buffer of k's width
// holding every value d addresses (the slots before its offset, which
// nothing reads, are zero).
func narrowData(d arrow.ArrayData, k storedInt) arrow.ArrayData {
	vals, _ := int64Values(d) // narrowest checked the buffer
	off := d.Offset()
	out := make([]byte, k.bytes*(off+len(vals)))
	dst := out[k.bytes*off:]
	switch k {
	case storedInt{1, true}:
		narrowInto(arrow.Int8Traits.CastFromBytes(dst), vals)
	case storedInt{1, false}:
		narrowInto(arrow.Uint8Traits.CastFromBytes(dst), vals)
	case storedInt{2, true}:
		narrowInto(arrow.Int16Traits.CastFromBytes(dst), vals)
	case storedInt{2, false}:
		narrowInto(arrow.Uint16Traits.CastFromBytes(dst), vals)
	case storedInt{4, true}:
		narrowInto(arrow.Int32Traits.CastFromBytes(dst), vals)
	case storedInt{4, false}:
		narrowInto(arrow.Uint32Traits.CastFromBytes(dst), vals)
	}
	return array.NewData(k.arrowType(), d.Len(), []*memory.Buffer{d.Buffers()[0], memory.NewBufferBytes(out)},
		nil, d.NullN(), off)
}

type narrowInt interface {
	int8 | uint8 | int16 | uint16 | int32 | uint32
}

func narrowInto[T narrowInt](dst []T, src []int64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = T(v)
	}
}

func widenFrom[T narrowInt](dst []int64, src []T) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = int64(v)
	}
}

// widen writes the n values of type k in src to dst as int64s (8n bytes);
// src holds at least k.bytes*n bytes.
func widen(k storedInt, dst, src []byte, n int) {
	d := arrow.Int64Traits.CastFromBytes(dst[:8*n])
	src = src[:k.bytes*n]
	switch k {
	case storedInt{1, true}:
		widenFrom(d, arrow.Int8Traits.CastFromBytes(src))
	case storedInt{1, false}:
		widenFrom(d, arrow.Uint8Traits.CastFromBytes(src))
	case storedInt{2, true}:
		widenFrom(d, arrow.Int16Traits.CastFromBytes(src))
	case storedInt{2, false}:
		widenFrom(d, arrow.Uint16Traits.CastFromBytes(src))
	case storedInt{4, true}:
		widenFrom(d, arrow.Int32Traits.CastFromBytes(src))
	case storedInt{4, false}:
		widenFrom(d, arrow.Uint32Traits.CastFromBytes(src))
	}
}
