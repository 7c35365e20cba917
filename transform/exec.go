package transform

import (
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// PanicError is returned when an op's kernel panics. The executor turns the
// panic into an error so that one faulty op fails only its own task (brief,
// "Beyond the paper" 4: small blast radius).
type PanicError struct {
	Op    string
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("op %s panicked: %v", e.Op, e.Value) }

// Run executes the graph over one record of raw events and returns the
// output column of every requested node, in the order of nodes. The graph
// must have passed Check against a schema whose columns rec carries with the
// same Arrow types. Intermediate columns shared by several requested nodes
// are computed once. The caller releases the returned arrays. Run is the
// executor; a record read from a block or a file goes through a Program,
// which conforms it to the schema first.
func Run(g *Graph, reg *Registry, rec arrow.Record, nodes ...int) (out []arrow.Array, err error) {
	return RunGiven(g, reg, rec, nil, nodes...)
}

// RunGiven is Run with the output of some nodes given rather than computed:
// given[i] is node i's column (a memoized node a reader fetched), so
// neither node i nor the nodes only it needs run, and the record need not
// carry the raw columns only they read. Each given column must have the
// record's rows; RunGiven retains what it keeps and the caller still
// releases the given arrays. Given nodes are what make a cover of memoized
// nodes plus residual ops computable (matching's covers, the reader's
// LOCAL inputs with memo nodes).
func RunGiven(g *Graph, reg *Registry, rec arrow.Record, given map[int]arrow.Array, nodes ...int) (out []arrow.Array, err error) {
	return run(g, reg, rec, given, nil, nodes)
}

func run(g *Graph, reg *Registry, rec arrow.Record, given map[int]arrow.Array, observe func(int, time.Duration), nodes []int) (out []arrow.Array, err error) {
	if len(given) > 0 {
		// A given node has no inputs as far as this run goes: the nodes
		// beneath it are not needed for it.
		pruned := &Graph{Nodes: slices.Clone(g.Nodes)}
		for i, v := range given {
			if i < 0 || i >= len(g.Nodes) {
				return nil, fmt.Errorf("given node %d, but the graph has %d nodes", i, len(g.Nodes))
			}
			if int64(v.Len()) != rec.NumRows() {
				return nil, fmt.Errorf("given column of node %d (%s) has %d rows, the record %d", i, g.Nodes[i].Op, v.Len(), rec.NumRows())
			}
			pruned.Nodes[i].Inputs = nil
		}
		g = pruned
	}
	cols := map[string]arrow.Array{}
	for i, f := range rec.Schema().Fields() {
		cols[f.Name] = rec.Column(i)
	}
	sub := &Graph{Nodes: g.Nodes}
	for _, i := range nodes {
		if i < 0 || i >= len(g.Nodes) {
			return nil, fmt.Errorf("requested node %d, but the graph has %d nodes", i, len(g.Nodes))
		}
		sub.Inputs = append(sub.Inputs, ModelInput{Node: i})
	}
	// The needed nodes, inputs first. Each counts its needed users (plus one
	// per request) so that an intermediate column is released as soon as its
	// last user has run.
	order, err := TopoOrder(sub)
	if err != nil {
		return nil, err
	}
	pending := make([]int, len(g.Nodes)) // users not yet run, plus one per request
	for _, i := range order {
		for _, j := range g.Nodes[i].Inputs {
			pending[j]++
		}
	}
	for _, i := range nodes {
		pending[i]++
	}
	vals := make([]arrow.Array, len(g.Nodes))
	defer func() {
		for _, v := range vals {
			if v != nil {
				v.Release()
			}
		}
	}()
	for _, i := range order {
		n := &g.Nodes[i]
		if v, ok := given[i]; ok {
			v.Retain()
			vals[i] = v
			continue
		}
		if n.Op == "col" {
			name, _ := n.Param("name")
			c, ok := cols[name.Str]
			if !ok {
				return nil, fmt.Errorf("column %q is not in the record", name.Str)
			}
			c.Retain()
			vals[i] = c
			continue
		}
		k := reg.kernels[n.Op]
		if k == nil {
			return nil, fmt.Errorf("op %q has no kernel", n.Op)
		}
		in := make([]arrow.Array, len(n.Inputs))
		for x, j := range n.Inputs {
			if !reg.viewReaders[n.Op] {
				if err := makeContiguous(&vals[j], &g.Nodes[j]); err != nil {
					return nil, err
				}
			}
			in[x] = vals[j]
		}
		var start time.Time
		if observe != nil {
			start = time.Now()
		}
		v, err := runKernel(k, in, n)
		if err != nil {
			return nil, err
		}
		if observe != nil {
			observe(i, time.Since(start))
		}
		vals[i] = v
		for _, j := range n.Inputs {
			if pending[j]--; pending[j] == 0 {
				vals[j].Release()
				vals[j] = nil
			}
		}
	}
	for _, i := range nodes {
		if err := makeContiguous(&vals[i], &g.Nodes[i]); err != nil {
			return nil, err
		}
	}
	out = make([]arrow.Array, len(nodes))
	for x, i := range nodes {
		vals[i].Retain()
		out[x] = vals[i]
	}
	return out, nil
}

// makeContiguous replaces a list-view, which a kernel may return to share
// its input's elements (truncate), with a list holding its rows'
// elements contiguously: kernels read lists, and the columns Run returns
// are stored and sent as lists. The copy is made once per node, however
// many kernels read it.
func makeContiguous(v *arrow.Array, n *Node) (err error) {
	if _, ok := (*v).(*array.ListView); !ok {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Op: n.Op, Value: r, Stack: string(debug.Stack())}
		}
	}()
	c, err := contiguous(*v)
	if err != nil {
		return fmt.Errorf("op %s: %w", n.Op, err)
	}
	(*v).Release()
	*v = c
	return nil
}

func runKernel(k Kernel, in []arrow.Array, n *Node) (v arrow.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &PanicError{Op: n.Op, Value: r, Stack: string(debug.Stack())}
		}
	}()
	v, err = k(in, n)
	if err != nil {
		return nil, err
	}
	if v.Len() != in0Len(in, v) {
		v.Release()
		return nil, fmt.Errorf("op %s returned %d rows for %d", n.Op, v.Len(), in0Len(in, v))
	}
	return v, nil
}

func in0Len(in []arrow.Array, v arrow.Array) int {
	if len(in) == 0 {
		return v.Len()
	}
	return in[0].Len()
}

// CheckRecord verifies that rec carries every column the graph reads with
// the schema's Arrow type, so a malformed block fails with a clear error
// instead of a panic inside a kernel.
func CheckRecord(g *Graph, s *Schema, rec arrow.Record) error {
	for _, n := range g.Nodes {
		if n.Op != "col" {
			continue
		}
		name, _ := n.Param("name")
		f, ok := s.Lookup(name.Str)
		if !ok {
			return fmt.Errorf("column %q is not in schema %q", name.Str, s.Source)
		}
		idx := rec.Schema().FieldIndices(name.Str)
		if len(idx) == 0 {
			return fmt.Errorf("record has no column %q", name.Str)
		}
		if dt := rec.Column(idx[0]).DataType(); !arrow.TypeEqual(dt, f.Type.ArrowType()) {
			return fmt.Errorf("column %q has Arrow type %s, want %s", name.Str, dt, f.Type.ArrowType())
		}
	}
	return nil
}
