package reader

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/transform"
)

// Exact event-time ranges (issue 29). A read solution names the blocks
// that overlap its range, and a block's rows span its whole window, so a
// unit of a block the range cuts carries the range (WorkUnit.event_range)
// and holds only the rows whose event_time lies in it. The rows are
// selected where the unit is read, after its columns are made over the
// whole block (memo objects are per block, and a LOCAL input is computed
// over the block as a worker computes it): the same selection of the same
// values, so SIG, LIG and mixed units of one range stay byte-identical,
// and the unit's rows, numbered from 0 in block order, are what start_row,
// the batches and the summary count, so a trimmed unit resumes and is
// counted as a whole one is.

// eventRuns returns the runs [lo, hi) of rows whose time is in [from, to),
// in row order, merged where adjacent. A null time is in no range.
func eventRuns(times *array.Int64, from, to int64) [][2]int64 {
	var runs [][2]int64
	v := times.Int64Values()
	nulls := times.NullN() != 0
	for r, t := range v {
		if t < from || t >= to || nulls && times.IsNull(r) {
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k][1] == int64(r) {
			runs[k][1]++
		} else {
			runs = append(runs, [2]int64{int64(r), int64(r) + 1})
		}
	}
	return runs
}

// trimRows returns the unit's rows of cols, the batch columns over the
// whole block raw (which holds event_time): those whose event_time lies
// in events, in block order, and their number. cols are released (or
// returned, when every row is the unit's). Rows in one run (event times
// in order, the common case) are a slice of the columns, no copy; rows in
// several runs (late events, blocks of several partitions) are copied
// into new columns, once per unit.
func trimRows(raw arrow.Record, cols []arrow.Array, events [2]int64) ([]arrow.Array, int64, error) {
	n := raw.NumRows()
	idx := raw.Schema().FieldIndices(transform.ColEventTime)
	if len(idx) == 0 {
		release(cols)
		return nil, 0, fmt.Errorf("%w: the raw block's event_time was not read", ErrInvalidUnit)
	}
	times, ok := raw.Column(idx[0]).(*array.Int64)
	if !ok {
		release(cols)
		return nil, 0, fmt.Errorf("%w: the raw block's event_time is %s, not int64", ErrCorrupt, raw.Column(idx[0]).DataType())
	}
	runs := eventRuns(times, events[0], events[1])
	switch {
	case len(runs) == 1 && runs[0] == [2]int64{0, n}:
		return cols, n, nil
	case len(runs) <= 1:
		lo, hi := int64(0), int64(0)
		if len(runs) == 1 {
			lo, hi = runs[0][0], runs[0][1]
		}
		out := make([]arrow.Array, len(cols))
		for i, c := range cols {
			out[i] = array.NewSlice(c, lo, hi)
		}
		release(cols)
		return out, hi - lo, nil
	}
	rows := int64(0)
	for _, r := range runs {
		rows += r[1] - r[0]
	}
	out := make([]arrow.Array, 0, len(cols))
	parts := make([]arrow.Array, len(runs))
	for i, c := range cols {
		for k, r := range runs {
			parts[k] = array.NewSlice(c, r[0], r[1])
		}
		cat, err := array.Concatenate(parts, memory.DefaultAllocator)
		release(parts)
		if err != nil {
			release(out)
			release(cols)
			return nil, 0, fmt.Errorf("selecting the rows of column %d in the event range: %w", i, err)
		}
		out = append(out, cat)
	}
	release(cols)
	return out, rows, nil
}

func release(as []arrow.Array) {
	for _, a := range as {
		if a != nil {
			a.Release()
		}
	}
}
