package record

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/transform"
)

// Row encodes row i of rec as one record value. rec holds the schema's
// columns in schema order, each of the schema's Arrow type: what
// transform.Conform returns for the schema's field names, so a file any
// Arrow producer wrote (dictionary-encoded or large strings, list views)
// is converted there, once, and encoded here like a generated event. A
// list with a null element has no record encoding and is an error naming
// the column and row.
func (e *Encoder) Row(rec arrow.Record, i int) ([]byte, error) {
	if int(rec.NumCols()) != len(e.schema.Fields) {
		return nil, fmt.Errorf("record: %d columns, schema %q has %d", rec.NumCols(), e.schema.Source, len(e.schema.Fields))
	}
	e.Begin()
	for c, f := range e.schema.Fields {
		col := rec.Column(c)
		if !arrow.TypeEqual(col.DataType(), f.Type.ArrowType()) {
			return nil, fmt.Errorf("record: column %q has Arrow type %s, want %s (transform.Conform converts it)", f.Name, col.DataType(), f.Type.ArrowType())
		}
		if col.IsNull(i) {
			e.Null()
			continue
		}
		switch f.Type {
		case transform.Int64:
			e.Int64(col.(*array.Int64).Value(i))
		case transform.Float64:
			e.Float64(col.(*array.Float64).Value(i))
		case transform.String:
			e.String(col.(*array.String).Value(i))
		case transform.ListString, transform.ListInt64:
			l := col.(*array.List)
			lo, hi := l.ValueOffsets(i)
			vals := l.ListValues()
			for j := lo; j < hi; j++ {
				if vals.IsNull(int(j)) {
					return nil, fmt.Errorf("record: column %q row %d: a list element is null, which records cannot hold", f.Name, i)
				}
			}
			if f.Type == transform.ListString {
				s := vals.(*array.String)
				out := make([]string, 0, hi-lo)
				for j := lo; j < hi; j++ {
					out = append(out, s.Value(int(j)))
				}
				e.StringList(out)
			} else {
				e.Int64List(vals.(*array.Int64).Int64Values()[lo:hi])
			}
		default:
			return nil, fmt.Errorf("record: column %q has type %s, which records cannot hold", f.Name, f.Type)
		}
	}
	return e.Bytes(), nil
}
