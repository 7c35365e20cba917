package block

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/internal/arrowfile"
	"github.com/sigdata/sig/transform"
)

// decodeForeign decodes a segment that is not one batch of the footer's
// type laid out as Encode lays it out: another writer's encoding of the
// type (a raw block object another program wrote), or a segment that is
// broken or mislabelled. Arrow's own reader reads it (internal/arrowfile:
// its metadata checked first, allocations bounded by its size, panics
// recovered), its record batches are converted to t by
// transform.ConformArray, which also checks every buffer against the
// lengths the segment states, and joined. got is the type the segment's
// schema names (segmentType), for the error of a type with no conversion.
func decodeForeign(key string, c Column, t transform.Type, got string, seg []byte, rows int64) (arrow.Array, error) {
	var (
		parts []arrow.Array
		dt    arrow.DataType // the segment's Arrow type
		n     int64
	)
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	field := transform.Field{Name: c.Name, Type: t}
	var refused error // ConformArray's error: no conversion, or a bad value or layout
	err := arrowfile.Read(bytes.NewReader(seg), int64(len(seg)), "segment", func(i int, rec arrow.Record) error {
		if rec.NumCols() != 1 {
			return fmt.Errorf("record batch %d has %d columns, a segment holds one", i, rec.NumCols())
		}
		dt = rec.Schema().Field(0).Type
		a, err := transform.ConformArray(field, rec.Column(0))
		if err != nil {
			refused = err
			return err
		}
		parts = append(parts, a)
		n += int64(a.Len())
		return nil
	})
	if refused != nil {
		// The segment's type, named as the footer would name it when it is
		// one of SIG's (a mislabelled segment), else as Arrow names it.
		holds := got
		if _, err := transform.ParseType(got); err != nil || dt != nil && dt.ID() == arrow.DICTIONARY {
			holds = dt.String()
		}
		return nil, fmt.Errorf("block %s: column %s: segment holds %s, footer says %s: %v: %w",
			key, c.Name, holds, c.Type, refused, ErrCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("block %s: column %s: segment is neither one Arrow IPC batch of %d rows of %s as block.Encode writes it nor another Arrow encoding of it: %v: %w",
			key, c.Name, rows, c.Type, err, ErrCorrupt)
	}
	if n != rows {
		return nil, fmt.Errorf("block %s: column %s: segment of %d rows, footer says %d: %w", key, c.Name, n, rows, ErrCorrupt)
	}
	switch len(parts) {
	case 0:
		return array.MakeArrayOfNull(memory.DefaultAllocator, t.ArrowType(), 0), nil
	case 1:
		a := parts[0]
		parts = nil
		return a, nil
	}
	a, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("block %s: column %s: joining the segment's record batches: %v: %w", key, c.Name, err, ErrCorrupt)
	}
	return a, nil
}
