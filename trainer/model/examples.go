package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/transform"
)

// ErrInvalidConfig reports a model that cannot be built: an input of a type
// the model cannot consume, no inputs, a size out of range. It is permanent
// (paper VI.A, "invalid model configurations").
var ErrInvalidConfig = errors.New("model: invalid configuration")

// Input is one model input: a batch column.
type Input struct {
	Name string
	Type transform.Type
}

// Categorical reports whether the input feeds an embedding table.
func (in Input) Categorical() bool {
	switch in.Type {
	case transform.Int64, transform.String, transform.ListInt64, transform.ListString:
		return true
	}
	return false
}

// Features is the model's view of a batch: which inputs are embedded
// (sparse) and which are dense, in the order of the inputs.
type Features struct {
	Inputs []Input
	// Sparse and Dense index Inputs.
	Sparse, Dense []int
}

// NewFeatures checks the inputs and splits them into sparse and dense.
func NewFeatures(inputs []Input) (Features, error) {
	f := Features{Inputs: inputs}
	if len(inputs) == 0 {
		return f, fmt.Errorf("%w: no model inputs", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for i, in := range inputs {
		if in.Name == "" || seen[in.Name] {
			return f, fmt.Errorf("%w: input %d: empty or duplicate name %q", ErrInvalidConfig, i, in.Name)
		}
		seen[in.Name] = true
		switch {
		case in.Categorical():
			f.Sparse = append(f.Sparse, i)
		case in.Type == transform.Float64:
			f.Dense = append(f.Dense, i)
		default:
			return f, fmt.Errorf("%w: input %q has type %v, which the model cannot consume", ErrInvalidConfig, in.Name, in.Type)
		}
	}
	return f, nil
}

// SparseColumn is one categorical input of a set of examples: example j's
// feature ids are IDs[Offsets[j]:Offsets[j+1]].
type SparseColumn struct {
	Offsets []int32
	IDs     []uint64
}

// Examples is a set of training examples in columns: the host's input
// buffer and the batches it sends.
type Examples struct {
	EventIDs []int64
	Labels   []float32
	// Sparse[k] is the k-th sparse input (Features.Sparse[k]); Dense[k] the
	// k-th dense input, already transformed (sign(x)·log1p(|x|), null = 0).
	Sparse []SparseColumn
	Dense  [][]float32
}

// NewExamples returns an empty set shaped for f.
func NewExamples(f Features) *Examples {
	e := &Examples{Sparse: make([]SparseColumn, len(f.Sparse)), Dense: make([][]float32, len(f.Dense))}
	for k := range e.Sparse {
		e.Sparse[k].Offsets = []int32{0}
	}
	return e
}

// Len is the number of examples.
func (e *Examples) Len() int { return len(e.EventIDs) }

// Check verifies that the columns agree in length and offsets are sane (for
// examples decoded from the wire).
func (e *Examples) Check(f Features) error {
	n := len(e.EventIDs)
	if len(e.Labels) != n {
		return fmt.Errorf("model: %d labels for %d examples", len(e.Labels), n)
	}
	if len(e.Sparse) != len(f.Sparse) || len(e.Dense) != len(f.Dense) {
		return fmt.Errorf("model: %d sparse and %d dense columns, want %d and %d", len(e.Sparse), len(e.Dense), len(f.Sparse), len(f.Dense))
	}
	for k, c := range e.Sparse {
		if len(c.Offsets) != n+1 || c.Offsets[0] != 0 || int(c.Offsets[n]) != len(c.IDs) {
			return fmt.Errorf("model: sparse column %d: %d offsets for %d examples and %d ids", k, len(c.Offsets), n, len(c.IDs))
		}
		for j := 0; j < n; j++ {
			if c.Offsets[j+1] < c.Offsets[j] {
				return fmt.Errorf("model: sparse column %d: offsets decrease at example %d", k, j)
			}
		}
	}
	for k, c := range e.Dense {
		if len(c) != n {
			return fmt.Errorf("model: dense column %d: %d values for %d examples", k, len(c), n)
		}
	}
	return nil
}

// Append adds o's examples after e's.
func (e *Examples) Append(o *Examples) {
	e.EventIDs = append(e.EventIDs, o.EventIDs...)
	e.Labels = append(e.Labels, o.Labels...)
	for k := range e.Sparse {
		base := e.Sparse[k].Offsets[len(e.Sparse[k].Offsets)-1]
		for _, off := range o.Sparse[k].Offsets[1:] {
			e.Sparse[k].Offsets = append(e.Sparse[k].Offsets, base+off)
		}
		e.Sparse[k].IDs = append(e.Sparse[k].IDs, o.Sparse[k].IDs...)
	}
	for k := range e.Dense {
		e.Dense[k] = append(e.Dense[k], o.Dense[k]...)
	}
}

// Slice returns a copy of examples [from, to).
func (e *Examples) Slice(from, to int) *Examples {
	s := &Examples{
		EventIDs: append([]int64(nil), e.EventIDs[from:to]...),
		Labels:   append([]float32(nil), e.Labels[from:to]...),
		Sparse:   make([]SparseColumn, len(e.Sparse)),
		Dense:    make([][]float32, len(e.Dense)),
	}
	for k, c := range e.Sparse {
		lo, hi := c.Offsets[from], c.Offsets[to]
		offs := make([]int32, 0, to-from+1)
		for _, o := range c.Offsets[from : to+1] {
			offs = append(offs, o-lo)
		}
		s.Sparse[k] = SparseColumn{Offsets: offs, IDs: append([]uint64(nil), c.IDs[lo:hi]...)}
	}
	for k, c := range e.Dense {
		s.Dense[k] = append([]float32(nil), c[from:to]...)
	}
	return s
}

// DropFront removes the first n examples in place.
func (e *Examples) DropFront(n int) {
	e.EventIDs = append(e.EventIDs[:0], e.EventIDs[n:]...)
	e.Labels = append(e.Labels[:0], e.Labels[n:]...)
	for k := range e.Sparse {
		c := &e.Sparse[k]
		lo := c.Offsets[n]
		c.IDs = append(c.IDs[:0], c.IDs[lo:]...)
		offs := c.Offsets[:0]
		for _, o := range c.Offsets[n:] {
			offs = append(offs, o-lo)
		}
		c.Offsets = offs
	}
	for k := range e.Dense {
		e.Dense[k] = append(e.Dense[k][:0], e.Dense[k][n:]...)
	}
}

// DenseValue is the transform applied to a float64 input: sign(x)·log1p(|x|),
// 0 for null or NaN.
func DenseValue(x float64) float32 {
	if math.IsNaN(x) {
		return 0
	}
	return float32(math.Copysign(math.Log1p(math.Abs(x)), x))
}

// AppendRecord appends the rows of a reader batch: event_id, the label
// column (an int64 raw column, e.g. click; null = 0) and every model input
// by name.
func (e *Examples) AppendRecord(f Features, rec arrow.Record, label string) error {
	idx := func(name string) (arrow.Array, error) {
		is := rec.Schema().FieldIndices(name)
		if len(is) != 1 {
			return nil, fmt.Errorf("model: batch has %d columns named %q", len(is), name)
		}
		return rec.Column(is[0]), nil
	}
	n := int(rec.NumRows())
	col, err := idx(transform.ColEventID)
	if err != nil {
		return err
	}
	ids, ok := col.(*array.Int64)
	if !ok {
		return fmt.Errorf("model: event_id is %s, want int64", col.DataType())
	}
	col, err = idx(label)
	if err != nil {
		return err
	}
	lab, ok := col.(*array.Int64)
	if !ok {
		return fmt.Errorf("model: label %q is %s, want int64", label, col.DataType())
	}
	for j := 0; j < n; j++ {
		e.EventIDs = append(e.EventIDs, ids.Value(j))
		var y float32
		if lab.IsValid(j) && lab.Value(j) != 0 {
			y = 1
		}
		e.Labels = append(e.Labels, y)
	}
	for k, ii := range f.Sparse {
		in := f.Inputs[ii]
		col, err := idx(in.Name)
		if err != nil {
			return err
		}
		if err := appendSparse(&e.Sparse[k], in, col); err != nil {
			return err
		}
	}
	for k, ii := range f.Dense {
		in := f.Inputs[ii]
		col, err := idx(in.Name)
		if err != nil {
			return err
		}
		a, ok := col.(*array.Float64)
		if !ok {
			return fmt.Errorf("model: input %q is %s, want float64", in.Name, col.DataType())
		}
		for j := 0; j < n; j++ {
			v := float32(0)
			if a.IsValid(j) {
				v = DenseValue(a.Value(j))
			}
			e.Dense[k] = append(e.Dense[k], v)
		}
	}
	return nil
}

func appendSparse(c *SparseColumn, in Input, col arrow.Array) error {
	n := col.Len()
	wrong := func() error {
		return fmt.Errorf("model: input %q is %s, want %v", in.Name, col.DataType(), in.Type)
	}
	push := func() { c.Offsets = append(c.Offsets, int32(len(c.IDs))) }
	switch in.Type {
	case transform.Int64:
		a, ok := col.(*array.Int64)
		if !ok {
			return wrong()
		}
		for j := 0; j < n; j++ {
			if a.IsValid(j) {
				c.IDs = append(c.IDs, transform.HashInt64(a.Value(j)))
			}
			push()
		}
	case transform.String:
		a, ok := col.(*array.String)
		if !ok {
			return wrong()
		}
		for j := 0; j < n; j++ {
			if a.IsValid(j) {
				c.IDs = append(c.IDs, transform.HashBytes([]byte(a.Value(j))))
			}
			push()
		}
	case transform.ListInt64, transform.ListString:
		l, ok := col.(*array.List)
		if !ok {
			return wrong()
		}
		offs := l.Offsets()
		switch vals := l.ListValues().(type) {
		case *array.Int64:
			if in.Type != transform.ListInt64 {
				return wrong()
			}
			for j := 0; j < n; j++ {
				if l.IsValid(j) {
					for v := offs[j]; v < offs[j+1]; v++ {
						if vals.IsValid(int(v)) {
							c.IDs = append(c.IDs, transform.HashInt64(vals.Value(int(v))))
						}
					}
				}
				push()
			}
		case *array.String:
			if in.Type != transform.ListString {
				return wrong()
			}
			for j := 0; j < n; j++ {
				if l.IsValid(j) {
					for v := offs[j]; v < offs[j+1]; v++ {
						if vals.IsValid(int(v)) {
							c.IDs = append(c.IDs, transform.HashBytes([]byte(vals.Value(int(v)))))
						}
					}
				}
				push()
			}
		default:
			return wrong()
		}
	default:
		return wrong()
	}
	return nil
}
